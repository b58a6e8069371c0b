#include "data/bpe_index.h"

#include <bit>
#include <string>

#include "core/error.h"

namespace dt {

void TokenIndex::build(const std::string& bytes, const std::vector<uint32_t>& offsets,
                       int32_t skip) {
  const size_t n = offsets.size() - 1;
  const size_t cap = std::bit_ceil(n * 2 + 2);  // load factor <= 1/2
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  bytes_ = bytes.data();
  for (size_t id = 0; id < n; ++id) {
    if (static_cast<int32_t>(id) == skip) continue;
    const uint32_t off = offsets[id], len = offsets[id + 1] - offsets[id];
    const uint64_t hash = hash_bytes({bytes_ + off, len});
    uint64_t i = hash & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    DT_CHECK(len <= 0xFF && off < (1u << 24), "tokenizer: token {} ({} bytes at offset {}) does "
             "not fit the index (tokens up to 255 bytes, 16 MiB in all)", id, len, off);
    const std::string_view s(bytes_ + off, len);
    slots_[i] = Slot{head_of(s), static_cast<int32_t>(id), off, len};
  }
}

void PairIndex::insert(int32_t left, int32_t right, int32_t merged) {
  DT_ASSERT(left >= 0 && left <= kMaxId && right >= 0 && right <= kMaxId && merged >= 0);
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint32_t key = pack(left, right);
  uint32_t i = mix(key) & mask_;
  while (slots_[i].merged >= 0 && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].merged < 0) ++count_;
  slots_[i] = Slot{key, merged};
}

void PairIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.merged < 0) continue;
    uint32_t i = mix(s.key) & mask_;
    while (slots_[i].merged >= 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace dt
