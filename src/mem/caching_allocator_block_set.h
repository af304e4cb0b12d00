// BlockSet: an ordered set of free blocks, the part of a BlockPool
// (PyTorch's std::set<Block*, Comparison>) that holds one stream's blocks.
// Internal to the allocator.
//
// PyTorch orders a pool's free blocks by (stream, size, address)
// (BlockComparatorSize) and its unmapped blocks by (stream, address)
// (BlockComparatorAddress). Every lookup stays within one stream, so the
// allocator keeps one BlockSet per stream and pool, and walks streams in
// order where PyTorch walks a whole pool. A key packs (size, address, block
// slot) into 128 bits, so that comparing keys is one integer comparison and
// the slot comes with the key:
//   bits 86-127: size / 512     (block sizes are multiples of 512, < 2 PiB)
//   bits 30-85:  address / 256  (segments are 256-byte aligned, as cudaMalloc's)
//   bits 0-29:   slot           (the block's index)
// Unmapped blocks use size 0. The slot never decides the order of two
// blocks: no two blocks of a set share an address.
//
// A BlockSet is a sequence of sorted chunks of at most kChunk keys (a
// two-level B-tree): a lookup binary-searches the chunks' last keys, then
// one chunk; an insert or erase shifts at most one chunk. Chunks are
// recycled, so steady state runs without heap allocation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "util/check.h"

namespace prism::alloc_internal {

__extension__ typedef unsigned __int128 SetKey;

inline constexpr std::int64_t kKeySizeUnit = 512;
inline constexpr std::uint64_t kKeyAddrUnit = 256;
inline constexpr std::int32_t kMaxSlots = std::int32_t{1} << 30;

inline SetKey block_key(std::int64_t size, std::uint64_t addr, std::int32_t slot) {
  return (static_cast<SetKey>(static_cast<std::uint64_t>(size / kKeySizeUnit)) << 86) |
         (static_cast<SetKey>(addr / kKeyAddrUnit) << 30) | static_cast<std::uint32_t>(slot);
}
// The first key of any block of at least `size` bytes.
inline SetKey search_key(std::int64_t size) {
  return static_cast<SetKey>(static_cast<std::uint64_t>((size + kKeySizeUnit - 1) / kKeySizeUnit))
         << 86;
}
inline std::int64_t key_size(SetKey k) {
  return static_cast<std::int64_t>(k >> 86) * kKeySizeUnit;
}
inline std::int32_t key_slot(SetKey k) {
  return static_cast<std::int32_t>(k & (kMaxSlots - 1));
}

class BlockSet {
 public:
  // A position: chunk index and index within it. Any insert or erase
  // invalidates every position.
  struct Pos {
    std::int32_t chunk = 0;
    std::int32_t index = 0;
    friend bool operator==(Pos, Pos) = default;
  };

  BlockSet() = default;
  // A deep copy (the spare chunks stay behind).
  BlockSet(const BlockSet& o) : last_(o.last_), size_(o.size_) {
    chunks_.reserve(o.chunks_.size());
    for (const auto& c : o.chunks_) chunks_.push_back(std::make_unique<Chunk>(*c));
  }
  BlockSet& operator=(const BlockSet&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  Pos begin() const { return Pos{0, 0}; }
  Pos end() const { return Pos{static_cast<std::int32_t>(chunks_.size()), 0}; }
  SetKey key(Pos p) const { return chunks_[p.chunk]->keys[p.index]; }
  std::int32_t slot(Pos p) const { return key_slot(key(p)); }

  Pos next(Pos p) const {
    if (++p.index == chunks_[p.chunk]->n) return Pos{p.chunk + 1, 0};
    return p;
  }
  // p must not be begin().
  Pos prev(Pos p) const {
    if (p.index > 0) return Pos{p.chunk, p.index - 1};
    return Pos{p.chunk - 1, chunks_[p.chunk - 1]->n - 1};
  }

  // First key not less than k.
  Pos lower_bound(SetKey k) const {
    const auto chunk = static_cast<std::int32_t>(
        branchless_lower_bound(last_.data(), static_cast<int>(last_.size()), k));
    if (chunk == static_cast<std::int32_t>(chunks_.size())) return end();
    const Chunk& c = *chunks_[chunk];
    return Pos{chunk, branchless_lower_bound(c.keys, c.n, k)};
  }

  void insert(SetKey k) {
    if (chunks_.empty()) {
      chunks_.push_back(new_chunk());
      last_.push_back(0);
    }
    // The chunk that holds k's successor, or the last chunk.
    Pos p = lower_bound(k);
    if (p.chunk == static_cast<std::int32_t>(chunks_.size())) {
      p.chunk = static_cast<std::int32_t>(chunks_.size()) - 1;
      p.index = chunks_[p.chunk]->n;
    }
    PRISM_CHECK(p.index == chunks_[p.chunk]->n || chunks_[p.chunk]->keys[p.index] != k,
                "BlockSet: key inserted twice");
    if (chunks_[p.chunk]->n == kChunk) {
      split(p.chunk);
      if (p.index > kChunk / 2) {
        p.index -= kChunk / 2;
        ++p.chunk;
      }
    }
    Chunk& c = *chunks_[p.chunk];
    shift_right(c.keys + p.index, c.n - p.index);
    c.keys[p.index] = k;
    ++c.n;
    last_[p.chunk] = c.keys[c.n - 1];
    ++size_;
  }

  void erase(Pos p) {
    Chunk& c = *chunks_[p.chunk];
    shift_left(c.keys + p.index + 1, c.n - p.index - 1);
    --c.n;
    --size_;
    if (c.n == 0) {
      spare_.push_back(std::move(chunks_[p.chunk]));
      chunks_.erase(chunks_.begin() + p.chunk);
      last_.erase(last_.begin() + p.chunk);
      return;
    }
    last_[p.chunk] = c.keys[c.n - 1];
    if (c.n < kChunk / 4) maybe_merge(p.chunk);
  }

  // erase(p) then insert(k), shifting only the keys between the two places
  // when k stays in p's chunk (a split block's remainder, a merged block).
  void replace(Pos p, SetKey k) {
    Chunk& c = *chunks_[p.chunk];
    const auto last_chunk = static_cast<std::int32_t>(chunks_.size()) - 1;
    if (k < c.keys[p.index] && (p.chunk == 0 || last_[p.chunk - 1] < k)) {
      const int q = branchless_lower_bound(c.keys, p.index, k);
      shift_right(c.keys + q, p.index - q);
      c.keys[q] = k;
      last_[p.chunk] = c.keys[c.n - 1];
      return;
    }
    if (c.keys[p.index] < k && (p.chunk == last_chunk || k < chunks_[p.chunk + 1]->keys[0])) {
      const int q =
          p.index + 1 + branchless_lower_bound(c.keys + p.index + 1, c.n - p.index - 1, k);
      shift_left(c.keys + p.index + 1, q - p.index - 1);
      c.keys[q - 1] = k;
      last_[p.chunk] = c.keys[c.n - 1];
      return;
    }
    erase(p);
    insert(k);
  }

  // Erases k, which must be present.
  void erase(SetKey k) {
    const Pos p = lower_bound(k);
    PRISM_CHECK(p.chunk < static_cast<std::int32_t>(chunks_.size()) && key(p) == k,
                "BlockSet: erasing a missing key");
    erase(p);
  }

  // f(slot) for every key in order.
  template <typename F>
  void for_each(F f) const {
    for (const auto& c : chunks_)
      for (int i = 0; i < c->n; ++i) f(key_slot(c->keys[i]));
  }

 private:
  static constexpr int kChunk = 64;
  struct Chunk {
    SetKey keys[kChunk];
    int n = 0;
  };

  // Moves keys[0, n) one place up (down). Most shifts are a few keys, for
  // which a loop beats a call to memmove.
  static void shift_right(SetKey* keys, int n) {
    if (n > 8) {
      std::memmove(keys + 1, keys, static_cast<std::size_t>(n) * sizeof(SetKey));
      return;
    }
    for (int i = n; i > 0; --i) keys[i] = keys[i - 1];
  }
  static void shift_left(SetKey* keys, int n) {
    if (n > 8) {
      std::memmove(keys - 1, keys, static_cast<std::size_t>(n) * sizeof(SetKey));
      return;
    }
    for (int i = 0; i < n; ++i) keys[i - 1] = keys[i];
  }

  // Index of the first of keys[0, n) not less than k.
  static int branchless_lower_bound(const SetKey* keys, int n, SetKey k) {
    const SetKey* base = keys;
    while (n > 1) {
      const int half = n / 2;
      // Arithmetic rather than a conditional, so that it compiles without
      // a (mispredicted) branch.
      base += static_cast<std::ptrdiff_t>(base[half - 1] < k) * half;
      n -= half;
    }
    return static_cast<int>(base - keys) + (n == 1 && *base < k ? 1 : 0);
  }

  std::unique_ptr<Chunk> new_chunk() {
    if (spare_.empty()) return std::make_unique<Chunk>();
    std::unique_ptr<Chunk> c = std::move(spare_.back());
    spare_.pop_back();
    c->n = 0;
    return c;
  }

  // Moves the upper half of a full chunk into a new chunk after it.
  void split(std::int32_t i) {
    std::unique_ptr<Chunk> fresh = new_chunk();
    Chunk& c = *chunks_[i];
    std::copy(c.keys + kChunk / 2, c.keys + kChunk, fresh->keys);
    fresh->n = kChunk / 2;
    c.n = kChunk / 2;
    last_[i] = c.keys[c.n - 1];
    last_.insert(last_.begin() + i + 1, fresh->keys[fresh->n - 1]);
    chunks_.insert(chunks_.begin() + i + 1, std::move(fresh));
  }

  // Folds a sparse chunk into a neighbour when both fit in half a chunk.
  void maybe_merge(std::int32_t i) {
    const auto count = static_cast<std::int32_t>(chunks_.size());
    std::int32_t left = -1;
    if (i + 1 < count && chunks_[i]->n + chunks_[i + 1]->n <= kChunk / 2)
      left = i;
    else if (i > 0 && chunks_[i - 1]->n + chunks_[i]->n <= kChunk / 2)
      left = i - 1;
    if (left < 0) return;
    Chunk& a = *chunks_[left];
    Chunk& b = *chunks_[left + 1];
    std::copy(b.keys, b.keys + b.n, a.keys + a.n);
    a.n += b.n;
    last_[left] = a.keys[a.n - 1];
    spare_.push_back(std::move(chunks_[left + 1]));
    chunks_.erase(chunks_.begin() + left + 1);
    last_.erase(last_.begin() + left + 1);
  }

  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<SetKey> last_;  // each chunk's last key
  std::vector<std::unique_ptr<Chunk>> spare_;
  std::size_t size_ = 0;
};

}  // namespace prism::alloc_internal
