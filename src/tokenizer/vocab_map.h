// Open-addressing hash map from token bytes to id over one string arena. The
// WordPiece loop hashes every prefix of the rest of a word in one pass
// (HashStream), so probing a candidate costs one table lookup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertrt::tokenizer {

// FNV-1a, fed byte by byte, finished with a mix so low bits are usable.
class HashStream {
 public:
  void Add(std::string_view bytes) {
    for (unsigned char b : bytes) Add(b);
  }
  void Add(unsigned char b) { h_ = (h_ ^ b) * 0x100000001b3ull; }
  uint64_t Finish() const {
    uint64_t h = h_ ^ (h_ >> 29);
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

class VocabMap {
 public:
  // Later entries with the same token replace earlier ones (as a HashMap
  // insert does in HF).
  void Insert(std::string_view token, int32_t id);
  int32_t Find(std::string_view token) const;
  // Looks up prefix + rest, whose hash (over both) is `hash`.
  int32_t Find(uint64_t hash, std::string_view prefix, std::string_view rest) const;
  size_t size() const { return size_; }
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  struct Slot {
    uint32_t tag = 0;
    uint32_t offset = 0;
    uint32_t len = 0;
    int32_t id = -1;  // -1: empty
  };
  void Grow();
  Slot* Lookup(uint64_t hash, std::string_view prefix, std::string_view rest);

  std::string arena_;
  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t max_token_bytes_ = 0;
};

}  // namespace bertrt::tokenizer
