#include "tokenizer/vocab_map.h"

namespace bertrt::tokenizer {
namespace {

uint64_t Hash(std::string_view s) {
  HashStream h;
  h.Add(s);
  return h.Finish();
}

}  // namespace

VocabMap::Slot* VocabMap::Lookup(uint64_t hash, std::string_view prefix, std::string_view rest) {
  const size_t mask = slots_.size() - 1;
  const auto tag = static_cast<uint32_t>(hash >> 32);
  const size_t len = prefix.size() + rest.size();
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.id < 0) return &s;
    if (s.tag == tag && s.len == len) {
      const char* t = arena_.data() + s.offset;
      if (prefix == std::string_view(t, prefix.size()) &&
          rest == std::string_view(t + prefix.size(), rest.size())) {
        return &s;
      }
    }
  }
}

void VocabMap::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    const std::string_view token(arena_.data() + s.offset, s.len);
    *Lookup(Hash(token), token, {}) = s;
  }
}

void VocabMap::Insert(std::string_view token, int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const uint64_t h = Hash(token);
  Slot* s = Lookup(h, token, {});
  if (s->id >= 0) {
    s->id = id;
    return;
  }
  s->tag = static_cast<uint32_t>(h >> 32);
  s->offset = static_cast<uint32_t>(arena_.size());
  s->len = static_cast<uint32_t>(token.size());
  s->id = id;
  arena_.append(token);
  ++size_;
  if (token.size() > max_token_bytes_) max_token_bytes_ = token.size();
}

int32_t VocabMap::Find(std::string_view token) const { return Find(Hash(token), token, {}); }

int32_t VocabMap::Find(uint64_t hash, std::string_view prefix, std::string_view rest) const {
  if (slots_.empty()) return -1;
  return const_cast<VocabMap*>(this)->Lookup(hash, prefix, rest)->id;
}

}  // namespace bertrt::tokenizer
