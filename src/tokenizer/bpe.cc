#include "tokenizer/bpe.h"

#include <atomic>
#include <cstdio>
#include <queue>

#include "tokenizer/scratch.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {
namespace {

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Each thread keeps the tokens of the words it has seen, per BPE model (by
// an id never reused, so a model loaded at a freed model's address does not
// read its cache): words repeat, and merging is most of BPE's cost. Bounded
// as HF's cache is: short words only, and emptied when full, by count and
// by bytes (a thread's cache of long words would otherwise grow to tens of
// MB, and a server has many threads).
struct WordCache {
  std::unordered_map<std::u32string, std::vector<WordToken>> words;
  size_t bytes = 0;  // about what `words` holds
};
constexpr size_t kMaxCachedChars = 64;
constexpr size_t kMaxCachedWords = 1 << 15;
constexpr size_t kMaxCachedBytes = 2 << 20;
constexpr size_t kMaxCachedModels = 8;

WordCache& CacheOf(uint64_t model) {
  thread_local std::unordered_map<uint64_t, WordCache> caches;
  if (caches.size() >= kMaxCachedModels && !caches.count(model)) caches.clear();
  WordCache& c = caches[model];
  if (c.words.size() >= kMaxCachedWords || c.bytes >= kMaxCachedBytes) {
    c.words = {};  // frees the buckets too, which clear() keeps
    c.bytes = 0;
  }
  return c;
}

std::atomic<uint64_t> next_model_id{1};

}  // namespace

StatusOr<std::unique_ptr<Bpe>> Bpe::Create(
    std::vector<std::pair<std::string, int32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options) {
  std::unique_ptr<Bpe> m(new Bpe());
  m->id_ = next_model_id.fetch_add(1);
  for (const auto& [token, id] : vocab) {
    if (id < 0) return InvalidArgument("BPE vocabulary id " + std::to_string(id) + " is negative");
    m->ids_.Insert(token, id);
  }
  m->vocab_ = std::move(vocab);
  m->options_ = std::move(options);
  const size_t prefix_len =
      m->options_.continuing_subword_prefix ? m->options_.continuing_subword_prefix->size() : 0;
  m->merges_.reserve(merges.size() * 2);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t a_id = m->ids_.Find(a);
    const int32_t b_id = m->ids_.Find(b);
    if (a_id < 0 || b_id < 0) {
      return InvalidArgument("BPE merge " + std::to_string(rank) + " ('" + a + "' '" + b +
                             "') names a token that is not in the vocabulary");
    }
    if (b.size() < prefix_len) {
      return InvalidArgument("BPE merge " + std::to_string(rank) + ": '" + b +
                             "' is shorter than the continuing_subword_prefix");
    }
    // The merged token drops the right part's prefix, as HF builds it.
    const std::string merged = a + b.substr(prefix_len);
    const int32_t new_id = m->ids_.Find(merged);
    if (new_id < 0) {
      return InvalidArgument("BPE merge " + std::to_string(rank) + " makes '" + merged +
                             "', which is not in the vocabulary");
    }
    // A later duplicate of a pair replaces the earlier one, as HF's map does.
    m->merges_[PairKey(a_id, b_id)] = {static_cast<uint32_t>(rank), new_id};
  }
  if (m->options_.unk_token) {
    m->unk_id_ = m->ids_.Find(*m->options_.unk_token);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m->byte_ids_[b] = m->ids_.Find(name);
  }
  m->plain_char_ids_.assign(0x200, -1);
  for (char32_t c = 0; c < 0x200; ++c) {
    char buf[4];
    const size_t n = AppendUtf8(c, buf);
    m->plain_char_ids_[c] = m->ids_.Find(std::string_view(buf, n));
  }
  return m;
}

int32_t Bpe::CharId(char32_t c, bool first, bool last, std::string& buf) const {
  const bool prefix = !first && options_.continuing_subword_prefix;
  const bool suffix = last && options_.end_of_word_suffix;
  if (!prefix && !suffix && c < 0x200) return plain_char_ids_[c];
  buf.clear();
  if (prefix) buf += *options_.continuing_subword_prefix;
  char bytes[4];
  buf.append(bytes, AppendUtf8(c, bytes));
  if (suffix) buf += *options_.end_of_word_suffix;
  return ids_.Find(buf);
}

Status Bpe::Tokenize(const NormalizedString& word, std::vector<WordToken>& out) const {
  const size_t n = word.chars.size();
  if (n > kMaxCachedChars) return TokenizeUncached(word, out);
  WordCache& cache = CacheOf(id_);
  thread_local std::u32string key;
  key.assign(word.chars.begin(), word.chars.end());
  auto it = cache.words.find(key);
  if (it != cache.words.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return Status::Ok();
  }
  const size_t first = out.size();
  RETURN_IF_ERROR(TokenizeUncached(word, out));
  cache.words.emplace(key, std::vector<WordToken>(out.begin() + first, out.end()));
  // The key, the tokens, and a node with its bucket.
  cache.bytes += key.size() * sizeof(char32_t) + (out.size() - first) * sizeof(WordToken) + 96;
  return Status::Ok();
}

Status Bpe::TokenizeUncached(const NormalizedString& word, std::vector<WordToken>& out) const {
  const size_t n = word.chars.size();
  thread_local std::string buf;
  thread_local std::vector<WordToken> symbols;
  ScratchGuard guard(buf, symbols);
  if (options_.ignore_merges) {
    buf.clear();
    for (char32_t c : word.chars) {
      char bytes[4];
      buf.append(bytes, AppendUtf8(c, bytes));
    }
    const int32_t id = ids_.Find(buf);
    if (id >= 0) {
      out.push_back({id, 0, static_cast<uint32_t>(n)});
      return Status::Ok();
    }
  }
  symbols.clear();
  // A pending unk run: [begin, end) chars.
  bool have_unk = false;
  WordToken unk{};
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<uint32_t>(i);
    const int32_t id = CharId(word.chars[i], i == 0, i + 1 == n, buf);
    if (id >= 0) {
      if (have_unk) symbols.push_back(unk);
      have_unk = false;
      symbols.push_back({id, b, b + 1});
      continue;
    }
    if (options_.byte_fallback) {
      // HF falls back on the bytes of the symbol as looked up, its prefix
      // and suffix included.
      thread_local std::string symbol;
      symbol.clear();
      if (i > 0 && options_.continuing_subword_prefix)
        symbol += *options_.continuing_subword_prefix;
      char bytes[4];
      symbol.append(bytes, AppendUtf8(word.chars[i], bytes));
      if (i + 1 == n && options_.end_of_word_suffix) symbol += *options_.end_of_word_suffix;
      bool all = true;
      for (unsigned char c : symbol) all &= byte_ids_[c] >= 0;
      if (all) {
        // HF leaves a pending unk where it is and adds it after these. Each
        // byte token spans the char (HF gives it one byte of the word,
        // which converts to the same char except past a prefix or suffix).
        for (unsigned char c : symbol) symbols.push_back({byte_ids_[c], b, b + 1});
        continue;
      }
    }
    if (!options_.unk_token) continue;  // HF drops the char without an unk token
    if (unk_id_ < 0) {
      return InvalidArgument("the BPE unk_token '" + *options_.unk_token +
                             "' is not in the vocabulary");
    }
    if (have_unk && options_.fuse_unk) {
      unk.end = b + 1;
    } else {
      if (have_unk) symbols.push_back(unk);
      unk = {unk_id_, b, b + 1};
      have_unk = true;
    }
  }
  if (have_unk) symbols.push_back(unk);
  MergeAll(symbols);
  for (const WordToken& t : symbols) {
    if (t.end > t.begin) out.push_back(t);
  }
  return Status::Ok();
}

void Bpe::MergeAll(std::vector<WordToken>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2 || merges_.empty()) return;
  thread_local std::vector<int32_t> prev;
  thread_local std::vector<int32_t> next;
  ScratchGuard guard(prev, next);
  prev.resize(n);
  next.resize(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Entry {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Entry> heap_storage;
  heap_storage.clear();
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue(
      std::greater<Entry>(), std::move(heap_storage));
  auto push = [&](size_t pos) {
    const int32_t nx = next[pos];
    if (nx < 0) return;
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[nx].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, static_cast<uint32_t>(pos), it->second.new_id});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    WordToken& left = symbols[top.pos];
    // Entries go stale when a neighbour merged since they were queued: the
    // pair they name must still be there and still make the same token.
    if (left.end == left.begin || next[top.pos] < 0) continue;
    const auto right_pos = static_cast<size_t>(next[top.pos]);
    WordToken& right = symbols[right_pos];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.end = right.end;
    right.end = right.begin;  // removed
    next[top.pos] = next[right_pos];
    if (next[right_pos] >= 0) prev[next[right_pos]] = static_cast<int32_t>(top.pos);
    if (prev[top.pos] >= 0) push(static_cast<size_t>(prev[top.pos]));
    push(top.pos);
  }
}

}  // namespace bertrt::tokenizer
