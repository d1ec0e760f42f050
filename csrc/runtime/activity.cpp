// Activity recording: the mydevActivity* entry points and the hooks of
// activity.h. Completed records wait in one process-wide buffer until a
// profiler flushes them; that costs a mutex per record, which only profiled
// runs pay.
#include "activity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "address_space.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"
#include "pointer_attributes.h"
#include "stream.h"

namespace mydev_sim {

std::atomic<bool> g_activity_enabled{false};

namespace {

// The call enqueueing work on this thread (ActivityApiScope).
thread_local const char* t_api = nullptr;
thread_local int64_t t_api_start = 0;
std::atomic<uint64_t> g_next_correlation_id{1};
// Bumped by every enable: stacks pushed under an older one are stale (their
// pops may never come, e.g. an operation in flight when recording stopped).
std::atomic<uint64_t> g_generation{1};

struct ExternalIds {
  uint64_t generation = 0;
  std::vector<uint64_t> stacks[2];  // by mydevActivityExternalIdKind

  void forget_if_stale() {
    const uint64_t current = g_generation.load(std::memory_order_relaxed);
    if (generation == current) return;
    generation = current;
    for (auto& stack : stacks) stack.clear();
  }
  uint64_t top(mydevActivityExternalIdKind kind) const {
    const auto& stack = stacks[kind];
    return stack.empty() ? 0 : stack.back();
  }
};
thread_local ExternalIds t_external_ids;

struct CompletedRecords {
  std::mutex mutex;
  std::vector<mydevActivityRecord> records;
  size_t flushed = 0;  // records before this index were handed out
};

CompletedRecords& completed_records() {
  // Leaked: executors may still finish records while the process exits.
  static auto* records = new CompletedRecords;
  return *records;
}

uint64_t host_thread_id() {
  thread_local const uint64_t id = static_cast<uint64_t>(syscall(SYS_gettid));
  return id;
}

// Copies queued on a stream carry the copy engine's (kernel-side) addresses
// of device memory; the host-side ones are device addresses.
bool is_device_memory(const void* ptr) {
  const AddressSpace* space = address_space();
  if (space != nullptr && is_kernel_address(*space, ptr)) return true;
  return describe_pointer(ptr).type == mydevMemoryTypeDevice;
}

mydevMemcpyKind copy_direction(const void* dst, const void* src) {
  const bool to_device = is_device_memory(dst);
  const bool from_device = is_device_memory(src);
  if (to_device) {
    return from_device ? mydevMemcpyDeviceToDevice : mydevMemcpyHostToDevice;
  }
  return from_device ? mydevMemcpyDeviceToHost : mydevMemcpyHostToHost;
}

mydevError_t check_id_kind(const char* api, mydevActivityExternalIdKind kind) {
  if (kind != mydevActivityExternalIdOperation &&
      kind != mydevActivityExternalIdUser) {
    return fail(mydevErrorInvalidValue, "%s: invalid external id kind %d", api,
                int(kind));
  }
  return mydevSuccess;
}

}  // namespace

int64_t activity_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ActivityApiScope::ActivityApiScope(const char* api)
    : previous_api_(nullptr), previous_start_(-1) {
  if (!activity_enabled()) return;
  previous_api_ = t_api;
  previous_start_ = t_api_start;
  t_api = api;
  t_api_start = activity_now();
}

ActivityApiScope::~ActivityApiScope() {
  // Scopes opened while recording was off changed nothing.
  if (previous_start_ < 0) return;
  t_api = previous_api_;
  t_api_start = previous_start_;
}

PendingActivity* activity_begin(const Task& task, Stream* stream) {
  mydevActivityKind kind;
  switch (task.kind) {
    case TaskKind::Kernel: kind = mydevActivityKindKernel; break;
    case TaskKind::Copy: kind = mydevActivityKindMemcpy; break;
    case TaskKind::Fill: kind = mydevActivityKindMemset; break;
    default: return nullptr;  // event markers and waits are not work
  }
  const int64_t now = activity_now();
  auto* pending = new PendingActivity{};
  mydevActivityRecord& record = pending->record;
  record.kind = kind;
  record.copyKind = kind == mydevActivityKindMemcpy
                        ? copy_direction(task.dst, task.src)
                        : mydevMemcpyDefault;
  record.device = stream->device()->index();
  record.stream = stream->handle();
  record.api = t_api != nullptr ? t_api : "(driver)";
  record.name = kind == mydevActivityKindKernel ? task.name : record.api;
  record.correlationId =
      g_next_correlation_id.fetch_add(1, std::memory_order_relaxed);
  t_external_ids.forget_if_stale();
  record.externalId = t_external_ids.top(mydevActivityExternalIdOperation);
  record.userExternalId = t_external_ids.top(mydevActivityExternalIdUser);
  record.hostThread = host_thread_id();
  record.apiStart = t_api != nullptr ? t_api_start : now;
  record.apiEnd = now;
  record.bytes = kind == mydevActivityKindKernel ? 0 : task.count;
  return pending;
}

void activity_finish(PendingActivity* pending, int64_t start, int64_t end) {
  pending->record.start = start;
  pending->record.end = end;
  CompletedRecords& completed = completed_records();
  {
    std::lock_guard<std::mutex> lock(completed.mutex);
    completed.records.push_back(pending->record);
  }
  delete pending;
}

ActivityHostCopy::ActivityHostCopy(Stream* stream, void* dst, const void* src,
                                   size_t count) {
  if (!activity_enabled()) return;
  pending_ = activity_begin(Task::copy(dst, src, count), stream);
  start_ = activity_now();
}

ActivityHostCopy::~ActivityHostCopy() {
  if (pending_ != nullptr) activity_finish(pending_, start_, activity_now());
}

}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevActivityEnable(int enable) {
  if (mydevError_t status = enter()) return status;
  if (enable != 0) g_generation.fetch_add(1, std::memory_order_relaxed);
  g_activity_enabled.store(enable != 0, std::memory_order_relaxed);
  return mydevSuccess;
}

mydevError_t mydevActivityGetTimestamp(int64_t* nanoseconds) {
  if (mydevError_t status = enter()) return status;
  if (nanoseconds == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevActivityGetTimestamp: nanoseconds is null");
  }
  *nanoseconds = activity_now();
  return mydevSuccess;
}

mydevError_t mydevActivityPushExternalId(mydevActivityExternalIdKind kind,
                                         uint64_t id) {
  if (mydevError_t status = enter()) return status;
  if (mydevError_t status =
          check_id_kind("mydevActivityPushExternalId", kind)) {
    return status;
  }
  t_external_ids.forget_if_stale();
  t_external_ids.stacks[kind].push_back(id);
  return mydevSuccess;
}

mydevError_t mydevActivityPopExternalId(mydevActivityExternalIdKind kind,
                                        uint64_t* id) {
  if (mydevError_t status = enter()) return status;
  if (mydevError_t status = check_id_kind("mydevActivityPopExternalId", kind)) {
    return status;
  }
  t_external_ids.forget_if_stale();
  auto& stack = t_external_ids.stacks[kind];
  if (stack.empty()) {
    return fail(mydevErrorInvalidValue,
                "mydevActivityPopExternalId: this thread has no external id "
                "of kind %d pushed",
                int(kind));
  }
  if (id != nullptr) *id = stack.back();
  stack.pop_back();
  return mydevSuccess;
}

mydevError_t mydevActivityFlush(mydevActivityRecord* records, size_t capacity,
                                size_t* count) {
  if (mydevError_t status = enter()) return status;
  if (count == nullptr || (records == nullptr && capacity > 0)) {
    return fail(mydevErrorInvalidValue, "mydevActivityFlush: null argument");
  }
  CompletedRecords& completed = completed_records();
  std::lock_guard<std::mutex> lock(completed.mutex);
  const size_t available = completed.records.size() - completed.flushed;
  const size_t n = std::min(capacity, available);
  std::copy_n(completed.records.begin() + completed.flushed, n, records);
  completed.flushed += n;
  if (completed.flushed == completed.records.size()) {
    completed.records.clear();
    completed.flushed = 0;
  }
  *count = n;
  return mydevSuccess;
}

}  // extern "C"
