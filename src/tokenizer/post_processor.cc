#include "tokenizer/post_processor.h"

#include <algorithm>
#include <string>

namespace bertrt {

Status CheckInputText(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty text: every input needs at least one character");
  return Status::Ok();
}

StatusOr<Truncation> ParseTruncation(std::string_view name) {
  if (name == "longest_first") return Truncation::kLongestFirst;
  if (name == "only_first") return Truncation::kOnlyFirst;
  if (name == "only_second") return Truncation::kOnlySecond;
  return InvalidArgument("unknown truncation strategy '" + std::string(name) +
                         "'; expected longest_first, only_first or only_second");
}

const char* TruncationName(Truncation t) {
  switch (t) {
    case Truncation::kLongestFirst: return "longest_first";
    case Truncation::kOnlyFirst: return "only_first";
    case Truncation::kOnlySecond: return "only_second";
  }
  return "unknown";
}

// The special tokens of `full` and each text's tokens [first[s], end[s]) (counted within it).
static Encoding KeepRanges(const Encoding& full, const size_t first[2], const size_t end[2]) {
  Encoding out;
  size_t seen[2] = {0, 0};
  for (size_t i = 0; i < full.input_ids.size(); ++i) {
    const int8_t s = full.sequence_ids[i];
    if (s == 0 || s == 1) {
      const size_t at = seen[s]++;
      if (at < first[s] || at >= end[s]) continue;
    }
    out.input_ids.push_back(full.input_ids[i]);
    out.token_type_ids.push_back(full.token_type_ids[i]);
    out.offsets.push_back(full.offsets[i]);
    out.special_tokens_mask.push_back(full.special_tokens_mask[i]);
    out.sequence_ids.push_back(s);
    out.word_ids.push_back(full.word_ids[i]);
  }
  return out;
}

// An encoding's tokens of each text, and its special tokens.
struct TokenCounts {
  size_t text[2] = {0, 0};
  size_t specials = 0;
};
static TokenCounts CountTokens(const Encoding& e) {
  TokenCounts c;
  for (int8_t s : e.sequence_ids)
    if (s == 0 || s == 1)
      ++c.text[s];
    else
      ++c.specials;
  return c;
}

StatusOr<Encoding> TruncateEncoding(const Encoding& full, bool is_pair, size_t max_length,
                                    Truncation strategy, bool from_start) {
  const TokenCounts counts = CountTokens(full);
  const size_t* length = counts.text;
  const size_t specials = counts.specials;
  ASSIGN_OR_RETURN(const tokenizer::KeptLengths kept,
                   tokenizer::TruncatedLengths(
                       length[0], is_pair ? std::optional<size_t>(length[1]) : std::nullopt,
                       specials, max_length, strategy));
  // A text's tokens before `first` and from `end` on go (counted within it).
  const size_t first[2] = {from_start ? length[0] - kept.a : 0,
                           from_start ? length[1] - kept.b : 0};
  const size_t end[2] = {first[0] + kept.a, first[1] + kept.b};
  return KeepRanges(full, first, end);
}

StatusOr<std::vector<Encoding>> OverflowWindows(const Encoding& full, bool is_pair,
                                                size_t max_length, size_t stride,
                                                Truncation strategy, size_t max_windows) {
  const TokenCounts counts = CountTokens(full);
  const size_t* length = counts.text;
  const size_t specials = counts.specials;
  // As TruncatedLengths: no limit, or one below the special tokens, cuts nothing.
  if (max_length == 0 || max_length < specials || full.input_ids.size() <= max_length)
    return std::vector<Encoding>{full};
  if (is_pair && strategy == Truncation::kLongestFirst)
    return InvalidArgument("windows over a text pair cut one of its texts: only_first or only_second");
  const int8_t seq = is_pair && strategy == Truncation::kOnlySecond ? 1 : 0;
  const size_t to_remove = full.input_ids.size() - max_length;
  if (length[seq] <= to_remove)
    return InvalidArgument("cannot cut the " + std::string(seq == 0 ? "first" : "second") +
                           " text into windows of " + std::to_string(max_length) +
                           " tokens: the rest of the input takes " +
                           std::to_string(full.input_ids.size() - length[seq]) +
                           " of them; raise the maximum length or shorten the other text");
  const size_t window = length[seq] - to_remove;
  if (stride >= window)
    return InvalidArgument("a stride of " + std::to_string(stride) +
                           " tokens is not below the " + std::to_string(window) +
                           " tokens of the text each window holds; make it smaller");
  const size_t step = window - stride;
  const size_t windows = 1 + (length[seq] - window + step - 1) / step;
  if (max_windows > 0 && windows > max_windows)
    return ResourceExhausted("the input needs " + std::to_string(windows) + " windows of " +
                      std::to_string(max_length) + " tokens, more than the " +
                      std::to_string(max_windows) + " a request may run");
  std::vector<Encoding> out;
  for (size_t start = 0;; start += step) {
    const size_t stop = std::min(start + window, length[seq]);
    size_t first[2] = {0, 0}, end[2] = {length[0], length[1]};
    first[seq] = start;
    end[seq] = stop;
    out.push_back(KeepRanges(full, first, end));
    if (stop == length[seq]) break;
  }
  return out;
}

namespace tokenizer {

size_t PostProcessor::AddedTokens(bool is_pair) const {
  size_t n = 0;
  for (const TemplateItem& item : is_pair ? pair : single) n += item.ids.size();
  return n;
}

void PostProcessor::Apply(const TokenList& a, const TokenList* b, Encoding& out) const {
  const auto& items = b != nullptr ? pair : single;
  size_t total = 0;
  for (const TemplateItem& item : items) {
    total += item.sequence < 0 ? item.ids.size() : (item.sequence == 0 ? a : *b).ids.size();
  }
  out.input_ids.reserve(total);
  out.token_type_ids.reserve(total);
  out.offsets.reserve(total);
  out.special_tokens_mask.reserve(total);
  out.sequence_ids.reserve(total);
  out.word_ids.reserve(total);
  for (const TemplateItem& item : items) {
    if (item.sequence < 0) {
      for (int32_t id : item.ids) {
        out.input_ids.push_back(id);
        out.token_type_ids.push_back(item.type_id);
        out.offsets.emplace_back(0, 0);
        out.special_tokens_mask.push_back(1);
        out.sequence_ids.push_back(-1);
        out.word_ids.push_back(-1);
      }
      continue;
    }
    const TokenList& seq = item.sequence == 0 ? a : *b;
    const size_t n = seq.ids.size();
    out.input_ids.insert(out.input_ids.end(), seq.ids.begin(), seq.ids.end());
    out.token_type_ids.insert(out.token_type_ids.end(), n, item.type_id);
    out.offsets.insert(out.offsets.end(), seq.offsets.begin(), seq.offsets.end());
    out.special_tokens_mask.insert(out.special_tokens_mask.end(), n, 0);
    out.sequence_ids.insert(out.sequence_ids.end(), n, static_cast<int8_t>(item.sequence));
    // A token that begins no word (the first kept after a cut) is in the word before.
    int32_t word = static_cast<int32_t>(seq.words_before) - 1;
    for (size_t i = 0; i < n; ++i) {
      word += seq.word_starts[i];
      out.word_ids.push_back(std::max(word, 0));
    }
  }
}

Status TooManyTokens(EncodeReport* report, size_t tokens, bool exact, size_t max_length) {
  if (report) {
    report->too_long = true;
    report->tokens = tokens;
    report->exact = exact;
  }
  return OutOfRange(exact ? "the input is " + std::to_string(tokens) + " tokens, more than " +
                                std::to_string(max_length)
                          : "the input is more than " + std::to_string(max_length) + " tokens");
}

// Keeps `keep` of t's tokens, its last ones `from_start`; returns how many went.
static size_t KeepTokens(TokenList& t, size_t keep, bool from_start) {
  const size_t drop = t.ids.size() - keep;
  if (from_start) {
    t.DropFront(drop);
  } else {
    t.Resize(keep);
  }
  return drop;
}

StatusOr<Encoding> ApplyLimits(const PostProcessor& post, TokenList& a, TokenList* b,
                               const EncodeLimits& limits, EncodeReport* report) {
  const size_t specials = post.AddedTokens(b != nullptr);
  const size_t b_len = b ? b->ids.size() : 0;
  if (limits.max_length == 0) {
    // No limit: nothing to cut or refuse.
  } else if (!limits.truncate) {
    const size_t total = a.ids.size() + b_len + specials;
    if (limits.max_length > 0 && total > limits.max_length)
      return TooManyTokens(report, total, true, limits.max_length);
  } else {
    ASSIGN_OR_RETURN(const KeptLengths kept,
                     TruncatedLengths(a.ids.size(), b ? std::optional<size_t>(b_len) : std::nullopt,
                                      specials, limits.max_length, limits.truncation));
    const size_t a_cut = kept.a < a.ids.size() ? KeepTokens(a, kept.a, limits.truncate_left) : 0;
    const size_t b_cut = b && kept.b < b_len ? KeepTokens(*b, kept.b, limits.truncate_left) : 0;
    if (report) report->truncated = a_cut + b_cut > 0;
    if (report && limits.truncate_left)
      report->first_text_cut = std::min(a_cut, limits.count_first_text_cut_up_to);
  }
  Encoding enc;
  post.Apply(a, b, enc);
  return enc;
}

StatusOr<KeptLengths> TruncatedLengths(size_t a, std::optional<size_t> b, size_t special_tokens,
                                       size_t max_length, Truncation strategy) {
  const size_t b_len = b.value_or(0);
  // HF subtracts the special tokens from max_length in unsigned arithmetic:
  // a max_length below their count wraps around and truncates nothing. We
  // keep that so that ids stay identical to HF's for every max_length.
  if (max_length == 0 || max_length < special_tokens) return KeptLengths{a, b_len};
  const size_t budget = max_length - special_tokens;
  if (budget == 0) return KeptLengths{0, 0};
  const size_t total = a + b_len;
  if (total <= budget) return KeptLengths{a, b_len};
  const size_t to_remove = total - budget;

  if (strategy == Truncation::kLongestFirst) {
    if (!b) return KeptLengths{budget, 0};
    // The shorter sequence keeps all its tokens if the longer one can absorb
    // the cut; otherwise the budget is split in half (the extra token of an
    // odd budget goes to the longer one).
    size_t n1 = std::min(a, b_len);
    size_t n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
      n1 = budget / 2;
      n2 = n1 + budget % 2;
    }
    return a > b_len ? KeptLengths{n2, n1} : KeptLengths{n1, n2};
  }
  const bool first = strategy == Truncation::kOnlyFirst;
  if (!first && !b) {
    return InvalidArgument(
        "truncation only_second needs a text_pair; use longest_first or only_first for a "
        "single text");
  }
  const size_t target = first ? a : b_len;
  if (target <= to_remove) {
    return InvalidArgument("cannot truncate to max_length " + std::to_string(max_length) +
                           " with " + TruncationName(strategy) + ": " +
                           std::to_string(to_remove) + " tokens must go but the " +
                           (first ? "first" : "second") + " text has only " +
                           std::to_string(target) + "; raise max_length or use longest_first");
  }
  return first ? KeptLengths{a - to_remove, b_len} : KeptLengths{a, b_len - to_remove};
}

}  // namespace tokenizer
}  // namespace bertrt
