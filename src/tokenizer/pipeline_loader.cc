// tokenizer.json -> the component pipeline: each normalizer, pre-tokenizer,
// model and decoder object read into its component, with an Unimplemented
// error naming any type bertrt does not have and an InvalidArgument one for
// values that make no sense.
#include <cmath>

#include "tokenizer/bpe.h"
#include "tokenizer/json_parts.h"
#include "tokenizer/pipeline_tokenizer.h"
#include "tokenizer/scratch.h"
#include "tokenizer/unigram.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece.h"

namespace bertrt::tokenizer {
namespace {

using nlohmann::json;

StatusOr<std::string> Base64Decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) return InvalidArgument("precompiled_charsmap is not valid base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// A Split or Replace pattern: {"String": s} (literal) or {"Regex": r}.
StatusOr<std::shared_ptr<const Regex>> ParsePattern(const json& pattern) {
  if (pattern.is_object() && pattern.contains("String")) {
    return Regex::Literal(pattern["String"].get<std::string>());
  }
  if (pattern.is_object() && pattern.contains("Regex")) {
    return Regex::Compile(pattern["Regex"].get<std::string>());
  }
  return InvalidArgument("a pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

StatusOr<SplitBehavior> ParseBehavior(const json& j) {
  const std::string b = j.is_string() ? j.get<std::string>() : std::string();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgument("unknown split behavior '" + b + "'");
}

StatusOr<char32_t> ParseChar(const json& j, const char* what) {
  std::vector<char32_t> chars;
  const std::string s = j.get<std::string>();
  if (DecodeUtf8(s, chars) >= 0 || chars.size() != 1) {
    return InvalidArgument(std::string(what) + " must be one character");
  }
  return chars[0];
}

// BertNormalizer inside the pipeline (with a non-BERT pre-tokenizer or
// model): the fused normalizer's output, each char aligned as its source.
class BertNormalizerStep final : public Normalizer {
 public:
  explicit BertNormalizerStep(NormalizerOptions options) : options_(options) {}
  void Normalize(NormalizedString& s) const override {
    NormalizedText out;
    tokenizer::Normalize(options_, s.chars.data(), 0, static_cast<uint32_t>(s.size()), out);
    std::vector<Span> align(out.size());
    for (size_t i = 0; i < out.size(); ++i) align[i] = s.align[out.source[i]];
    s.chars = std::move(out.chars);
    s.align = std::move(align);
  }
  bool CutsBefore(char32_t, char32_t& at, char32_t) const override {
    if (at >= kTextEnd || !tokenizer::CutsBefore(options_, at)) return false;
    at = kUnknownChar;
    return true;
  }

 private:
  NormalizerOptions options_;
};

StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const json& j, int depth = 0) {
  if (depth > 16) return InvalidArgument("normalizers are nested too deeply");
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const json& step : j.at("normalizers")) {
      ASSIGN_OR_RETURN(auto n, ParseNormalizer(step, depth + 1));
      steps.push_back(std::move(n));
    }
    return MakeNormalizerSequence(std::move(steps));
  }
  if (type == "NFC") return MakeUnicodeNormalizer(UnicodeForm::kNfc);
  if (type == "NFD") return MakeUnicodeNormalizer(UnicodeForm::kNfd);
  if (type == "NFKC") return MakeUnicodeNormalizer(UnicodeForm::kNfkc);
  if (type == "NFKD") return MakeUnicodeNormalizer(UnicodeForm::kNfkd);
  if (type == "Lowercase") return MakeLowercase();
  if (type == "Nmt") return MakeNmt();
  if (type == "ByteLevel") return MakeByteLevelNormalizer();
  if (type == "StripAccents") return MakeStripAccents();
  if (type == "Strip") return MakeStrip(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Prepend") return MakePrepend(j.at("prepend").get<std::string>());
  if (type == "Replace") {
    ASSIGN_OR_RETURN(auto pattern, ParsePattern(j.at("pattern")));
    return MakeReplace(std::move(pattern), j.at("content").get<std::string>());
  }
  if (type == "Precompiled") {
    const json& map = j.at("precompiled_charsmap");
    // HF accepts a null or empty map and then does nothing.
    if (map.is_null()) return MakeNormalizerSequence({});
    ASSIGN_OR_RETURN(std::string blob, Base64Decode(map.get<std::string>()));
    if (blob.empty()) return MakeNormalizerSequence({});
    return MakePrecompiled(std::move(blob));
  }
  if (type == "BertNormalizer") {
    NormalizerOptions o;
    o.clean_text = j.value("clean_text", true);
    o.handle_chinese_chars = j.value("handle_chinese_chars", true);
    o.lowercase = j.value("lowercase", true);
    const json& strip = j.value("strip_accents", json());
    o.strip_accents = strip.is_boolean() ? strip.get<bool>() : o.lowercase;
    return std::unique_ptr<Normalizer>(std::make_unique<BertNormalizerStep>(o));
  }
  return Unimplemented("normalizer type '" + type +
                       "' is not supported; bertrt has Sequence, NFC, NFD, NFKC, NFKD, Lowercase, "
                       "StripAccents, Strip, Replace, Prepend, Precompiled, Nmt, ByteLevel and "
                       "BertNormalizer");
}

StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const json& j, int depth = 0) {
  if (depth > 16) return InvalidArgument("pre-tokenizers are nested too deeply");
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const json& step : j.at("pretokenizers")) {
      ASSIGN_OR_RETURN(auto p, ParsePreTokenizer(step, depth + 1));
      steps.push_back(std::move(p));
    }
    return MakePreTokenizerSequence(std::move(steps));
  }
  if (type == "Metaspace") {
    ASSIGN_OR_RETURN(const char32_t rep, ParseChar(j.at("replacement"), "Metaspace replacement"));
    const std::string scheme_name = j.value("prepend_scheme", std::string("always"));
    PrependScheme scheme;
    if (scheme_name == "always") {
      scheme = PrependScheme::kAlways;
    } else if (scheme_name == "first") {
      scheme = PrependScheme::kFirst;
    } else if (scheme_name == "never") {
      scheme = PrependScheme::kNever;
    } else {
      return InvalidArgument("unknown Metaspace prepend_scheme '" + scheme_name + "'");
    }
    // Files from before prepend_scheme say add_prefix_space: false for never.
    const json& legacy = j.value("add_prefix_space", json());
    if (legacy.is_boolean() && !legacy.get<bool>()) {
      if (scheme != PrependScheme::kNever && j.contains("prepend_scheme")) {
        return InvalidArgument("Metaspace add_prefix_space does not match its prepend_scheme");
      }
      scheme = PrependScheme::kNever;
    }
    const json& split = j.value("split", json());
    return MakeMetaspace(rep, scheme, split.is_boolean() ? split.get<bool>() : true);
  }
  if (type == "ByteLevel") {
    return MakeByteLevel(j.value("add_prefix_space", true), j.value("use_regex", true));
  }
  if (type == "Split") {
    ASSIGN_OR_RETURN(auto pattern, ParsePattern(j.at("pattern")));
    ASSIGN_OR_RETURN(const SplitBehavior behavior, ParseBehavior(j.at("behavior")));
    return MakeSplit(std::move(pattern), behavior, j.value("invert", false));
  }
  if (type == "Whitespace") return MakeWhitespace();
  if (type == "WhitespaceSplit") return MakeWhitespaceSplit();
  if (type == "BertPreTokenizer") return MakeBertPreTokenizer();
  if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (j.contains("behavior")) {
      ASSIGN_OR_RETURN(behavior, ParseBehavior(j["behavior"]));
    }
    return MakePunctuation(behavior);
  }
  if (type == "Digits") return MakeDigits(j.value("individual_digits", false));
  if (type == "CharDelimiterSplit") {
    ASSIGN_OR_RETURN(const char32_t delimiter,
                     ParseChar(j.at("delimiter"), "CharDelimiterSplit delimiter"));
    return MakeCharDelimiterSplit(delimiter);
  }
  if (type == "FixedLength") {
    const int64_t length = j.value("length", int64_t{5});
    if (length <= 0) return InvalidArgument("FixedLength length must be positive");
    return MakeFixedLength(static_cast<size_t>(length));
  }
  return Unimplemented("pre_tokenizer type '" + type +
                       "' is not supported; bertrt has Sequence, Metaspace, ByteLevel, Split, "
                       "Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, "
                       "CharDelimiterSplit and FixedLength");
}

// WordPiece behind a non-BERT normalizer or pre-tokenizer: the fused
// tokenizer's WordPiece over the word's chars.
class WordPieceModel final : public Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Create(const json& model) {
    std::unique_ptr<WordPieceModel> m(new WordPieceModel());
    for (const auto& [token, id] : model.at("vocab").items()) {
      const auto i = id.get<int32_t>();
      if (i < 0) return InvalidArgument("vocabulary id " + std::to_string(i) + " is negative");
      m->vocab_.emplace_back(token, i);
      m->ids_.Insert(token, i);
    }
    const std::string unk = model.value("unk_token", std::string("[UNK]"));
    const int32_t unk_id = m->ids_.Find(unk);
    if (unk_id < 0) return InvalidArgument("the unk_token '" + unk + "' is not in the vocabulary");
    const int max_chars = model.value("max_input_chars_per_word", 100);
    if (max_chars <= 0) return InvalidArgument("max_input_chars_per_word must be positive");
    m->wordpiece_ = std::make_unique<WordPiece>(
        &m->ids_, unk_id, model.value("continuing_subword_prefix", std::string("##")),
        static_cast<size_t>(max_chars));
    return std::unique_ptr<Model>(std::move(m));
  }
  Status Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const override {
    thread_local NormalizedText text;
    thread_local WordScratch scratch;
    thread_local TokenList tokens;
    ScratchGuard guard(text.chars, text.source, scratch.bytes, scratch.byte_char, tokens.ids,
                       tokens.offsets, tokens.word_starts);
    text.chars = word.chars;
    text.source.resize(word.size());
    for (size_t i = 0; i < word.size(); ++i) text.source[i] = static_cast<uint32_t>(i);
    tokens.clear();
    wordpiece_->Tokenize(text, 0, static_cast<uint32_t>(word.size()), scratch, tokens);
    for (size_t i = 0; i < tokens.ids.size(); ++i) {
      out.push_back({tokens.ids[i], tokens.offsets[i].first, tokens.offsets[i].second});
    }
    return Status::Ok();
  }
  int32_t TokenToId(std::string_view token) const override { return ids_.Find(token); }
  const std::vector<std::pair<std::string, int32_t>>& Vocab() const override { return vocab_; }
  int32_t unk_id() const override { return wordpiece_->unk_id(); }
  std::string_view continuing_subword_prefix() const override { return wordpiece_->prefix(); }

 private:
  std::vector<std::pair<std::string, int32_t>> vocab_;
  VocabMap ids_;
  std::unique_ptr<WordPiece> wordpiece_;
};

std::optional<std::string> OptionalString(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) return std::nullopt;
  return j[key].get<std::string>();
}

StatusOr<std::unique_ptr<Model>> ParseModel(const json& model) {
  std::string type = TypeOf(model);
  if (type == "?") {
    // Old files leave the type out; HF then tries each model's fields.
    if (model.contains("merges")) {
      type = "BPE";
    } else if (model.contains("continuing_subword_prefix")) {
      type = "WordPiece";
    } else if (model.contains("vocab") && model["vocab"].is_array()) {
      type = "Unigram";
    }
  }
  if (type == "Unigram") {
    std::vector<std::pair<std::string, double>> pieces;
    for (const json& p : model.at("vocab")) {
      const double score = p.at(1).get<double>();
      if (!std::isfinite(score)) return InvalidArgument("a Unigram piece's score is not finite");
      pieces.emplace_back(p.at(0).get<std::string>(), score);
    }
    const json& unk = model.value("unk_id", json());
    const int64_t unk_id = unk.is_number_integer() ? unk.get<int64_t>() : -1;
    if (unk_id > INT32_MAX) return InvalidArgument("the Unigram unk_id is too large");
    ASSIGN_OR_RETURN(auto m, Unigram::Create(std::move(pieces), static_cast<int32_t>(unk_id),
                                             model.value("byte_fallback", false)));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "BPE") {
    const json& dropout = model.value("dropout", json());
    if (dropout.is_number() && dropout.get<double>() != 0.0) {
      return Unimplemented(
          "BPE dropout " + std::to_string(dropout.get<double>()) +
          " makes tokenization random, which a served model must not be; set \"dropout\" to "
          "null in tokenizer.json (it is a training-time option)");
    }
    std::vector<std::pair<std::string, int32_t>> vocab;
    for (const auto& [token, id] : model.at("vocab").items()) {
      vocab.emplace_back(token, id.get<int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (const json& m : model.at("merges")) {
      if (m.is_string()) {
        // The legacy "a b" form: exactly one space, as HF requires.
        const std::string line = m.get<std::string>();
        const size_t space = line.find(' ');
        if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
          return InvalidArgument("BPE merge '" + line + "' is not two tokens split by a space");
        }
        merges.emplace_back(line.substr(0, space), line.substr(space + 1));
      } else {
        merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
      }
    }
    BpeOptions o;
    o.unk_token = OptionalString(model, "unk_token");
    o.continuing_subword_prefix = OptionalString(model, "continuing_subword_prefix");
    o.end_of_word_suffix = OptionalString(model, "end_of_word_suffix");
    o.fuse_unk = model.value("fuse_unk", false);
    o.byte_fallback = model.value("byte_fallback", false);
    o.ignore_merges = model.value("ignore_merges", false);
    ASSIGN_OR_RETURN(auto m, Bpe::Create(std::move(vocab), merges, std::move(o)));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "WordPiece") return WordPieceModel::Create(model);
  return Unimplemented("tokenizer.json has a '" + type +
                       "' model; bertrt supports WordPiece, Unigram and BPE");
}

// Only decoding (TEI's /decode) reads it. A step bertrt does not have (CTC)
// is left out rather than refusing a model it can encode for.
Status ParseDecoder(const json& j, PipelineParts& parts, int depth = 0) {
  if (depth > 16) return InvalidArgument("decoders are nested too deeply");
  const std::string type = TypeOf(j);
  DecoderStep d;
  if (type == "Sequence") {
    for (const json& step : j.value("decoders", json::array())) {
      RETURN_IF_ERROR(ParseDecoder(step, parts, depth + 1));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    d.kind = DecoderStep::kByteLevel;
  } else if (type == "Metaspace") {
    d.kind = DecoderStep::kMetaspace;
    ASSIGN_OR_RETURN(d.c, ParseChar(j.at("replacement"), "Metaspace replacement"));
    const json& legacy = j.value("add_prefix_space", json());
    const bool never = j.value("prepend_scheme", std::string("always")) == "never" ||
                       (legacy.is_boolean() && !legacy.get<bool>());
    d.flag = !never;
  } else if (type == "WordPiece") {
    d.kind = DecoderStep::kWordPiece;
    d.text = j.value("prefix", std::string("##"));
    d.flag = j.value("cleanup", true);
  } else if (type == "BPEDecoder") {
    d.kind = DecoderStep::kBpe;
    d.text = j.value("suffix", std::string("</w>"));
  } else if (type == "ByteFallback") {
    d.kind = DecoderStep::kByteFallback;
  } else if (type == "Fuse") {
    d.kind = DecoderStep::kFuse;
  } else if (type == "Strip") {
    d.kind = DecoderStep::kStrip;
    ASSIGN_OR_RETURN(d.c, ParseChar(j.at("content"), "Strip content"));
    d.start = j.value("start", size_t{0});
    d.stop = j.value("stop", size_t{0});
  } else if (type == "Replace") {
    d.kind = DecoderStep::kReplace;
    ASSIGN_OR_RETURN(d.pattern, ParsePattern(j.at("pattern")));
    d.text = j.at("content").get<std::string>();
  } else {
    return Status::Ok();
  }
  parts.decoder.push_back(std::move(d));
  return Status::Ok();
}

// A component's type, with a Sequence's steps in brackets.
std::string Summary(const json& j, const char* list, int depth = 0) {
  if (j.is_null()) return "none";
  const std::string type = TypeOf(j);
  if (type != "Sequence" || depth > 4 || !j.contains(list) || !j[list].is_array()) return type;
  std::string out = "Sequence[";
  for (size_t i = 0; i < j[list].size(); ++i) {
    out += (i ? ", " : "") + Summary(j[list][i], list, depth + 1);
  }
  return out + "]";
}

}  // namespace

StatusOr<std::shared_ptr<Tokenizer>> LoadPipelineTokenizer(const json& root) {
  PipelineParts parts;
  const json& normalizer = root.value("normalizer", json());
  if (!normalizer.is_null()) {
    ASSIGN_OR_RETURN(parts.normalizer, ParseNormalizer(normalizer));
  }
  const json& pre = root.value("pre_tokenizer", json());
  if (!pre.is_null()) {
    ASSIGN_OR_RETURN(parts.pre_tokenizer, ParsePreTokenizer(pre));
  }
  ASSIGN_OR_RETURN(parts.model, ParseModel(root.at("model")));
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
  TokenizerSettings& s = parts.settings;
  OffsetTrim trim;
  ASSIGN_OR_RETURN(parts.post_processor,
                   ParsePostProcessor(root.value("post_processor", json()), s, &trim));
  parts.trim_offsets = trim.on;
  parts.trim_add_prefix_space = trim.add_prefix_space;
  const json& decoder = root.value("decoder", json());
  parts.has_decoder = !decoder.is_null();
  if (parts.has_decoder) RETURN_IF_ERROR(ParseDecoder(decoder, parts));
  // The names of the special tokens, for pad_id() and the settings a plan
  // records: the template's, and the padding block's pad token.
  const json& model = root.at("model");
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    s.unk_token = model["unk_token"].get<std::string>();
  } else if (model.contains("unk_id") && model["unk_id"].is_number_integer() &&
             model.contains("vocab") && model["vocab"].is_array()) {
    const auto unk = model["unk_id"].get<int64_t>();
    if (unk >= 0 && static_cast<size_t>(unk) < model["vocab"].size()) {
      s.unk_token = model["vocab"][unk].at(0).get<std::string>();
    }
  }
  const json& padding = root.value("padding", json());
  if (padding.is_object() && padding.contains("pad_token") && padding["pad_token"].is_string()) {
    s.pad_token = padding["pad_token"].get<std::string>();
  } else {
    for (const AddedToken& a : parts.added_tokens) {
      if (a.content == "<pad>" || a.content == "[PAD]") s.pad_token = a.content;
    }
  }
  std::string model_type = TypeOf(model);
  if (model_type == "?") model_type = model.contains("merges") ? "BPE" : "Unigram";
  parts.description = model_type + "; normalizer " +
                      Summary(root.value("normalizer", json()), "normalizers") +
                      "; pre-tokenizer " + Summary(pre, "pretokenizers") + "; post-processor " +
                      Summary(root.value("post_processor", json()), "processors");
  return PipelineTokenizer::Create(std::move(parts));
}

}  // namespace bertrt::tokenizer
