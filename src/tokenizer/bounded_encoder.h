// Encoding within EncodeLimits. A short text is tokenized whole, as it always
// was; a long one is read in pieces, from its start (or, when truncation
// keeps each text's end, from its end), and only as far as the tokens kept
// need: a 6 MB text cut to 512 tokens costs what its first few KB cost, and
// one refused for having too many tokens is refused once it has them.
//
// The pieces' encodings joined are the whole text's encoding because every
// cut is one that no step of the tokenizer looks across:
// - added tokens matched before normalizing split the raw text into
//   segments, found by a scan of its UTF-8 that gives Split's segments;
// - a text segment is normalized in chunks, cut where the normalizer
//   provably works char by char (Normalizer::CutsBefore: each component
//   judges a cut from the chars around it);
// - the normalized chars are encoded in pieces, cut where the normalized
//   added tokens and the pre-tokenizer provably split (AddedTokenMatcher::
//   CutsBefore, PreTokenizer::CutsBefore), so that the model sees the same
//   words.
// HF's Precompiled (XLM-R's charsmap) loses the removal of chars it drops at
// a segment's start, which moves every later char's alignment: a chunk
// after a cut is moved as much (Normalizer::StartLag). A component that
// cannot tell (Strip, Prepend, a regex it does not know, a pre-tokenizer
// that keeps a text whole) gives no cut: that part of the text is read
// whole, held to the limit on normalized chars.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "bertrt/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/wordpiece.h"

namespace bertrt::tokenizer {

// A token's [start, end) in code points of its text.
using TokenOffsets = std::pair<uint32_t, uint32_t>;

// The tokens of a piece of a text.
struct Piece {
  TokenList tokens;
  // The offsets of tokens' first token when that token turns out to be its
  // text's first (ByteLevel offset trimming keeps the space add_prefix_space
  // put there), where they differ.
  std::optional<TokenOffsets> offsets_if_first;
};

// How the work is split: the defaults are the product's; tests and fuzzers
// make pieces small to reach every cut.
struct BoundedTuning {
  // Texts of at most this many bytes (both together) are tokenized whole.
  size_t whole_text_bytes = 16 << 10;
  // Raw chars normalized at once at first; each chunk after doubles.
  size_t first_chunk_chars = 1024;
};

// What the bounded encoder needs of a tokenizer: each step on a piece.
class PieceEncoder {
 public:
  virtual ~PieceEncoder() = default;
  virtual const AddedTokenMatcher& raw_added_tokens() const = 0;
  virtual const PostProcessor& post_processor() const = 0;
  // The short texts' path: both texts tokenized whole, then ApplyLimits
  // (OutOfRange too when a text normalizes to more than
  // max_normalized_chars).
  virtual StatusOr<Encoding> EncodeWhole(std::string_view text,
                                         std::optional<std::string_view> text_pair,
                                         const EncodeLimits& limits,
                                         EncodeReport* report) const = 0;
  // The normalizer's cut rule (Normalizer::CutsBefore) on the raw chars
  // around a cut (`next` kTextEnd at the end of a segment).
  virtual bool NormalizerCutsBefore(char32_t before, char32_t at, char32_t next) const = 0;
  // The normalizer's StartLag (Normalizer::StartLag) for a text segment
  // starting with raw chars[0, n).
  virtual std::optional<size_t> NormalizerStartLag(const char32_t* chars, size_t n,
                                                   bool whole) const = 0;
  // Normalizes raw chars[0, n), of which the first is char `first` of the
  // text, into `out` (aligned to the text).
  virtual void Normalize(const char32_t* chars, uint32_t n, uint32_t first,
                         NormalizedString& out) const = 0;
  // Whether normalized text cut before s[at] encodes part by part as it
  // does whole (s[at - 1], s[at] and s[at + 1] are there).
  virtual bool EncoderCutsBefore(const char32_t* s, size_t at) const = 0;
  // Appends the tokens of normalized text `s`: a text segment's start (its
  // origin the segment's first char) or a piece after a cut.
  virtual Status EncodeNormalized(NormalizedString&& s, Piece& out) const = 0;
  // Appends an added token matched before normalizing: `text` its UTF-8,
  // chars [begin, end) of the text.
  virtual void PushAddedToken(int32_t id, std::string_view text, uint32_t begin, uint32_t end,
                              Piece& out) const = 0;
};

// Whether texts of `bytes` bytes in all are read in pieces.
inline bool ReadInPieces(size_t bytes, const BoundedTuning& tuning = {}) {
  return bytes > tuning.whole_text_bytes;
}

// Tokenizer::Encode(limits) of a text ReadInPieces: the texts read as far
// as `limits` needs.
StatusOr<Encoding> EncodeInPieces(const PieceEncoder& encoder, std::string_view text,
                                  std::optional<std::string_view> text_pair,
                                  const EncodeLimits& limits, EncodeReport* report,
                                  const BoundedTuning& tuning = {});

// Tokenizer::Encode(limits) with `tuning`'s paths, for tests and fuzzers.
StatusOr<Encoding> EncodeWithin(const PieceEncoder& encoder, std::string_view text,
                                std::optional<std::string_view> text_pair,
                                const EncodeLimits& limits, EncodeReport* report,
                                const BoundedTuning& tuning);

// The OutOfRange of a text whose normalized form passes `limit` chars.
Status NormalizedTooLong(size_t limit);

// The invalid UTF-8 and too-long errors of a text (or text_pair); sets
// `chars` to its code points.
Status CheckUtf8(std::string_view text, bool is_pair, size_t& chars);
// The same, decoding the text into `chars`.
Status DecodeText(std::string_view text, bool is_pair, std::vector<char32_t>& chars);

// PieceEncoder::EncodeWhole as both tokenizers do it: each text's tokens
// into the thread's scratch `s` (its a and b; encode(text, is_pair, tokens)),
// then the template and `limits`; the scratch's large buffers let go once
// texts longer than `release_after_bytes` are done (0: always).
template <typename Scratch, typename EncodeText>
StatusOr<Encoding> EncodeWholeTexts(Scratch& s, const PostProcessor& post, std::string_view text,
                                    std::optional<std::string_view> text_pair,
                                    const EncodeLimits& limits, EncodeReport* report,
                                    size_t release_after_bytes, EncodeText&& encode) {
  Status status = encode(text, false, s.a);
  if (status.ok() && text_pair) status = encode(*text_pair, true, s.b);
  if (!status.ok()) {
    s.ReleaseLarge();
    return status;
  }
  StatusOr<Encoding> out = ApplyLimits(post, s.a, text_pair ? &s.b : nullptr, limits, report);
  const size_t bytes = text.size() + (text_pair ? text_pair->size() : 0);
  if (release_after_bytes == 0 || bytes > release_after_bytes) s.ReleaseLarge();
  return out;
}

}  // namespace bertrt::tokenizer
