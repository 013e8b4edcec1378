#include "serving/token_classification.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "serving/text_span.h"

namespace bertrt::serving {

StatusOr<Aggregation> ParseAggregation(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "none") return Aggregation::kNone;
  if (n == "simple") return Aggregation::kSimple;
  if (n == "first") return Aggregation::kFirst;
  if (n == "average") return Aggregation::kAverage;
  if (n == "max") return Aggregation::kMax;
  return InvalidArgument("unknown aggregation_strategy \"" + std::string(name) +
                         "\"; expected none, simple, first, average or max");
}

StatusOr<TokenClassification> TokenClassification::Prepare(const Tokenizer& tokenizer,
                                                           std::string text, int max_length,
                                                           size_t max_normalized_chars,
                                                           size_t max_windows,
                                                           TokenClassificationOptions options) {
  RETURN_IF_ERROR(CheckInputText(text));
  if (options.stride < 0) return InvalidArgument("stride must not be negative");
  if (options.stride > 0 && options.aggregation == Aggregation::kNone)
    return InvalidArgument(
        "a stride reads the whole text in windows, whose tokens aggregation_strategy \"none\" "
        "cannot merge: choose simple, first, average or max");
  if (options.stride >= max_length)
    return InvalidArgument("stride " + std::to_string(options.stride) +
                           " must be less than the model's " + std::to_string(max_length) +
                           " tokens");
  TokenClassification task(tokenizer, std::move(text), std::move(options));
  EncodeLimits limits;
  limits.max_normalized_chars = max_normalized_chars;
  // Without a stride, cut to the model's length as the pipeline does.
  if (task.options_.stride == 0) limits.max_length = static_cast<size_t>(max_length);
  ASSIGN_OR_RETURN(Encoding full, tokenizer.Encode(task.text_, std::nullopt, limits));
  ASSIGN_OR_RETURN(task.windows_, OverflowWindows(full, false, static_cast<size_t>(max_length),
                                                  static_cast<size_t>(task.options_.stride),
                                                  Truncation::kLongestFirst, max_windows));
  return task;
}

namespace {

// A token's label probabilities and where it is (HF's pre-entity).
struct TokenScores {
  std::string word;
  std::vector<float> scores;
  int index;
  uint32_t start, end;
  bool is_subword;
};

// HF's labels: "B-"/"I-" and the tag; another name is a continuation ("I") of itself.
std::pair<char, std::string_view> Tag(std::string_view label) {
  if (label.substr(0, 2) == "B-") return {'B', label.substr(2)};
  if (label.substr(0, 2) == "I-") return {'I', label.substr(2)};
  return {'I', label};
}

size_t Argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

std::vector<Entity> TokenClassification::Entities(const std::vector<const float*>& logits,
                                                  int num_labels, const LabelNames& label) const {
  const Tokenizer& tok = *tokenizer_;
  const CodePointText text(text_);
  const bool marks_subwords = !tok.continuing_subword_prefix().empty();
  const int32_t unk = tok.unk_id();
  const Aggregation aggregation = options_.aggregation;
  const std::vector<std::string> ignore =
      options_.ignore_labels.value_or(std::vector<std::string>{"O"});
  auto decode = [&](const std::vector<const Entity*>& parts) {
    std::vector<std::string> words;
    for (const Entity* e : parts) words.push_back(e->word);
    return tok.DecodeTokens(std::move(words));
  };

  std::vector<Entity> all;
  for (size_t w = 0; w < windows_.size(); ++w) {
    const Encoding& enc = windows_[w];
    // Softmax of each token's logits, in float32 as the pipeline's numpy does.
    std::vector<TokenScores> tokens;
    for (size_t i = 0; i < enc.input_ids.size(); ++i) {
      if (enc.special_tokens_mask[i]) continue;
      const float* row = logits[w] + i * num_labels;
      const float top = *std::max_element(row, row + num_labels);
      std::vector<float> p(num_labels);
      float sum = 0;
      for (int k = 0; k < num_labels; ++k) sum += p[k] = std::exp(row[k] - top);
      for (float& v : p) v /= sum;
      const auto [start, end] = enc.offsets[i];
      TokenScores t{
          tok.IdToToken(enc.input_ids[i]), std::move(p), static_cast<int>(i), start, end, false};
      if (marks_subwords) {
        // A word-aware tokenizer: a piece whose token is not its text has a prefix.
        t.is_subword = CountCodePoints(t.word) != end - start;
      } else {
        // HF's fallback: a token not after a space continues a word.
        t.is_subword = start > 0 && text.At(start - 1) != U' ' && text.At(start) != U' ';
      }
      if (enc.input_ids[i] == unk) {
        t.word = std::string(text.Slice(start, end));
        t.is_subword = false;
      }
      tokens.push_back(std::move(t));
    }

    // Per token (none, simple) or per word (first, average, max).
    std::vector<Entity> entities;
    if (aggregation == Aggregation::kNone || aggregation == Aggregation::kSimple) {
      for (const TokenScores& t : tokens) {
        const size_t best = Argmax(t.scores);
        entities.push_back(
            {label(static_cast<int>(best)), t.scores[best], t.word, t.index, t.start, t.end});
      }
    } else {
      for (size_t i = 0; i < tokens.size();) {
        size_t j = i + 1;
        while (j < tokens.size() && tokens[j].is_subword) ++j;
        std::vector<std::string> words;
        for (size_t k = i; k < j; ++k) words.push_back(tokens[k].word);
        std::vector<float> scores;
        if (aggregation == Aggregation::kFirst) {
          scores = tokens[i].scores;
        } else if (aggregation == Aggregation::kMax) {
          size_t top = i;
          float top_score = -1;
          for (size_t k = i; k < j; ++k) {
            const float m = *std::max_element(tokens[k].scores.begin(), tokens[k].scores.end());
            if (m > top_score) top_score = m, top = k;
          }
          scores = tokens[top].scores;
        } else {
          scores.assign(num_labels, 0.0f);
          for (int l = 0; l < num_labels; ++l) {
            double sum = 0;
            for (size_t k = i; k < j; ++k) sum += tokens[k].scores[l];
            scores[l] = static_cast<float>(sum / static_cast<double>(j - i));
          }
        }
        const size_t best = Argmax(scores);
        entities.push_back({label(static_cast<int>(best)), scores[best],
                            tok.DecodeTokens(std::move(words)), -1, tokens[i].start,
                            tokens[j - 1].end});
        i = j;
      }
    }

    if (aggregation != Aggregation::kNone) {
      // Adjacent entities of one tag, until a "B-" starts another, as one group.
      std::vector<Entity> groups;
      for (size_t i = 0; i < entities.size();) {
        const std::string_view tag = Tag(entities[i].label).second;
        size_t j = i + 1;
        while (j < entities.size()) {
          const auto [bi, next_tag] = Tag(entities[j].label);
          if (next_tag != tag || bi == 'B') break;
          ++j;
        }
        std::vector<const Entity*> parts;
        double score = 0;
        for (size_t k = i; k < j; ++k) {
          parts.push_back(&entities[k]);
          score += entities[k].score;
        }
        const std::string& first = entities[i].label;
        const size_t dash = first.find('-');
        groups.push_back({dash == std::string::npos ? first : first.substr(dash + 1),
                          score / static_cast<double>(j - i), decode(parts), -1, entities[i].start,
                          entities[j - 1].end});
        i = j;
      }
      entities = std::move(groups);
    }
    for (Entity& e : entities)
      if (std::find(ignore.begin(), ignore.end(), e.label) == ignore.end())
        all.push_back(std::move(e));
  }
  if (windows_.size() == 1 || all.empty()) return all;

  // Windows overlap: of the entities that start inside another, the longer
  // one stays (the higher score between equals), as the pipeline merges them.
  std::stable_sort(all.begin(), all.end(),
                   [](const Entity& a, const Entity& b) { return a.start < b.start; });
  std::vector<Entity> merged;
  Entity previous = all.front();
  for (Entity& e : all) {
    if (previous.start <= e.start && e.start < previous.end) {
      const uint32_t length = e.end - e.start, previous_length = previous.end - previous.start;
      if (length > previous_length || (length == previous_length && e.score > previous.score))
        previous = e;
    } else {
      merged.push_back(std::move(previous));
      previous = e;
    }
  }
  merged.push_back(std::move(previous));
  return merged;
}

}  // namespace bertrt::serving
