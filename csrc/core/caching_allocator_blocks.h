// Blocks and segments of the mydev caching allocator: a segment is one driver
// allocation, cut into blocks that are linked to their neighbours so freed
// pieces can be merged back. Free blocks wait in a BlockPool (a free list),
// ordered by stream, then size, then address, so that a best fit on the
// requesting stream is one lower_bound.
//
// Each pool knows its kind, as CUDA's do: small or large requests, and which
// memory pool it belongs to (the device's, or a graph's private pool), so
// that statistics and snapshots attribute a block without asking where its
// pool lives.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <set>
#include <vector>

#include "../runtime/mydev_runtime.h"

namespace mydev::caching_allocator {

// Size classes as on CUDA: small requests share 2 MiB segments, medium ones
// 20 MiB segments, big ones get their own segment rounded to 2 MiB.
constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallSegment = 2 << 20;
constexpr size_t kLargeSegment = 20 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kRoundLarge = 2 << 20;

inline size_t roundSize(size_t size) {
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

inline size_t segmentSizeFor(size_t size) {
  if (size <= kSmallSize) {
    return kSmallSegment;
  }
  if (size < kMinLargeAlloc) {
    return kLargeSegment;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

// A reservation of device addresses behind an expandable segment
// (caching_allocator_expandable_segments.cpp): device pages are mapped into
// it only under the blocks that need them.
struct ExpandableSegment {
  char* base = nullptr;
  size_t size = 0;
  std::vector<bool> mapped;  // per page of the driver's granularity
};

struct Block;

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const;
};

// Memory for one kind of small node, kept when a container gives it back
// and handed out again, instead of going to malloc and back. Every
// allocation and free of a small tensor splits a block off a segment and
// merges it back, and each time a free list's tree node came from malloc and
// went back to it, twice (with the Block, 3 of the 6 mallocs a one-element
// op made beyond the CPU's). Holds at most what its container held at once.
// Used under the device cache's lock, like the container.
class NodeRecycler {
 public:
  NodeRecycler() = default;
  NodeRecycler(const NodeRecycler&) = delete;
  NodeRecycler& operator=(const NodeRecycler&) = delete;
  ~NodeRecycler() {
    while (kept_ != nullptr) {
      Kept* next = kept_->next;
      ::operator delete(kept_);
      kept_ = next;
    }
  }

  void* take(size_t bytes) {
    if (bytes != node_bytes_ || kept_ == nullptr) {
      return ::operator new(bytes);
    }
    Kept* node = kept_;
    kept_ = node->next;
    return node;
  }

  void give(void* memory, size_t bytes) {
    if (node_bytes_ == 0 && bytes >= sizeof(Kept)) {
      node_bytes_ = bytes;  // the container's node size, fixed from then on
    }
    if (bytes != node_bytes_) {
      ::operator delete(memory);
      return;
    }
    kept_ = new (memory) Kept{kept_};
  }

 private:
  struct Kept {
    Kept* next;
  };
  Kept* kept_ = nullptr;
  size_t node_bytes_ = 0;
};

// A standard allocator over a NodeRecycler, for node-based containers
// (single nodes are recycled; anything else goes to operator new).
template <typename T>
struct RecyclingAllocator {
  using value_type = T;

  explicit RecyclingAllocator(NodeRecycler* recycler_) : recycler(recycler_) {}
  // Implicit: the container makes its node allocator from this one.
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>& other)
      : recycler(other.recycler) {}

  T* allocate(size_t n) {
    return static_cast<T*>(n == 1 ? recycler->take(sizeof(T))
                                  : ::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) {
      recycler->give(p, sizeof(T));
    } else {
      ::operator delete(p);
    }
  }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>& other) const {
    return recycler == other.recycler;
  }
  template <typename U>
  bool operator!=(const RecyclingAllocator<U>& other) const {
    return recycler != other.recycler;
  }

  NodeRecycler* recycler;
};

struct BlockPool {
  BlockPool(bool small, c10::MempoolId_t owner_id)
      : blocks(BlockComparator(), RecyclingAllocator<Block*>(&nodes)),
        is_small(small),
        owner(owner_id) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  NodeRecycler nodes;  // before `blocks`, which gives its nodes back to it
  std::set<Block*, BlockComparator, RecyclingAllocator<Block*>> blocks;
  const bool is_small;  // requests up to kSmallSize, 2 MiB segments
  // The private pool's id (a graph's pool()); {0, 0} for the device's own.
  const c10::MempoolId_t owner;
};

struct Block {
  c10::DeviceIndex device;
  mydevStream_t stream;  // the stream it was allocated on
  size_t size;
  size_t requested_size = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  // Streams other than `stream` that used the block (record_stream).
  std::vector<c10::Stream> stream_uses;
  int pending_events = 0;
  // The reservation the block lies in, for blocks of expandable segments.
  ExpandableSegment* expandable = nullptr;
  // Links in its device's ActiveBlocks while allocated or free-pending.
  Block* active_prev = nullptr;
  Block* active_next = nullptr;

  Block(c10::DeviceIndex device_, mydevStream_t stream_, size_t size_,
        BlockPool* pool_, void* ptr_)
      : device(device_), stream(stream_), size(size_), ptr(ptr_), pool(pool_) {}

  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

// A device's allocated blocks and freed ones still waiting for other
// streams, linked through the blocks: every allocation and free enters or
// leaves it, and a hash set allocated and freed a node each time.
class ActiveBlocks {
 public:
  void insert(Block* block) {
    block->active_prev = nullptr;
    block->active_next = first_;
    if (first_ != nullptr) first_->active_prev = block;
    first_ = block;
  }
  void erase(Block* block) {
    if (block->active_prev != nullptr) {
      block->active_prev->active_next = block->active_next;
    } else {
      first_ = block->active_next;
    }
    if (block->active_next != nullptr) {
      block->active_next->active_prev = block->active_prev;
    }
    block->active_prev = block->active_next = nullptr;
  }
  template <typename Visit>
  void forEach(Visit visit) const {
    for (Block* block = first_; block != nullptr; block = block->active_next) {
      visit(block);
    }
  }
  // True if `test` holds for some block (stops at the first).
  template <typename Test>
  bool any(Test test) const {
    for (Block* block = first_; block != nullptr; block = block->active_next) {
      if (test(block)) return true;
    }
    return false;
  }

 private:
  Block* first_ = nullptr;
};

inline size_t address(const Block* block) {
  return reinterpret_cast<size_t>(block->ptr);
}

inline bool BlockComparator::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) {
    return reinterpret_cast<uintptr_t>(a->stream) <
           reinterpret_cast<uintptr_t>(b->stream);
  }
  if (a->size != b->size) {
    return a->size < b->size;
  }
  return reinterpret_cast<uintptr_t>(a->ptr) <
         reinterpret_cast<uintptr_t>(b->ptr);
}

}  // namespace mydev::caching_allocator
