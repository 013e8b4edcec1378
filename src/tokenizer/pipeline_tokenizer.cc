#include "tokenizer/pipeline_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_map>

#include "tokenizer/bert_tokenizer.h"
#include "tokenizer/scratch.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {

struct PipelineTokenizer::Scratch {
  std::vector<char32_t> chars;
  std::vector<Segment> raw_segments;
  std::vector<Segment> norm_segments;
  std::vector<NormalizedString> words;
  std::vector<WordToken> tokens;
  NormalizedString norm;
  TokenList a;
  TokenList b;

  // What a long text made these hold goes back when it is done.
  void ReleaseLarge() {
    ReleaseLargeScratch(chars);
    ReleaseLargeScratch(raw_segments);
    ReleaseLargeScratch(norm_segments);
    words.clear();  // each owns its chars, a long word's many
    ReleaseLargeScratch(words);
    ReleaseLargeScratch(tokens);
    ReleaseLargeScratch(norm.chars);
    ReleaseLargeScratch(norm.align);
    ReleaseLargeScratch(a.ids);
    ReleaseLargeScratch(a.offsets);
    ReleaseLargeScratch(a.word_starts);
    ReleaseLargeScratch(b.ids);
    ReleaseLargeScratch(b.offsets);
    ReleaseLargeScratch(b.word_starts);
  }
};

PipelineTokenizer::Scratch& PipelineTokenizer::ThreadScratch() {
  thread_local Scratch s;
  return s;
}

namespace {

bool TrimSpace(char32_t c) { return c == 0x120 || (CharFlags(c) & kWhitespace); }

// Leading and trailing byte-level spaces of a token's text.
std::pair<uint32_t, uint32_t> SpaceRuns(const char32_t* chars, size_t n) {
  uint32_t lead = 0;
  while (lead < n && TrimSpace(chars[lead])) ++lead;
  uint32_t trail = 0;
  while (trail < n && TrimSpace(chars[n - 1 - trail])) ++trail;
  return {lead, trail};
}

// The same of UTF-8 text of `chars` code points, read only as far as the
// runs go.
std::pair<uint32_t, uint32_t> SpaceRuns(std::string_view text, uint32_t chars) {
  uint32_t lead = 0;
  for (size_t i = 0; i < text.size() && TrimSpace(Utf8CharAt(text.data(), i)); ++lead)
    i += Utf8Length(static_cast<unsigned char>(text[i]));
  uint32_t trail = 0;
  for (size_t i = text.size(); trail < chars; ++trail) {
    i = Utf8PreviousChar(text.data(), i);
    if (!TrimSpace(Utf8CharAt(text.data(), i))) break;
  }
  return {lead, trail};
}

}  // namespace

StatusOr<std::shared_ptr<Tokenizer>> PipelineTokenizer::Create(PipelineParts parts) {
  if (parts.model == nullptr) return InvalidArgument("the tokenizer has no model");
  std::shared_ptr<PipelineTokenizer> t(new PipelineTokenizer(std::move(parts)));
  const Model& model = *t->parts_.model;
  int32_t max_id = -1;
  for (const auto& [token, id] : model.Vocab()) max_id = std::max(max_id, id);
  // HF (0.23) ignores the ids the file gives added tokens: in file order, a
  // token takes the id its content already has (added, then model), or the
  // next free one from the vocabulary's size; a repeated content keeps its
  // id and takes the later properties.
  {
    auto next_id = static_cast<int64_t>(model.Vocab().size());
    std::vector<AddedToken> kept;
    std::unordered_map<std::string, size_t> index;
    for (AddedToken& a : t->parts_.added_tokens) {
      if (a.content.empty()) continue;
      if (auto it = index.find(a.content); it != index.end()) {
        a.id = kept[it->second].id;
        kept[it->second] = std::move(a);
        continue;
      }
      if (const int32_t model_id = model.TokenToId(a.content); model_id >= 0) {
        a.id = model_id;
      } else {
        if (next_id > INT32_MAX) return InvalidArgument("too many added tokens");
        a.id = static_cast<int32_t>(next_id++);
      }
      max_id = std::max(max_id, a.id);
      index.emplace(a.content, kept.size());
      kept.push_back(std::move(a));
    }
    t->parts_.added_tokens = std::move(kept);
  }
  constexpr int32_t kMaxVocab = 1 << 24;
  if (max_id >= kMaxVocab) {
    return InvalidArgument("token id " + std::to_string(max_id) + " is too large");
  }
  t->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : model.Vocab()) t->id_to_token_[id] = token;
  t->special_.assign(t->id_to_token_.size(), false);
  std::vector<char32_t> chars;
  for (const AddedToken& a : t->parts_.added_tokens) {
    t->added_vocab_.Insert(a.content, a.id);
    t->id_to_token_[a.id] = a.content;
    if (a.special) t->special_[a.id] = true;
    if (DecodeUtf8(a.content, chars) >= 0) {
      return InvalidArgument("added token content is not valid UTF-8");
    }
    if (!a.normalized || t->parts_.normalizer == nullptr) {
      (a.normalized ? t->normalized_added_ : t->raw_added_).Add(chars, a);
      continue;
    }
    // HF matches a normalized token by its content as the normalizer makes it.
    NormalizedString norm;
    norm.Reset(chars.data(), 0, static_cast<uint32_t>(chars.size()));
    t->parts_.normalizer->Normalize(norm);
    t->normalized_added_.Add(std::move(norm.chars), a);
  }
  for (const auto& list : {t->parts_.post_processor.single, t->parts_.post_processor.pair}) {
    for (const TemplateItem& item : list) {
      for (int32_t id : item.ids) {
        if (id < 0 || id > max_id) {
          return InvalidArgument("the post-processor's special token id " + std::to_string(id) +
                                 " is not in the vocabulary");
        }
      }
    }
  }
  if (t->parts_.trim_offsets) {
    t->token_spaces_.resize(t->id_to_token_.size());
    for (size_t id = 0; id < t->id_to_token_.size(); ++id) {
      DecodeUtf8(t->id_to_token_[id], chars);
      t->token_spaces_[id] = SpaceRuns(chars.data(), chars.size());
    }
  }
  return std::shared_ptr<Tokenizer>(std::move(t));
}

int32_t PipelineTokenizer::TokenToId(std::string_view token) const {
  const int32_t id = added_vocab_.Find(token);
  return id >= 0 ? id : parts_.model->TokenToId(token);
}

std::string PipelineTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return std::string();
  return id_to_token_[id];
}

void PipelineTokenizer::PushTrimmed(int32_t id, uint32_t start, uint32_t end, uint32_t lead,
                                    uint32_t trail, TokenList& out,
                                    std::optional<TokenOffsets>* offsets_if_first) const {
  // HF's ByteLevel process_offsets: a token's leading and trailing spaces
  // (as U+0120 or whitespace) leave its offsets, except the one space
  // add_prefix_space put before the first token.
  auto trimmed = [&](bool first) -> TokenOffsets {
    const uint32_t skip = first && parts_.trim_add_prefix_space && lead == 1 ? 0 : lead;
    const uint32_t from = std::min(start + skip, end);
    return {from, trail > 0 && end >= trail ? std::max(end - trail, from) : end};
  };
  const bool first = start == 0 || (offsets_if_first == nullptr && out.ids.empty());
  const TokenOffsets offsets = trimmed(first);
  if (offsets_if_first != nullptr && out.ids.empty() && trimmed(true) != offsets)
    *offsets_if_first = trimmed(true);
  out.Push(id, offsets.first, offsets.second);
}

Status PipelineTokenizer::EncodeWords(NormalizedString&& norm, Scratch& s, TokenList& out,
                                      std::optional<TokenOffsets>* offsets_if_first) const {
  s.words.clear();
  s.words.push_back(std::move(norm));
  if (parts_.pre_tokenizer) parts_.pre_tokenizer->PreTokenize(s.words);
  for (const NormalizedString& word : s.words) {
    if (word.empty()) continue;
    s.tokens.clear();
    RETURN_IF_ERROR(parts_.model->Tokenize(word, s.tokens));
    out.BeginWord();
    for (const WordToken& t : s.tokens) {
      const auto [start, end] = word.Original(t.begin, t.end);
      if (parts_.trim_offsets) {
        const auto [lead, trail] = parts_.model->IdIsText(t.id)
                                       ? SpaceRuns(word.chars.data() + t.begin, t.end - t.begin)
                                       : token_spaces_[t.id];
        PushTrimmed(t.id, start, end, lead, trail, out, offsets_if_first);
      } else {
        out.Push(t.id, start, end);
      }
    }
  }
  return Status::Ok();
}

Status PipelineTokenizer::EncodeNormalizedText(
    NormalizedString&& norm, Scratch& s, TokenList& out,
    std::optional<TokenOffsets>* offsets_if_first) const {
  if (normalized_added_.empty()) return EncodeWords(std::move(norm), s, out, offsets_if_first);
  s.norm_segments.clear();
  normalized_added_.Split(norm.chars.data(), 0, static_cast<uint32_t>(norm.size()),
                          s.norm_segments);
  const NormalizedString whole = std::move(norm);
  for (const Segment& seg : s.norm_segments) {
    if (seg.id < 0) {
      RETURN_IF_ERROR(EncodeWords(whole.Slice(seg.begin, seg.end), s, out, offsets_if_first));
      continue;
    }
    const auto [start, end] = whole.Original(seg.begin, seg.end);
    out.BeginWord();  // an added token is a word of its own
    if (parts_.trim_offsets) {
      const auto [lead, trail] = SpaceRuns(whole.chars.data() + seg.begin, seg.end - seg.begin);
      PushTrimmed(seg.id, start, end, lead, trail, out, offsets_if_first);
    } else {
      out.Push(seg.id, start, end);
    }
  }
  return Status::Ok();
}

StatusOr<Encoding> PipelineTokenizer::EncodeWhole(std::string_view text,
                                                  std::optional<std::string_view> text_pair,
                                                  const EncodeLimits& limits,
                                                  EncodeReport* report) const {
  Scratch& s = ThreadScratch();
  return EncodeWholeTexts(s, parts_.post_processor, text, text_pair, limits, report,
                          /*release_after_bytes=*/0,
                          [&](std::string_view t, bool is_pair, TokenList& out) {
                            return EncodeSequence(t, is_pair, limits.max_normalized_chars, s, out);
                          });
}

Status PipelineTokenizer::EncodeSequence(std::string_view text, bool is_pair, size_t max_normalized,
                                         Scratch& s, TokenList& out) const {
  out.clear();
  RETURN_IF_ERROR(DecodeText(text, is_pair, s.chars));
  const auto n = static_cast<uint32_t>(s.chars.size());
  s.raw_segments.clear();
  if (raw_added_.empty()) {
    if (n > 0) s.raw_segments.push_back({0, n, -1});
  } else {
    raw_added_.Split(s.chars.data(), 0, n, s.raw_segments);
  }
  size_t normalized = 0;
  for (const Segment& raw : s.raw_segments) {
    if (raw.id >= 0) {
      out.BeginWord();  // a word of its own
      // An added token's own text (with the whitespace lstrip/rstrip took)
      // is what byte-level offset trimming looks at, as HF's token value is.
      if (parts_.trim_offsets) {
        const auto [lead, trail] = SpaceRuns(s.chars.data() + raw.begin, raw.end - raw.begin);
        PushTrimmed(raw.id, raw.begin, raw.end, lead, trail, out, nullptr);
      } else {
        out.Push(raw.id, raw.begin, raw.end);
      }
      continue;
    }
    NormalizedString& norm = s.norm;
    norm.Reset(s.chars.data(), raw.begin, raw.end);
    if (parts_.normalizer) parts_.normalizer->Normalize(norm);
    normalized += norm.size();
    if (max_normalized > 0 && normalized > max_normalized) return NormalizedTooLong(max_normalized);
    if (norm.empty()) continue;
    RETURN_IF_ERROR(EncodeNormalizedText(std::move(norm), s, out, nullptr));
  }
  return Status::Ok();
}

void PipelineTokenizer::Normalize(const char32_t* chars, uint32_t n, uint32_t first,
                                  NormalizedString& out) const {
  out.Assign(chars, n, first);
  if (parts_.normalizer) parts_.normalizer->Normalize(out);
}

Status PipelineTokenizer::EncodeNormalized(NormalizedString&& norm, Piece& out) const {
  Scratch& s = ThreadScratch();
  Status status = EncodeNormalizedText(std::move(norm), s, out.tokens, &out.offsets_if_first);
  s.ReleaseLarge();
  return status;
}

void PipelineTokenizer::PushAddedToken(int32_t id, std::string_view text, uint32_t begin,
                                       uint32_t end, Piece& out) const {
  out.tokens.BeginWord();  // a word of its own
  if (!parts_.trim_offsets) {
    out.tokens.Push(id, begin, end);
    return;
  }
  const auto [lead, trail] = SpaceRuns(text, end - begin);
  PushTrimmed(id, begin, end, lead, trail, out.tokens, &out.offsets_if_first);
}

namespace {

std::string ToUtf8(const std::vector<char32_t>& chars) {
  std::string out;
  for (char32_t c : chars) {
    char buf[4];
    out.append(buf, AppendUtf8(c, buf));
  }
  return out;
}

// Bytes as UTF-8 text, each maximal invalid part (a byte that starts no
// character, or a character's start cut short) as one U+FFFD: Rust's
// from_utf8_lossy, which HF's ByteLevel decoder uses.
std::string Lossy(const std::string& bytes) {
  std::string out;
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const int need = b >= 0xC2 && b <= 0xDF   ? 1
                     : b >= 0xE0 && b <= 0xEF ? 2
                     : b >= 0xF0 && b <= 0xF4 ? 3
                                              : 0;
    // The second byte's range narrows after E0, ED, F0 and F4 (no overlong
    // forms, surrogates or code points past U+10FFFF).
    unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    size_t j = i + 1;
    int got = 0;
    for (; got < need && j < n; ++got, ++j) {
      const auto c = static_cast<unsigned char>(bytes[j]);
      if (c < lo || c > hi) break;
      lo = 0x80;
      hi = 0xBF;
    }
    if (need > 0 && got == need)
      out.append(bytes, i, j - i);
    else
      out += "\xEF\xBF\xBD";
    i = need > 0 ? j : i + 1;
  }
  return out;
}

void ApplyDecoder(const DecoderStep& d, std::vector<std::string>& tokens) {
  std::vector<char32_t> chars;
  switch (d.kind) {
    case DecoderStep::kByteLevel: {
      // Byte-level chars back to bytes; a token with any other char stays.
      std::string bytes;
      for (const std::string& t : tokens) {
        DecodeUtf8(t, chars);
        std::string mapped;
        bool all = true;
        for (char32_t c : chars) {
          const int b = CharByte(c);
          all &= b >= 0;
          if (!all) break;
          mapped.push_back(static_cast<char>(b));
        }
        bytes += all ? mapped : t;
      }
      tokens = {Lossy(bytes)};
      return;
    }
    case DecoderStep::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        DecodeUtf8(tokens[i], chars);
        std::vector<char32_t> out;
        // HF drops every replacement char of the first token, not just one.
        for (char32_t c : chars) {
          const bool rep = c == d.c;
          if (rep && i == 0 && d.flag) continue;
          out.push_back(rep ? U' ' : c);
        }
        tokens[i] = ToUtf8(out);
      }
      return;
    case DecoderStep::kWordPiece:
      WordPieceDecode(tokens, d.text, d.flag);
      return;
    case DecoderStep::kBpe:
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (d.text.empty()) continue;
        const std::string with = i + 1 == tokens.size() ? "" : " ";
        std::string& t = tokens[i];
        for (size_t at = t.find(d.text); at != std::string::npos;
             at = t.find(d.text, at + with.size())) {
          t.replace(at, d.text.size(), with);
        }
      }
      return;
    case DecoderStep::kByteFallback: {
      // Runs of <0xNN> tokens become their bytes' text, or one U+FFFD per
      // byte when they are not valid UTF-8.
      std::vector<std::string> out;
      std::string pending;
      size_t pending_count = 0;
      auto flush = [&] {
        if (pending_count == 0) return;
        std::vector<char32_t> check;
        if (DecodeUtf8(pending, check) < 0) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending_count; ++k) out.push_back("\xEF\xBF\xBD");
        }
        pending.clear();
        pending_count = 0;
      };
      for (const std::string& t : tokens) {
        const bool byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                          std::isxdigit(static_cast<unsigned char>(t[3])) &&
                          std::isxdigit(static_cast<unsigned char>(t[4]));
        if (byte) {
          pending.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
          ++pending_count;
        } else {
          flush();
          out.push_back(t);
        }
      }
      flush();
      tokens = std::move(out);
      return;
    }
    case DecoderStep::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens = {all};
      return;
    }
    case DecoderStep::kStrip:
      for (std::string& t : tokens) {
        DecodeUtf8(t, chars);
        size_t begin = 0;
        while (begin < d.start && begin < chars.size() && chars[begin] == d.c) ++begin;
        size_t end = chars.size();
        for (size_t k = 0; k < d.stop && end > begin && chars[end - 1] == d.c; ++k) --end;
        t = ToUtf8(std::vector<char32_t>(chars.begin() + begin, chars.begin() + end));
      }
      return;
    case DecoderStep::kReplace: {
      std::vector<std::pair<size_t, size_t>> matches;
      std::vector<char32_t> content;
      DecodeUtf8(d.text, content);
      for (std::string& t : tokens) {
        DecodeUtf8(t, chars);
        d.pattern->FindAll(chars.data(), chars.size(), matches);
        std::vector<char32_t> out;
        size_t last = 0;
        for (const auto& [b, e] : matches) {
          out.insert(out.end(), chars.begin() + last, chars.begin() + b);
          out.insert(out.end(), content.begin(), content.end());
          last = e;
        }
        out.insert(out.end(), chars.begin() + last, chars.end());
        t = ToUtf8(out);
      }
      return;
    }
  }
}

}  // namespace

std::string PipelineTokenizer::Decode(const std::vector<int32_t>& ids,
                                      bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty())
      continue;
    if (skip_special_tokens && special_[id]) continue;
    tokens.push_back(id_to_token_[id]);
  }
  return DecodeTokens(std::move(tokens));
}

std::string PipelineTokenizer::DecodeTokens(std::vector<std::string> tokens) const {
  std::string out;
  if (!parts_.has_decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const DecoderStep& step : parts_.decoder) {
    if (tokens.empty()) break;
    ApplyDecoder(step, tokens);
  }
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace bertrt::tokenizer
