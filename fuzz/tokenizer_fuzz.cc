// libFuzzer target for the tokenizer: arbitrary bytes as text / text_pair /
// max_length / strategy, and as tokenizer.json contents. Nothing may crash,
// hang or trip the sanitizers; invalid input must come back as a Status;
// read in pieces under limits, a text must encode as it does whole.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bertrt/tokenizer.h"
#include "bounded_check.h"

namespace {

std::shared_ptr<bertrt::Tokenizer> MakeTokenizer(bool lowercase) {
  // Small but covers subwords, accents, CJK, special tokens and [unused].
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a",
                                    "##b", "ab", "##ab", "é", "##é", "中", "!", "[", "]", "i",
                                    "##̇", "hello", "##llo", "he", "Σ", "σ", "𝐀"};
  bertrt::TokenizerSettings s;
  s.lowercase = lowercase;
  s.max_input_chars_per_word = 12;
  auto t = bertrt::Tokenizer::FromVocab(std::move(vocab), s);
  return t.ok() ? *t : nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto uncased = MakeTokenizer(true);
  static const auto cased = MakeTokenizer(false);
  if (size < 3 || !uncased || !cased) return 0;
  const uint8_t control = data[0];
  const size_t max_length = data[1] % 16;
  const auto strategy = static_cast<bertrt::Truncation>(control % 3);
  const bertrt::Tokenizer& tok = (control & 4) ? *cased : *uncased;
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);

  if (control & 8) {
    // Untrusted tokenizer.json: loading must fail cleanly or yield a usable tokenizer.
    auto t = bertrt::Tokenizer::FromTokenizerJson(rest);
    if (t.ok()) (void)(*t)->Encode("hello [CLS] world", std::string_view("é 中"), max_length, strategy);
    return 0;
  }
  std::optional<std::string_view> pair;
  if (control & 16) {
    const size_t cut = data[2] % rest.size();
    pair = rest.substr(cut);
    rest = rest.substr(0, cut);
  }
  CheckBoundedEncoding(tok, rest, pair, max_length, strategy, !(control & 32), control & 64,
                       1 + data[1] % 7);
  auto enc = tok.Encode(rest, pair, max_length, strategy);
  if (enc.ok()) {
    const size_t n = enc->input_ids.size();
    if (enc->token_type_ids.size() != n || enc->offsets.size() != n ||
        enc->special_tokens_mask.size() != n || enc->sequence_ids.size() != n ||
        enc->word_ids.size() != n) {
      __builtin_trap();
    }
    for (const auto& [start, end] : enc->offsets) {
      if (start > end || end > size) __builtin_trap();
    }
  }
  return 0;
}
