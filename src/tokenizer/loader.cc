// Tokenizer::FromDirectory / FromTokenizerJson / FromVocab: reading HF's
// tokenizer.json, or vocab.txt + tokenizer_config.json as transformers'
// BertTokenizerFast would build it.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bertrt/tokenizer.h"
#include "core/files.h"
#include "tokenizer/bert_tokenizer.h"
#include "tokenizer/json_parts.h"

namespace bertrt {
namespace tokenizer {

using nlohmann::json;

std::string TypeOf(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string("?");
}

// A template from TemplateProcessing's "single"/"pair" lists.
static StatusOr<std::vector<TemplateItem>> ParseTemplate(const json& items, const json& special) {
  std::vector<TemplateItem> out;
  for (const json& item : items) {
    TemplateItem t;
    if (item.contains("Sequence")) {
      const json& seq = item["Sequence"];
      const std::string id = seq.at("id").get<std::string>();
      if (id != "A" && id != "B") return InvalidArgument("template sequence id must be A or B");
      t.sequence = id == "A" ? 0 : 1;
      t.type_id = seq.value("type_id", 0);
    } else if (item.contains("SpecialToken")) {
      const json& tok = item["SpecialToken"];
      const std::string id = tok.at("id").get<std::string>();
      if (!special.contains(id)) {
        return InvalidArgument("template special token '" + id + "' is not in special_tokens");
      }
      t.ids = special[id].at("ids").get<std::vector<int32_t>>();
      t.type_id = tok.value("type_id", 0);
    } else {
      return InvalidArgument("template items must be Sequence or SpecialToken");
    }
    out.push_back(std::move(t));
  }
  return out;
}

// BertProcessing: [CLS] A [SEP] (type 0) and B [SEP] (type 1).
PostProcessor BertTemplate(int32_t cls, int32_t sep) {
  PostProcessor p;
  p.single = {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}};
  p.pair = {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}, {1, {}, 1}, {-1, {sep}, 1}};
  return p;
}

StatusOr<PostProcessor> ParsePostProcessor(const json& pp, TokenizerSettings& settings,
                                           OffsetTrim* trim) {
  if (pp.is_null()) return PostProcessor{};
  const std::string type = TypeOf(pp);
  if (type == "Sequence" && trim != nullptr) {
    // HF applies each in turn; trimming and at most one template compose.
    PostProcessor result;
    bool have_template = false;
    for (const json& step : pp.at("processors")) {
      const std::string step_type = TypeOf(step);
      ASSIGN_OR_RETURN(PostProcessor p, ParsePostProcessor(step, settings, trim));
      if (step_type == "ByteLevel") continue;
      if (have_template) {
        return Unimplemented("a post_processor Sequence with two templates is not supported");
      }
      result = std::move(p);
      have_template = true;
    }
    return result;
  }
  if (type == "ByteLevel" && trim != nullptr) {
    trim->on |= pp.value("trim_offsets", true);
    trim->add_prefix_space = pp.value("add_prefix_space", true);
    return PostProcessor{};
  }
  if (type == "RobertaProcessing" && trim != nullptr) {
    settings.cls_token = pp.at("cls").at(0).get<std::string>();
    settings.sep_token = pp.at("sep").at(0).get<std::string>();
    if (pp.value("trim_offsets", true)) {
      trim->on = true;
      trim->add_prefix_space = pp.value("add_prefix_space", true);
    }
    // <s> A </s> and <s> A </s></s> B </s>, every type id 0, as HF's.
    const int32_t cls = pp.at("cls").at(1).get<int32_t>();
    const int32_t sep = pp.at("sep").at(1).get<int32_t>();
    PostProcessor p;
    p.single = {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}};
    p.pair = {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep, sep}, 0}, {1, {}, 0}, {-1, {sep}, 0}};
    return p;
  }
  if (type == "BertProcessing") {
    settings.cls_token = pp.at("cls").at(0).get<std::string>();
    settings.sep_token = pp.at("sep").at(0).get<std::string>();
    return BertTemplate(pp.at("cls").at(1).get<int32_t>(), pp.at("sep").at(1).get<int32_t>());
  }
  if (type != "TemplateProcessing") {
    return Unimplemented("post_processor type '" + type +
                         "' is not supported; bertrt supports TemplateProcessing, BertProcessing, "
                         "RobertaProcessing, ByteLevel and a Sequence of them");
  }
  const json& special = pp.at("special_tokens");
  PostProcessor p;
  ASSIGN_OR_RETURN(p.single, ParseTemplate(pp.at("single"), special));
  ASSIGN_OR_RETURN(p.pair, ParseTemplate(pp.at("pair"), special));
  // The template's first and last special tokens play [CLS] and [SEP].
  const json& single = pp.at("single");
  if (!single.empty() && single.front().contains("SpecialToken")) {
    settings.cls_token = single.front()["SpecialToken"].at("id").get<std::string>();
  }
  if (!single.empty() && single.back().contains("SpecialToken")) {
    settings.sep_token = single.back()["SpecialToken"].at("id").get<std::string>();
  }
  return p;
}

}  // namespace tokenizer

namespace {

using nlohmann::json;
using tokenizer::AddedToken;
using tokenizer::PostProcessor;
using tokenizer::TemplateItem;
using tokenizer::TokenizerParts;
using tokenizer::TypeOf;

constexpr const char* kSupported =
    "bertrt supports WordPiece, Unigram and BPE tokenizer.json files";

StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  return ReadRegularFile(path.string());
}

StatusOr<TokenizerParts> ParseTokenizerJson(const json& root) {
  TokenizerParts parts;
  TokenizerSettings& s = parts.settings;
  const json& model = root.at("model");
  const std::string model_type = TypeOf(model);
  if (model_type != "WordPiece" &&
      !(model_type == "?" && model.contains("continuing_subword_prefix"))) {
    return Unimplemented("tokenizer.json has a '" + model_type + "' model; " + kSupported);
  }
  s.unk_token = model.value("unk_token", std::string("[UNK]"));
  s.continuing_subword_prefix = model.value("continuing_subword_prefix", std::string("##"));
  s.max_input_chars_per_word = model.value("max_input_chars_per_word", 100);
  for (const auto& [token, id] : model.at("vocab").items()) {
    parts.vocab.emplace_back(token, id.get<int32_t>());
  }

  const json& normalizer = root.value("normalizer", json());
  if (normalizer.is_null()) {
    parts.has_normalizer = false;
  } else if (TypeOf(normalizer) == "BertNormalizer") {
    s.clean_text = normalizer.value("clean_text", true);
    s.handle_chinese_chars = normalizer.value("handle_chinese_chars", true);
    s.lowercase = normalizer.value("lowercase", true);
    const json& strip = normalizer.value("strip_accents", json());
    if (!strip.is_null()) s.strip_accents = strip.get<bool>();
  } else {
    return Unimplemented("normalizer type '" + TypeOf(normalizer) + "' is not supported; " +
                         kSupported);
  }
  const json& pre = root.value("pre_tokenizer", json());
  if (TypeOf(pre) != "BertPreTokenizer") {
    return Unimplemented("pre_tokenizer type '" + TypeOf(pre) + "' is not supported; " +
                         kSupported);
  }
  for (const json& a : root.value("added_tokens", json::array())) {
    AddedToken t;
    t.content = a.at("content").get<std::string>();
    t.id = a.at("id").get<int32_t>();
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    parts.added_tokens.push_back(std::move(t));
  }
  ASSIGN_OR_RETURN(parts.post_processor,
                   tokenizer::ParsePostProcessor(root.value("post_processor", json()), s, nullptr));
  // Only decoding (TEI's /decode) reads it; a type other than WordPiece
  // decodes as WordPiece with the model's prefix.
  const json& decoder = root.value("decoder", json());
  parts.wordpiece_decoder = !decoder.is_null();
  parts.decoder_prefix = s.continuing_subword_prefix;
  if (decoder.is_object() && TypeOf(decoder) == "WordPiece") {
    parts.decoder_prefix = decoder.value("prefix", s.continuing_subword_prefix);
    parts.decoder_cleanup = decoder.value("cleanup", true);
  }
  // The file's own "truncation" and "padding" blocks are ignored on purpose:
  // bertrt batches ragged sequences, and truncation is a per-call option of
  // Encode. Only the pad token's name is taken from "padding".
  const json& padding = root.value("padding", json());
  if (padding.is_object() && padding.contains("pad_token") && padding["pad_token"].is_string()) {
    s.pad_token = padding["pad_token"].get<std::string>();
  }
  return parts;
}

// Plain BERT WordPiece files keep the fused BertTokenizer (normalizer,
// pre-tokenizer and WordPiece in one pass over code points, 18-21x HF's
// speed); every other combination goes through the component pipeline.
bool IsBertWordPiece(const json& root) {
  if (!root.contains("model")) return true;  // let the WordPiece parser name what is missing
  const json& model = root["model"];
  const std::string model_type = TypeOf(model);
  const bool wordpiece = model_type == "WordPiece" ||
                         (model_type == "?" && model.is_object() &&
                          model.contains("continuing_subword_prefix") && !model.contains("merges"));
  const json& normalizer = root.value("normalizer", json());
  const json& pre = root.value("pre_tokenizer", json());
  const json& post = root.value("post_processor", json());
  const std::string post_type = TypeOf(post);
  return wordpiece && (normalizer.is_null() || TypeOf(normalizer) == "BertNormalizer") &&
         TypeOf(pre) == "BertPreTokenizer" &&
         (post.is_null() || post_type == "TemplateProcessing" || post_type == "BertProcessing");
}

// A special token in tokenizer_config.json / special_tokens_map.json: a string
// or an AddedToken object with "content".
std::optional<std::string> TokenName(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

StatusOr<json> ReadJsonFile(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path.string() + " is not valid JSON");
  return j;
}

StatusOr<std::shared_ptr<Tokenizer>> FromVocabDirectory(const std::filesystem::path& dir) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(dir / "vocab.txt"));
  std::vector<std::string> vocab;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // HF trims trailing whitespace of each line (which also drops a '\r').
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    vocab.push_back(std::move(line));
  }
  TokenizerSettings s;
  json config = json::object();
  if (std::filesystem::exists(dir / "tokenizer_config.json")) {
    ASSIGN_OR_RETURN(config, ReadJsonFile(dir / "tokenizer_config.json"));
  }
  json special_map = json::object();
  if (std::filesystem::exists(dir / "special_tokens_map.json")) {
    ASSIGN_OR_RETURN(special_map, ReadJsonFile(dir / "special_tokens_map.json"));
  }
  if (!config.is_object())
    return InvalidArgument((dir / "tokenizer_config.json").string() + " must hold a JSON object");
  // Typed reads: a wrong type is this model's load error ({"do_lower_case":
  // "yes"} threw out of the loader and aborted the server, issue 44 D8).
  auto flag = [&](const char* key, bool fallback) -> StatusOr<bool> {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
      return InvalidArgument((dir / "tokenizer_config.json").string() + ": \"" + key +
                             "\" must be true or false, not " + it->dump());
    return it->get<bool>();
  };
  ASSIGN_OR_RETURN(s.lowercase, flag("do_lower_case", true));
  ASSIGN_OR_RETURN(s.handle_chinese_chars, flag("tokenize_chinese_chars", true));
  if (auto strip = config.find("strip_accents"); strip != config.end() && !strip->is_null()) {
    ASSIGN_OR_RETURN(s.strip_accents, flag("strip_accents", false));
  }
  const std::pair<const char*, std::string*> names[] = {
      {"unk_token", &s.unk_token}, {"sep_token", &s.sep_token},   {"pad_token", &s.pad_token},
      {"cls_token", &s.cls_token}, {"mask_token", &s.mask_token},
  };
  for (const auto& [key, field] : names) {
    if (auto name = TokenName(config, key)) *field = *name;
    if (auto name = TokenName(special_map, key)) *field = *name;
  }
  return Tokenizer::FromVocab(std::move(vocab), std::move(s));
}

}  // namespace

StatusOr<std::shared_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(std::string_view text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgument("tokenizer.json is not a valid JSON object");
  }
  try {
    if (!IsBertWordPiece(root)) return tokenizer::LoadPipelineTokenizer(root);
    ASSIGN_OR_RETURN(TokenizerParts parts, ParseTokenizerJson(root));
    return tokenizer::BertTokenizer::Create(std::move(parts));
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed tokenizer.json: ") + e.what());
  }
}

StatusOr<std::shared_ptr<Tokenizer>> Tokenizer::FromVocab(std::vector<std::string> vocab,
                                                          TokenizerSettings settings) {
  // As tokenizers' BertWordPieceTokenizer: [CLS]/[SEP] must be in the
  // vocabulary, and the special tokens that are in it are added tokens.
  TokenizerParts parts;
  for (size_t i = 0; i < vocab.size(); ++i) {
    parts.vocab.emplace_back(std::move(vocab[i]), static_cast<int32_t>(i));
  }
  parts.settings = std::move(settings);
  const TokenizerSettings& s = parts.settings;
  auto find = [&](const std::string& token) {
    int32_t id = -1;
    for (const auto& [t, i] : parts.vocab) {
      if (t == token) id = i;  // the last duplicate wins, as in a HashMap
    }
    return id;
  };
  const int32_t cls = find(s.cls_token);
  const int32_t sep = find(s.sep_token);
  if (cls < 0 || sep < 0) {
    return InvalidArgument("the vocabulary lacks the cls_token '" + s.cls_token +
                           "' or the sep_token '" + s.sep_token + "'");
  }
  parts.post_processor = tokenizer::BertTemplate(cls, sep);
  std::vector<std::string> specials = {s.unk_token, s.sep_token, s.cls_token, s.pad_token,
                                       s.mask_token};
  for (const std::string& token : specials) {
    const int32_t id = find(token);
    bool seen = false;
    for (const AddedToken& a : parts.added_tokens) seen |= a.content == token;
    if (id >= 0 && !seen)
      parts.added_tokens.push_back({token, id, true, false, false, false, false});
  }
  return tokenizer::BertTokenizer::Create(std::move(parts));
}

StatusOr<std::shared_ptr<Tokenizer>> Tokenizer::FromDirectory(const std::string& dir) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  if (std::filesystem::exists(path / "tokenizer.json", ec)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path / "tokenizer.json"));
    auto t = FromTokenizerJson(text);
    if (!t.ok()) {
      return Status(t.status().code(),
                    (path / "tokenizer.json").string() + ": " + t.status().message());
    }
    return t;
  }
  if (std::filesystem::exists(path / "vocab.txt", ec)) return FromVocabDirectory(path);
  // SentencePiece models without tokenizer.json: bertrt reads only
  // tokenizer.json, which transformers writes from them exactly as HF's own
  // fast tokenizer is built (the conversion that defines HF's behaviour).
  for (const char* name : {"sentencepiece.bpe.model", "spiece.model", "tokenizer.model"}) {
    if (!std::filesystem::exists(path / name, ec)) continue;
    return NotFound(
        (path / name).string() +
        " is a SentencePiece model and the directory has no tokenizer.json; bertrt reads "
        "tokenizer.json only. Convert it once with transformers (pip install transformers "
        "sentencepiece protobuf):\n  python3 -c \"from transformers import AutoTokenizer; "
        "AutoTokenizer.from_pretrained('" +
        dir + "').save_pretrained('" + dir + "')\"");
  }
  return NotFound("no tokenizer.json or vocab.txt in " + dir +
                  "; a model directory from the HF hub has one of them");
}

}  // namespace bertrt
