// A per-thread memo of piece -> token ids for the pieces that needed merging (a piece that is
// itself a token never gets here). Fixed size: when full it starts over, so memory stays
// bounded (about 2 MiB a thread) and a lookup never allocates.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace dt {

class PieceCache {
 public:
  static constexpr size_t kMaxPiece = 64;      // longer pieces are not cached
  static constexpr size_t kSlots = 1 << 16;    // power of two
  static constexpr size_t kMaxEntries = kSlots / 2;

  // Empties the cache when it belongs to another vocabulary (`owner` is the vocabulary's serial).
  void claim(uint64_t owner) {
    if (owner_ != owner) {
      clear();
      owner_ = owner;
    }
  }

  // The cached ids of `piece` (hash = hash_bytes(piece)), or false.
  bool find(std::string_view piece, uint64_t hash, const int32_t*& ids, uint32_t& count) const {
    if (slots_.empty()) return false;
    for (uint64_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return false;
      if (s.hash == hash && s.key_len == piece.size() &&
          std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) == 0) {
        ids = vals_.data() + s.val_off;
        count = s.val_len;
        return true;
      }
    }
  }

  void insert(std::string_view piece, uint64_t hash, const int32_t* ids, uint32_t count) {
    if (piece.empty() || piece.size() > kMaxPiece) return;
    if (slots_.empty() || entries_ >= kMaxEntries) clear();
    uint64_t i = hash & (kSlots - 1);
    while (slots_[i].key_len != 0) i = (i + 1) & (kSlots - 1);
    slots_[i] = Slot{hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(vals_.size()),
                     static_cast<uint16_t>(piece.size()), static_cast<uint16_t>(count)};
    keys_.append(piece);
    vals_.insert(vals_.end(), ids, ids + count);
    ++entries_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, val_off = 0;
    uint16_t key_len = 0, val_len = 0;  // key_len 0: empty slot
  };
  void clear() {
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    vals_.clear();
    entries_ = 0;
  }
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> vals_;
  size_t entries_ = 0;
  uint64_t owner_ = 0;
};

}  // namespace dt
