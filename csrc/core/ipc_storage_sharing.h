// Sharing mydev storages between processes (torch.multiprocessing), over the
// driver's IPC handles, with the guarantees CUDA IPC gives torch:
//
//  * Lifetime. Each shared storage has a pair of counters in host shared
//    memory that producer and consumers both map (the Python side creates
//    them as shared CPU tensors and sends them along):
//      references  consumer storages not yet released; a share adds one, a
//                  consumer's storage removes it when it is freed
//      ready       the last share whose producer-side work has completed
//    When the producer frees its storage while references > 0, its
//    allocation waits in a limbo until they reach 0 (collected at the next
//    share, by torch.mydev.ipc_collect() and torch.mydev.empty_cache()), as
//    CUDA's CudaIPCSentData limbo does.
//  * Ordering. A share enqueues a marker on the producer's current stream of
//    the storage's device; the consumer does not return the storage before
//    the marker ran, so it sees every write queued before the share on that
//    stream (CUDA records an IPC event there and the consumer waits for it).
//    A consumer releases its storage after the work already queued on its
//    current stream, so the producer never reuses memory a consumer kernel
//    may still touch.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace mydev {

// Where a shared storage lives, as a consumer opens it.
struct SharedStorage {
  int device;
  std::string allocation_handle;  // mydevIpcMemHandle_t of its allocation
  uint64_t offset_bytes;          // of the storage in that allocation
  uint64_t size_bytes;
  uintptr_t counters;  // the storage's counter pair (host shared memory)
  bool took_counters;  // the pair offered to shareStorage is now taken
  int64_t sequence;    // the consumer waits for ready >= sequence
};

// Producer: shares the storage of `tensor` (a mydev tensor with data). A
// storage shared for the first time takes the counter pair at
// `unused_counters` (two zeroed int64 in shared memory, living as long as
// the process); a storage shared before keeps its own pair.
SharedStorage shareStorage(const at::Tensor& tensor, uintptr_t unused_counters);

// Consumer: waits until the producer's work before the share completed (or
// the producer `producer_pid` exited, which raises), opens the allocation and
// returns a uint8 tensor over the storage's bytes. Its storage cannot be
// resized; freeing it closes the handle and releases the reference.
at::Tensor openSharedStorage(const SharedStorage& shared, int64_t producer_pid);

// Consumer: a share of a storage this process already holds (torch reuses
// the open storage): waits as openSharedStorage does, then releases the
// reference the share added.
void releaseDuplicateShare(uintptr_t counters, int64_t sequence,
                           int64_t producer_pid);

// Consumer, at exit: releases the references of the received storages still
// alive (module globals, a Process object's arguments) whose device has no
// work queued on the current stream, so that the producer gets its memory
// back; their memory must not be used any more.
void releaseReceivedAtExit();

// Producer: frees the allocations no consumer holds any more; returns how
// many are still held.
size_t collectReleasedStorages();

}  // namespace mydev
