#include "memory_history.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

namespace mydev::memory_history {

std::atomic<bool> g_recording{false};

namespace {

using Action = TraceEntry::Action;

// A ring of at most `max_entries` entries: `next` is the oldest once full.
struct DeviceTrace {
  std::vector<TraceEntry> entries;
  size_t next = 0;
};

struct State {
  std::mutex mutex;
  Settings settings;
  std::map<c10::DeviceIndex, DeviceTrace> traces;
  // Stacks of live allocations by address ("state" context and up).
  std::unordered_map<size_t, std::shared_ptr<c10::GatheredContext>> live;
};

State& state() {
  // Leaked: blocks freed during interpreter shutdown still report here.
  static auto* instance = new State;
  return *instance;
}

// The allocator call in progress on this thread (CallContext).
thread_local std::shared_ptr<c10::GatheredContext> t_context;
thread_local Action t_call = Action::ALLOC;

bool allocSide(Action action) {
  return action == Action::ALLOC || action == Action::SEGMENT_ALLOC ||
         action == Action::OOM;
}

// Which entries keep the call's stack, as cuda's allocator decides it.
bool entryKeepsStack(Action action, RecordContext level) {
  if (allocSide(action)) {
    return t_call == Action::ALLOC && level >= RecordContext::ALLOC;
  }
  return level >= RecordContext::ALL;
}

std::vector<TraceEntry> inOrder(const DeviceTrace& ring) {
  std::vector<TraceEntry> ordered(ring.entries.begin() + ring.next,
                                  ring.entries.end());
  ordered.insert(ordered.end(), ring.entries.begin(),
                 ring.entries.begin() + ring.next);
  return ordered;
}

}  // namespace

void configure(const Settings& settings) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (settings.clear_history) s.traces.clear();
  if (settings.enabled) {
    // A new limit keeps the newest entries that fit.
    for (auto& [device, ring] : s.traces) {
      std::vector<TraceEntry> ordered = inOrder(ring);
      const size_t keep = std::min(ordered.size(), settings.max_entries);
      ring.entries.assign(std::make_move_iterator(ordered.end() - keep),
                          std::make_move_iterator(ordered.end()));
      ring.next = 0;
    }
  }
  s.settings = settings;
  if (!settings.enabled) {
    // The history stays readable; stacks of live blocks go, since their
    // frees are no longer followed.
    s.live.clear();
  }
  g_recording.store(settings.enabled, std::memory_order_relaxed);
}

void CallContext::begin(Action action) {
  RecordContext level;
  bool cpp_stacks;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    level = s.settings.context;
    cpp_stacks = s.settings.cpp_stacks;
  }
  const RecordContext needed =
      action == Action::ALLOC ? RecordContext::STATE : RecordContext::ALL;
  if (level < needed) return;
  previous_ = std::move(t_context);
  t_context = torch::CapturedTraceback::gather(/*python=*/true,
                                               /*script=*/true, cpp_stacks);
  t_call = action;
  active_ = true;
}

void CallContext::end() {
  t_context = std::move(previous_);
  t_call = Action::ALLOC;
}

void recordAction(Action action, c10::DeviceIndex device, size_t addr,
                  size_t size, void* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.settings.enabled) return;  // disabled since the caller looked
  const RecordContext level = s.settings.context;
  if (action == Action::ALLOC && t_context != nullptr &&
      t_call == Action::ALLOC) {
    s.live[addr] = t_context;
  } else if (action == Action::FREE_COMPLETED) {
    s.live.erase(addr);
  }
  if (!s.settings.keep_trace || s.settings.skip_actions.count(action) != 0 ||
      s.settings.max_entries == 0) {
    return;
  }
  TraceEntry entry(action, device, addr, size, stream, {0, 0},
                   /*time=*/0,
                   entryKeepsStack(action, level) ? t_context : nullptr);
  entry.time_.t_ = c10::getTime() / 1000;
  DeviceTrace& trace = s.traces[device];
  if (trace.entries.size() < s.settings.max_entries) {
    trace.entries.push_back(std::move(entry));
  } else {
    trace.entries[trace.next] = std::move(entry);
    trace.next = (trace.next + 1) % trace.entries.size();
  }
}

std::shared_ptr<c10::GatheredContext> allocationContext(size_t addr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.live.find(addr);
  return it == s.live.end() ? nullptr : it->second;
}

std::vector<TraceEntry> trace(c10::DeviceIndex device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.traces.find(device);
  if (it == s.traces.end()) return {};
  return inOrder(it->second);
}

}  // namespace mydev::memory_history
