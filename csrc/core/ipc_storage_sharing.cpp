#include "ipc_storage_sharing.h"

#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "device.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

// Lives in host memory shared by the producer and its consumers.
struct Counters {
  int64_t references;
  int64_t ready;
};

Counters* countersAt(uintptr_t address) {
  return reinterpret_cast<Counters*>(address);
}

int64_t load(const int64_t* value) {
  return __atomic_load_n(value, __ATOMIC_ACQUIRE);
}

// ---------------------------------------------------------------- producer --

struct SentStorage {
  c10::DataPtr original;  // the producer's allocation
  Counters* counters;
  std::atomic<int64_t> shares{0};
};

std::mutex limbo_mutex;
// Storages the producer freed while consumers still held them.
std::vector<std::unique_ptr<SentStorage>> limbo;

// The deleter of a shared storage's DataPtr in the producer.
void freeSentStorage(void* context) {
  std::unique_ptr<SentStorage> sent(static_cast<SentStorage*>(context));
  if (load(&sent->counters->references) == 0) {
    return;  // nobody else holds it: `original` goes back to the allocator
  }
  const std::lock_guard<std::mutex> lock(limbo_mutex);
  limbo.push_back(std::move(sent));
}

struct ReadyMarker {
  Counters* counters;
  int64_t sequence;
};

// Stream markers of different streams may complete out of order: `ready`
// only grows.
void markShareReady(void* user_data) {
  const std::unique_ptr<ReadyMarker> marker(
      static_cast<ReadyMarker*>(user_data));
  int64_t seen = load(&marker->counters->ready);
  while (seen < marker->sequence &&
         !__atomic_compare_exchange_n(&marker->counters->ready, &seen,
                                      marker->sequence, /*weak=*/true,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}

SentStorage* sentStorageOf(c10::StorageImpl* impl, uintptr_t unused_counters,
                           bool* took_counters) {
  const c10::DataPtr& current = impl->data_ptr();
  *took_counters = current.get_deleter() != &freeSentStorage;
  if (!*took_counters) {
    return static_cast<SentStorage*>(current.get_context());
  }
  auto sent = std::make_unique<SentStorage>();
  sent->counters = countersAt(unused_counters);
  void* data = impl->mutable_data();
  c10::DataPtr wrapped(data, sent.get(), &freeSentStorage, impl->device());
  sent->original = impl->set_data_ptr(std::move(wrapped));
  return sent.release();  // owned by the storage's DataPtr now
}

// ---------------------------------------------------------------- consumer --

bool processExited(int64_t pid) {
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

void waitUntilReady(Counters* counters, int64_t sequence,
                    int64_t producer_pid) {
  using std::chrono::microseconds;
  for (int round = 0; load(&counters->ready) < sequence; ++round) {
    if (round % 2000 == 1999 && processExited(producer_pid)) {
      TORCH_CHECK(load(&counters->ready) >= sequence, kDeviceName,
                  ": the process ", producer_pid,
                  " that shared this tensor exited before its device work on "
                  "the tensor completed");
    }
    std::this_thread::sleep_for(microseconds(round < 100 ? 1 : 50));
  }
}

struct ReceivedStorage {
  void* allocation;  // from mydevIpcOpenMemHandle
  Counters* counters;
  c10::DeviceIndex device;
  bool released = false;  // by releaseReceivedAtExit
};

std::mutex received_mutex;
// Every received storage not released yet, so that exit releases them.
std::unordered_set<ReceivedStorage*> received;

void finishRelease(void* user_data) {
  const std::unique_ptr<ReceivedStorage> storage(
      static_cast<ReceivedStorage*>(user_data));
  {
    const std::lock_guard<std::mutex> lock(received_mutex);
    received.erase(storage.get());
    if (storage->released) return;
  }
  (void)mydevIpcCloseMemHandle(storage->allocation);
  __atomic_fetch_sub(&storage->counters->references, 1, __ATOMIC_ACQ_REL);
}

// The deleter of a consumer's storage: kernels queued on the current stream
// may still read it, so the reference goes back after them, as a freed block
// of the caching allocator is reused only in stream order.
void releaseReceivedStorage(void* context) {
  if (mydevLaunchBlocking()) {  // every launch already completed
    finishRelease(context);
    return;
  }
  try {
    const MydevStream stream =
        getCurrentStream(static_cast<ReceivedStorage*>(context)->device);
    if (mydevLaunchKernel(stream.raw(), "mydev_ipc_release", &finishRelease,
                          context) == mydevSuccess) {
      return;
    }
  } catch (const std::exception&) {
    // No stream (driver shut down, forked child): nothing can still run.
  }
  finishRelease(context);
}

}  // namespace

SharedStorage shareStorage(const at::Tensor& tensor,
                           uintptr_t unused_counters) {
  TORCH_CHECK(tensor.device().is_privateuseone(), "shareStorage: not a ",
              kDeviceName, " tensor");
  c10::StorageImpl* impl = tensor.storage().unsafeGetStorageImpl();
  TORCH_CHECK(impl->data() != nullptr, "shareStorage: the storage has no data");
  // Its allocation belongs to another process: that one's handle is all a
  // third process could open, and the lifetime count is that process's.
  TORCH_CHECK(impl->data_ptr().get_deleter() != &releaseReceivedStorage,
              kDeviceName,
              ": a tensor received from another process cannot be sent on to "
              "a third one; send a clone() of it");
  collectReleasedStorages();

  SharedStorage shared{};
  SentStorage* sent =
      sentStorageOf(impl, unused_counters, &shared.took_counters);
  void* data = impl->mutable_data();
  mydevPointerAttributes attributes{};
  MYDEV_CHECK(mydevPointerGetAttributes(&attributes, data));
  mydevIpcMemHandle_t handle{};
  MYDEV_CHECK(mydevIpcGetMemHandle(&handle, data));

  shared.device = impl->device().index();
  shared.allocation_handle.assign(handle.reserved, sizeof(handle.reserved));
  shared.offset_bytes = static_cast<uint64_t>(
      static_cast<char*>(data) - static_cast<char*>(attributes.basePointer));
  shared.size_bytes = impl->nbytes();
  shared.counters = reinterpret_cast<uintptr_t>(sent->counters);
  shared.sequence = sent->shares.fetch_add(1) + 1;
  __atomic_fetch_add(&sent->counters->references, 1, __ATOMIC_ACQ_REL);

  auto marker = std::make_unique<ReadyMarker>(
      ReadyMarker{sent->counters, shared.sequence});
  const MydevStream stream = getCurrentStream(impl->device().index());
  const mydevError_t status = mydevLaunchKernel(
      stream.raw(), "mydev_ipc_share_ready", &markShareReady, marker.get());
  if (status != mydevSuccess) {
    __atomic_fetch_sub(&sent->counters->references, 1, __ATOMIC_ACQ_REL);
    MYDEV_CHECK(status);
  }
  marker.release();  // the marker kernel owns it
  return shared;
}

at::Tensor openSharedStorage(const SharedStorage& shared,
                             int64_t producer_pid) {
  TORCH_CHECK(shared.allocation_handle.size() == MYDEV_IPC_HANDLE_SIZE,
              "openSharedStorage: not a ", kDeviceName, " IPC handle");
  TORCH_CHECK(shared.device >= 0 && shared.device < kMaxDevices,
              "openSharedStorage: invalid device ", shared.device);
  checkDeviceIndex(static_cast<c10::DeviceIndex>(shared.device));
  Counters* counters = countersAt(shared.counters);
  waitUntilReady(counters, shared.sequence, producer_pid);

  mydevIpcMemHandle_t handle{};
  std::memcpy(handle.reserved, shared.allocation_handle.data(),
              MYDEV_IPC_HANDLE_SIZE);
  void* allocation = nullptr;
  MYDEV_CHECK(mydevIpcOpenMemHandle(&allocation, handle));
  const c10::Device device(c10::DeviceType::PrivateUse1,
                           static_cast<c10::DeviceIndex>(shared.device));
  auto* context = new ReceivedStorage{allocation, counters, device.index()};
  {
    const std::lock_guard<std::mutex> lock(received_mutex);
    received.insert(context);
  }
  c10::DataPtr data(static_cast<char*>(allocation) + shared.offset_bytes,
                    context, &releaseReceivedStorage, device);
  // Not resizable: a resize would reallocate, silently ending the sharing.
  c10::Storage storage(c10::Storage::use_byte_size_t(), shared.size_bytes,
                       std::move(data), /*allocator=*/nullptr,
                       /*resizable=*/false);
  at::Tensor bytes =
      at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
  bytes.set_(storage, 0, {static_cast<int64_t>(shared.size_bytes)}, {1});
  return bytes;
}

void releaseDuplicateShare(uintptr_t counters, int64_t sequence,
                           int64_t producer_pid) {
  Counters* pair = countersAt(counters);
  waitUntilReady(pair, sequence, producer_pid);
  __atomic_fetch_sub(&pair->references, 1, __ATOMIC_ACQ_REL);
}

void releaseReceivedAtExit() {
  const std::lock_guard<std::mutex> lock(received_mutex);
  for (ReceivedStorage* storage : received) {
    // Exit does not wait for queued work, and queued kernels may still use
    // the memory: with work pending on the current stream (where a freed
    // storage would be released), the producer keeps the memory until it
    // exits itself, which is safe.
    bool idle = false;
    try {
      idle = mydevStreamQuery(getCurrentStream(storage->device).raw()) ==
             mydevSuccess;
    } catch (const std::exception&) {
    }
    if (idle && !storage->released) {
      storage->released = true;
      __atomic_fetch_sub(&storage->counters->references, 1, __ATOMIC_ACQ_REL);
    }
  }
}

size_t collectReleasedStorages() {
  std::vector<std::unique_ptr<SentStorage>> released;
  size_t held = 0;
  {
    const std::lock_guard<std::mutex> lock(limbo_mutex);
    std::vector<std::unique_ptr<SentStorage>> kept;
    for (auto& sent : limbo) {
      auto& destination =
          load(&sent->counters->references) == 0 ? released : kept;
      destination.push_back(std::move(sent));
    }
    limbo.swap(kept);
    held = limbo.size();
  }
  return held;  // `released` frees its allocations outside the lock
}

}  // namespace mydev
