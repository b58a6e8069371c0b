// The two lookup tables of byte-level BPE, as flat open-addressing hash tables
// (one allocation each, no per-lookup allocation):
//   TokenIndex: token bytes -> token id (a whole piece that is a token needs no merging);
//   PairIndex:  (left id, right id) -> id of the token whose bytes are left's + right's.
// PairIndex holds every split of every token into two tokens, not only the merge that made it,
// because tiktoken ranks a pair by the rank of its concatenated bytes. For GPT-2 a token's
// rank is its id, so the merged id is also the pair's rank.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace dt {

// A 64-bit hash of a short byte string (8 bytes at a time, multiply-xorshift mixing).
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
  }
  h ^= h >> 29;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 32);
}

class TokenIndex {
 public:
  // bytes + offsets: token i is bytes[offsets[i], offsets[i+1]). Ids in `skip` are left out
  // (the special <|endoftext|>, which ordinary text never encodes to).
  void build(const std::string& bytes, const std::vector<uint32_t>& offsets, int32_t skip);
  // Id of the token with exactly these bytes, or -1. `hash` is hash_bytes(s).
  int32_t find(std::string_view s) const { return find(s, hash_bytes(s)); }
  int32_t find(std::string_view s, uint64_t hash) const {
    const uint64_t head = head_of(s);
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (slot.head == head && slot.len == s.size() &&
          (s.size() <= 8 || std::memcmp(bytes_ + slot.offset + 8, s.data() + 8, s.size() - 8) == 0))
        return slot.id;
    }
  }

 private:
  // The first 8 bytes (zero-padded): most tokens are no longer, so a lookup reads one slot and
  // never the token bytes; longer ones compare the rest.
  static uint64_t head_of(std::string_view s) {
    uint64_t h = 0;
    std::memcpy(&h, s.data(), s.size() < 8 ? s.size() : 8);
    return h;
  }
  struct Slot {  // 16 bytes
    uint64_t head = 0;
    int32_t id = -1;
    uint32_t offset : 24 = 0;  // GPT-2: 0.3 MB of token bytes, longest token 128 bytes
    uint32_t len : 8 = 0;
  };
  static_assert(sizeof(Slot) == 16);
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  const char* bytes_ = nullptr;  // the Vocab's token bytes (the Vocab owns them and this index)
};

// Ids must be below 65536 (GPT-2 has 50257), so a pair packs into 32 bits and a slot is 8 bytes:
// the table stays small enough to live in cache.
class PairIndex {
 public:
  static constexpr int32_t kMaxId = 0xFFFE;  // 0xFFFF:0xFFFF is the empty key
  void insert(int32_t left, int32_t right, int32_t merged);  // ids in [0, kMaxId]
  // Id of left + right, or -1 when the concatenation is not a token.
  int32_t find(int32_t left, int32_t right) const {
    const uint32_t key = pack(left, right);
    for (uint32_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return slot.merged;  // an empty slot's key never equals a real pair's
      if (slot.merged < 0) return -1;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t key = ~0u;
    int32_t merged = -1;
  };
  static uint32_t pack(int32_t a, int32_t b) { return (uint32_t(a) << 16) | uint32_t(b); }
  static uint32_t mix(uint32_t x) {  // a 32-bit integer hash (lowbias32)
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    return x ^ (x >> 16);
  }
  void grow();
  std::vector<Slot> slots_ = std::vector<Slot>(1024);
  uint32_t mask_ = 1023;
  size_t count_ = 0;
};

}  // namespace dt
