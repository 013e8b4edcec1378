#include "tokenizer/unigram.h"

#include <cstdio>
#include <limits>

#include "tokenizer/scratch.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {

StatusOr<std::unique_ptr<Unigram>> Unigram::Create(
    std::vector<std::pair<std::string, double>> pieces, int32_t unk_id, bool byte_fallback) {
  std::unique_ptr<Unigram> m(new Unigram());
  if (unk_id >= 0 && pieces.empty()) {
    return InvalidArgument("the Unigram vocabulary is empty but needs at least its unk piece");
  }
  if (unk_id >= static_cast<int32_t>(pieces.size())) {
    return InvalidArgument("the Unigram unk_id " + std::to_string(unk_id) +
                           " is past the vocabulary's " + std::to_string(pieces.size()) +
                           " pieces");
  }
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < pieces.size(); ++i) {
    m->vocab_.emplace_back(pieces[i].first, static_cast<int32_t>(i));
    m->scores_.push_back(pieces[i].second);
    m->ids_.Insert(pieces[i].first, static_cast<int32_t>(i));
    min_score = std::min(min_score, pieces[i].second);
  }
  // SentencePiece's penalty, kept so that unk never beats a real piece.
  m->unk_score_ = min_score - 10.0;
  m->unk_id_ = unk_id;
  m->byte_fallback_ = byte_fallback;
  m->trie_.Build(m->vocab_);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m->byte_ids_[b] = m->ids_.Find(name);
  }
  return m;
}

Status Unigram::Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const {
  struct Best {
    double score;
    int32_t start;  // -1: not reached yet
    int32_t id;
  };
  thread_local std::string bytes;
  thread_local std::vector<uint32_t> char_at;  // char index of each byte start
  thread_local std::vector<Best> best;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> pieces;  // byte ranges
  ScratchGuard guard(bytes, char_at, best, pieces);
  bytes.clear();
  char_at.clear();
  for (size_t i = 0; i < word.chars.size(); ++i) {
    char buf[4];
    const size_t n = AppendUtf8(word.chars[i], buf);
    bytes.append(buf, n);
    char_at.insert(char_at.end(), n, static_cast<uint32_t>(i));
  }
  const size_t size = bytes.size();
  char_at.push_back(static_cast<uint32_t>(word.chars.size()));
  best.assign(size + 1, Best{0.0, -1, 0});
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t at = 0; at < size;) {
    const double here = best[at].score;
    const size_t char_len = Utf8Length(s[at]);
    bool single = false;
    trie_.PrefixSearch(s + at, size - at, [&](size_t len, int32_t id) {
      Best& target = best[at + len];
      const double candidate = scores_[id] + here;
      // The first path to reach a position wins ties, as in HF.
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int32_t>(at), id};
      }
      single |= len == char_len;
    });
    if (!single) {
      if (unk_id_ < 0) {
        return InvalidArgument("the Unigram model has no unk piece for a char it cannot cover");
      }
      Best& target = best[at + char_len];
      const double candidate = unk_score_ + here;
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int32_t>(at), unk_id_};
      }
    }
    at += char_len;
  }
  // Back from the end; unk pieces next to each other fuse into one.
  pieces.clear();
  bool last_unk = false;
  for (size_t end = size; end > 0;) {
    const Best& b = best[end];
    const auto start = static_cast<uint32_t>(b.start);
    if (b.id == unk_id_ && last_unk) {
      pieces.back().first = start;
    } else {
      pieces.emplace_back(start, static_cast<uint32_t>(end));
    }
    last_unk = b.id == unk_id_;
    end = start;
  }
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    const auto [b, e] = *it;
    const uint32_t cb = char_at[b];
    const uint32_t ce = char_at[e];
    const std::string_view piece(bytes.data() + b, e - b);
    const int32_t id = ids_.Find(piece);
    if (id >= 0) {
      out.push_back({id, cb, ce});
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : piece) all &= byte_ids_[c] >= 0;
      if (all) {
        // Every byte token spans the whole piece, as HF gives them.
        for (unsigned char c : piece) out.push_back({byte_ids_[c], cb, ce});
        continue;
      }
    }
    if (unk_id_ < 0) return InvalidArgument("the Unigram model has no unk piece");
    out.push_back({unk_id_, cb, ce});
  }
  return Status::Ok();
}

}  // namespace bertrt::tokenizer
