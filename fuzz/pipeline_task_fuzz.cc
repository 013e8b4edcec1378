// libFuzzer target for the serving core's tasks on untrusted text: token
// classification (every aggregation, strides) and question answering
// (windows, top_k, answer lengths), with logits taken from the input bytes.
// Nothing may crash, hang or trip the sanitizers; options out of range come
// back as a Status; entities and answers stay inside their text.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bertrt/tokenizer.h"
#include "serving/question_answering.h"
#include "serving/text_span.h"
#include "serving/token_classification.h"

namespace {

std::shared_ptr<bertrt::Tokenizer> MakeTokenizer() {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",     "b",
                                    "##a",   "##b",   "ab",    "##ab",  "é",      "##é",   "中",
                                    "!",     "[",     "]",     "i",     "hello",  "##llo", "he",
                                    "Σ",     "σ",     "𝐀",     " "};
  bertrt::TokenizerSettings s;
  s.max_input_chars_per_word = 12;
  auto t = bertrt::Tokenizer::FromVocab(std::move(vocab), s);
  return t.ok() ? *t : nullptr;
}

// Logits for every token of `windows`, `width` per token, from the fuzzer's bytes.
std::vector<std::vector<float>> Logits(const std::vector<bertrt::Encoding>& windows, int width,
                                       const uint8_t* data, size_t size) {
  std::vector<std::vector<float>> out;
  size_t at = 0;
  for (const auto& w : windows) {
    std::vector<float>& v = out.emplace_back(w.input_ids.size() * width);
    for (float& x : v) x = (static_cast<int>(data[at++ % size]) - 128) / 16.0f;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = MakeTokenizer();
  if (size < 4 || !tok) return 0;
  const uint8_t control = data[0], a = data[1], b = data[2];
  const std::string text(reinterpret_cast<const char*>(data + 3), size - 3);
  const int max_length = 4 + a % 28;
  if (control & 1) {
    bertrt::serving::TokenClassificationOptions o;
    o.aggregation = static_cast<bertrt::serving::Aggregation>(control / 2 % 5);
    o.stride = b % 8 == 0 ? 0 : b % 40;
    if (control & 64) o.ignore_labels = std::vector<std::string>{};
    auto task =
        bertrt::serving::TokenClassification::Prepare(*tok, text, max_length, 4096, 1000, o);
    if (!task.ok()) return 0;
    const int labels = 1 + b % 5;
    const auto logits = Logits(task->windows(), labels, data, size);
    std::vector<const float*> rows;
    for (const auto& l : logits) rows.push_back(l.data());
    const size_t chars = bertrt::serving::CountCodePoints(text);
    for (const auto& e : task->Entities(rows, labels, [](int i) {
           static const char* kNames[] = {"O", "B-X", "I-X", "B-Y", "Z"};
           return std::string(kNames[i]);
         })) {
      if (e.start > e.end || e.end > chars) __builtin_trap();
    }
    return 0;
  }
  const size_t cut = b % text.size();
  bertrt::serving::QuestionAnsweringOptions o;
  o.top_k = 1 + control / 2 % 4;
  o.max_answer_len = 1 + a % 6;
  o.doc_stride = control & 16 ? b % 16 : -1;
  o.handle_impossible_answer = control & 32;
  o.align_to_words = control & 64;
  const std::string context = text.substr(cut);
  auto task = bertrt::serving::QuestionAnswering::Prepare(*tok, text.substr(0, cut), context,
                                                          max_length, 4096, 1000, o);
  if (!task.ok()) return 0;
  const auto starts = Logits(task->windows(), 1, data, size);
  const auto ends = Logits(task->windows(), 1, data + 1, size - 1);
  std::vector<const float*> s, e;
  for (size_t w = 0; w < starts.size(); ++w) {
    s.push_back(starts[w].data());
    e.push_back(ends[w].data());
  }
  const size_t chars = bertrt::serving::CountCodePoints(context);
  const auto answers = task->Answers(s, e);
  if (answers.size() > static_cast<size_t>(o.top_k)) __builtin_trap();
  for (const auto& ans : answers)
    if (ans.start > ans.end || ans.end > chars) __builtin_trap();
  return 0;
}
