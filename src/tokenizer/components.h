// The normalizer and pre-tokenizer steps of the component pipeline, each an
// HF `tokenizers` component of the same name with the same semantics,
// including how every char's alignment to the original text moves.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bertrt/status.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/regex.h"

namespace bertrt::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(NormalizedString& s) const = 0;
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
