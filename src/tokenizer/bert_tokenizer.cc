#include "tokenizer/bert_tokenizer.h"

#include <string>
#include <string_view>
#include <utility>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/scratch.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {

struct BertTokenizer::Scratch {
  std::vector<char32_t> chars;
  NormalizedText norm;
  std::vector<Segment> raw_segments;
  std::vector<Segment> norm_segments;
  WordScratch word;
  TokenList a;
  TokenList b;

  // What a long text made these hold goes back when it is done.
  void ReleaseLarge() {
    ReleaseLargeScratch(chars);
    ReleaseLargeScratch(norm.chars);
    ReleaseLargeScratch(norm.source);
    ReleaseLargeScratch(raw_segments);
    ReleaseLargeScratch(norm_segments);
    ReleaseLargeScratch(word.bytes);
    ReleaseLargeScratch(word.byte_char);
    ReleaseLargeScratch(a.ids);
    ReleaseLargeScratch(a.offsets);
    ReleaseLargeScratch(a.word_starts);
    ReleaseLargeScratch(b.ids);
    ReleaseLargeScratch(b.offsets);
    ReleaseLargeScratch(b.word_starts);
  }
};

BertTokenizer::Scratch& BertTokenizer::ThreadScratch() {
  thread_local Scratch s;
  return s;
}

BertTokenizer::BertTokenizer(TokenizerParts parts) : parts_(std::move(parts)) {}

StatusOr<std::shared_ptr<Tokenizer>> BertTokenizer::Create(TokenizerParts parts) {
  std::shared_ptr<BertTokenizer> t(new BertTokenizer(std::move(parts)));
  const TokenizerSettings& s = t->parts_.settings;
  if (s.max_input_chars_per_word <= 0) {
    return InvalidArgument("max_input_chars_per_word must be positive");
  }
  const bool strip = s.strip_accents.value_or(s.lowercase);
  t->normalizer_ = t->parts_.has_normalizer
                       ? NormalizerOptions{s.clean_text, s.handle_chinese_chars, strip, s.lowercase}
                       : NormalizerOptions{false, false, false, false};

  int32_t max_id = -1;
  for (const auto& [token, id] : t->parts_.vocab) {
    if (id < 0) return InvalidArgument("vocabulary id " + std::to_string(id) + " is negative");
    t->model_vocab_.Insert(token, id);
    max_id = std::max(max_id, id);
  }
  for (AddedToken& a : t->parts_.added_tokens) {
    // As HF does when it loads added tokens: one already in the model's
    // vocabulary keeps the model's id.
    const int32_t model_id = t->model_vocab_.Find(a.content);
    if (model_id >= 0) a.id = model_id;
    if (a.id < 0) return InvalidArgument("added token '" + a.content + "' has a negative id");
    max_id = std::max(max_id, a.id);
  }
  // Guards the id -> token table against absurd ids in untrusted files.
  constexpr int32_t kMaxVocab = 1 << 24;
  if (max_id >= kMaxVocab) {
    return InvalidArgument("token id " + std::to_string(max_id) + " is too large");
  }
  t->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : t->parts_.vocab) t->id_to_token_[id] = token;

  const int32_t unk_id = t->model_vocab_.Find(s.unk_token);
  if (unk_id < 0) {
    return InvalidArgument("the unk_token '" + s.unk_token + "' is not in the vocabulary");
  }
  t->wordpiece_ = std::make_unique<WordPiece>(&t->model_vocab_, unk_id, s.continuing_subword_prefix,
                                              static_cast<size_t>(s.max_input_chars_per_word));

  std::vector<char32_t> chars;
  for (const AddedToken& a : t->parts_.added_tokens) {
    t->added_vocab_.Insert(a.content, a.id);
    t->id_to_token_[a.id] = a.content;
    if (a.special) {
      if (t->special_.size() <= static_cast<size_t>(a.id)) t->special_.resize(a.id + 1, false);
      t->special_[a.id] = true;
    }
    if (DecodeUtf8(a.content, chars) >= 0) {
      return InvalidArgument("added token content is not valid UTF-8");
    }
    if (!a.normalized) {
      t->raw_added_.Add(chars, a);
      continue;
    }
    NormalizedText norm;
    tokenizer::Normalize(t->normalizer_, chars.data(), 0, static_cast<uint32_t>(chars.size()),
                         norm);
    t->normalized_added_.Add(std::move(norm.chars), a);
  }
  return std::shared_ptr<Tokenizer>(std::move(t));
}

int32_t BertTokenizer::TokenToId(std::string_view token) const {
  const int32_t id = added_vocab_.Find(token);
  return id >= 0 ? id : model_vocab_.Find(token);
}

std::string BertTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return std::string();
  return id_to_token_[id];
}

namespace {

// HF's WordPiece decoder cleanup, applied to each token with its leading space.
void WordPieceCleanUp(std::string& token) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    for (size_t at = token.find(from); at != std::string::npos;
         at = token.find(from, at + to.size()))
      token.replace(at, from.size(), to);
  }
}

}  // namespace

void WordPieceDecode(std::vector<std::string>& tokens, const std::string& prefix, bool cleanup) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& token = tokens[i];
    if (i > 0) {
      if (token.compare(0, prefix.size(), prefix) == 0)
        token.erase(0, prefix.size());
      else
        token.insert(0, 1, ' ');
    }
    if (cleanup) WordPieceCleanUp(token);
  }
}

std::string BertTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty())
      continue;
    const bool special = static_cast<size_t>(id) < special_.size() && special_[id];
    if (skip_special_tokens && special) continue;
    tokens.push_back(id_to_token_[id]);
  }
  return DecodeTokens(std::move(tokens));
}

std::string BertTokenizer::DecodeTokens(std::vector<std::string> tokens) const {
  std::string out;
  if (parts_.wordpiece_decoder) {
    WordPieceDecode(tokens, parts_.decoder_prefix, parts_.decoder_cleanup);
    for (const std::string& token : tokens) out += token;
    return out;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

void BertTokenizer::EncodeWords(const NormalizedText& norm, uint32_t begin, uint32_t end,
                                Scratch& s, TokenList& out) const {
  PreTokenize(norm.chars.data(), begin, end, [&](uint32_t word_begin, uint32_t word_end) {
    out.BeginWord();
    wordpiece_->Tokenize(norm, word_begin, word_end, s.word, out);
  });
}

inline void BertTokenizer::EncodeNormalizedText(const NormalizedText& norm, Scratch& s,
                                                TokenList& out) const {
  const auto m = static_cast<uint32_t>(norm.size());
  if (normalized_added_.empty()) {
    EncodeWords(norm, 0, m, s, out);
    return;
  }
  s.norm_segments.clear();
  normalized_added_.Split(norm.chars.data(), 0, m, s.norm_segments);
  for (const Segment& seg : s.norm_segments) {
    if (seg.id >= 0) {
      out.PushWord(seg.id, norm.source[seg.begin], norm.source[seg.end - 1] + 1);
    } else {
      EncodeWords(norm, seg.begin, seg.end, s, out);
    }
  }
}

StatusOr<Encoding> BertTokenizer::EncodeWhole(std::string_view text,
                                              std::optional<std::string_view> text_pair,
                                              const EncodeLimits& limits,
                                              EncodeReport* report) const {
  Scratch& s = ThreadScratch();
  // Texts of kScratchKeepBytes / 64 bytes leave every buffer under
  // kScratchKeepBytes (none takes 64 bytes per byte of text, 4 chars
  // normalized per char included), and the usual text is that short: the
  // checks would cost it a few percent.
  return EncodeWholeTexts(s, parts_.post_processor, text, text_pair, limits, report,
                          kScratchKeepBytes / 64,
                          [&](std::string_view t, bool is_pair, TokenList& out) {
                            return EncodeSequence(t, is_pair, limits.max_normalized_chars, s, out);
                          });
}

Status BertTokenizer::EncodeSequence(std::string_view text, bool is_pair, size_t max_normalized,
                                     Scratch& s, TokenList& out) const {
  out.clear();
  RETURN_IF_ERROR(DecodeText(text, is_pair, s.chars));
  const auto n = static_cast<uint32_t>(s.chars.size());
  s.raw_segments.clear();
  if (raw_added_.empty()) {
    s.raw_segments.push_back({0, n, -1});
  } else {
    raw_added_.Split(s.chars.data(), 0, n, s.raw_segments);
  }
  size_t normalized = 0;
  for (const Segment& raw : s.raw_segments) {
    if (raw.id >= 0) {
      out.PushWord(raw.id, raw.begin, raw.end);
      continue;
    }
    s.norm.chars.clear();
    s.norm.source.clear();
    tokenizer::Normalize(normalizer_, s.chars.data(), raw.begin, raw.end, s.norm);
    normalized += s.norm.size();
    if (max_normalized > 0 && normalized > max_normalized) return NormalizedTooLong(max_normalized);
    EncodeNormalizedText(s.norm, s, out);
  }
  return Status::Ok();
}

void BertTokenizer::Normalize(const char32_t* chars, uint32_t n, uint32_t first,
                              NormalizedString& out) const {
  NormalizedText norm;
  tokenizer::Normalize(normalizer_, chars, 0, n, norm);
  out.chars = std::move(norm.chars);
  out.align.resize(norm.source.size());
  for (size_t i = 0; i < norm.source.size(); ++i)
    out.align[i] = {first + norm.source[i], first + norm.source[i] + 1};
  out.origin = first;
}

bool BertTokenizer::EncoderCutsBefore(const char32_t* s, size_t at) const {
  // BertPreTokenizer ends a word at whitespace and isolates punctuation.
  const uint8_t split = kWhitespace | kPunct;
  return ((CharFlags(s[at - 1]) & split) || (CharFlags(s[at]) & split)) &&
         normalized_added_.CutsBefore(s, at);
}

Status BertTokenizer::EncodeNormalized(NormalizedString&& s, Piece& out) const {
  Scratch& scratch = ThreadScratch();
  NormalizedText& norm = scratch.norm;
  norm.chars = std::move(s.chars);
  norm.source.resize(s.align.size());
  for (size_t i = 0; i < s.align.size(); ++i) norm.source[i] = s.align[i].begin;
  EncodeNormalizedText(norm, scratch, out.tokens);
  scratch.ReleaseLarge();
  return Status::Ok();
}

}  // namespace bertrt::tokenizer
