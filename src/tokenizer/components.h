// The normalizer and pre-tokenizer steps of the component pipeline, each an
// HF `tokenizers` component of the same name with the same semantics,
// including how every char's alignment to the original text moves.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/regex.h"

namespace bertrt::tokenizer {

// For the cut rules below: a char around a cut that is not known (a step
// of a Sequence sees its input only through the steps before), or that
// does not exist because the text ends there.
inline constexpr char32_t kUnknownChar = 0xFFFFFFFF;
inline constexpr char32_t kTextEnd = 0xFFFFFFFE;

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(NormalizedString& s) const = 0;
  // The bounded encoder normalizes a long text piece by piece. Whether
  // normalizing the parts of a text cut before char `at` (`before` the char
  // before it, `next` the one after) each alone gives the whole's chars and
  // alignments, whatever the rest of the text; then `at` becomes the first
  // char of the part after the cut as this step leaves it (kUnknownChar
  // where it cannot say). False where it cannot tell: the text is then
  // normalized without that cut.
  virtual bool CutsBefore(char32_t /*before*/, char32_t& /*at*/, char32_t /*next*/) const {
    return false;
  }
  // How many old chars every char of a text starting with chars[0, n) aligns
  // early (by a quirk of HF's), which a piece normalized apart from that
  // start must be moved back by; nullopt when that prefix cannot tell, and
  // `whole` says there is no more text.
  virtual std::optional<size_t> StartLag(const char32_t* /*chars*/, size_t /*n*/,
                                         bool /*whole*/) const {
    return 0;
  }
};

enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };
std::unique_ptr<Normalizer> MakeUnicodeNormalizer(UnicodeForm form);
std::unique_ptr<Normalizer> MakeLowercase();
std::unique_ptr<Normalizer> MakeStripAccents();
std::unique_ptr<Normalizer> MakeStrip(bool left, bool right);
std::unique_ptr<Normalizer> MakeReplace(std::shared_ptr<const Regex> pattern, std::string content);
std::unique_ptr<Normalizer> MakePrepend(std::string prepend);
std::unique_ptr<Normalizer> MakeNmt();
// Each char as the byte-level chars of its UTF-8 bytes (the ByteLevel
// normalizer; the ByteLevel pre-tokenizer ends with the same step).
std::unique_ptr<Normalizer> MakeByteLevelNormalizer();
std::unique_ptr<Normalizer> MakeNormalizerSequence(std::vector<std::unique_ptr<Normalizer>> steps);
// SentencePiece's precompiled charsmap (a double-array trie of UTF-8 keys
// plus their NUL-terminated replacements); InvalidArgument when malformed.
StatusOr<std::unique_ptr<Normalizer>> MakePrecompiled(std::string charsmap);

// How a split keeps the delimiters it finds (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each string of `splits` by its pieces (empty pieces dropped).
  virtual void PreTokenize(std::vector<NormalizedString>& splits) const = 0;
  // For the bounded encoder: whether a normalized string cut before s[at]
  // and pre-tokenized part by part gives the whole's words, judged from
  // s[at - 1], s[at] and s[at + 1] alone: a word ends at the cut, the next
  // starts there, and the part after it gets no prefix the whole would not
  // give there. False where it cannot tell.
  virtual bool CutsBefore(const char32_t* /*s*/, size_t /*at*/) const { return false; }
};

enum class PrependScheme { kFirst, kAlways, kNever };
std::unique_ptr<PreTokenizer> MakeMetaspace(char32_t replacement, PrependScheme scheme, bool split);
std::unique_ptr<PreTokenizer> MakeByteLevel(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> MakeSplit(std::shared_ptr<const Regex> pattern,
                                        SplitBehavior behavior, bool invert);
std::unique_ptr<PreTokenizer> MakeWhitespace();
std::unique_ptr<PreTokenizer> MakeWhitespaceSplit();
std::unique_ptr<PreTokenizer> MakeBertPreTokenizer();
std::unique_ptr<PreTokenizer> MakePunctuation(SplitBehavior behavior);
std::unique_ptr<PreTokenizer> MakeDigits(bool individual);
std::unique_ptr<PreTokenizer> MakeCharDelimiterSplit(char32_t delimiter);
// Chunks of `length` (> 0) chars.
std::unique_ptr<PreTokenizer> MakeFixedLength(size_t length);
std::unique_ptr<PreTokenizer> MakePreTokenizerSequence(
    std::vector<std::unique_ptr<PreTokenizer>> steps);

// Replaces each char of `s` by the byte-level chars of its UTF-8 bytes, all
// aligned as the char (HF's transform with the first byte replacing it).
void ToByteChars(NormalizedString& s);

// The byte-level alphabet: the char that stands for each byte.
char32_t ByteChar(unsigned char b);
// The byte a byte-level char stands for, or -1.
int CharByte(char32_t c);

}  // namespace bertrt::tokenizer
