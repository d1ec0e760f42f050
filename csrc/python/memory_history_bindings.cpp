// torch.mydev.memory's history and snapshot functions: settings checked and
// turned into the recorder's (core/memory_history.h), and snapshots built in
// the dict layout of torch.cuda.memory._snapshot(), so that PyTorch's
// visualizer (torch.cuda._memory_viz, pytorch.org/memory_viz) reads them.
#include "memory_history_bindings.h"

#include <c10/util/irange.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <optional>
#include <string>
#include <vector>

#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "../core/memory_history.h"
#include "../core/mydev_stream.h"

namespace py = pybind11;

namespace mydev {
namespace {

using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::SegmentInfo;
using c10::CachingDeviceAllocator::TraceEntry;

const char* actionName(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::ALLOC: return "alloc";
    case TraceEntry::FREE_REQUESTED: return "free_requested";
    case TraceEntry::FREE_COMPLETED: return "free_completed";
    case TraceEntry::SEGMENT_ALLOC: return "segment_alloc";
    case TraceEntry::SEGMENT_FREE: return "segment_free";
    case TraceEntry::SEGMENT_MAP: return "segment_map";
    case TraceEntry::SEGMENT_UNMAP: return "segment_unmap";
    case TraceEntry::SNAPSHOT: return "snapshot";
    case TraceEntry::OOM: return "oom";
  }
  return "unknown";
}

TraceEntry::Action parseAction(const std::string& name) {
  std::string known;
  for (int value = TraceEntry::ALLOC; value <= TraceEntry::OOM; ++value) {
    const auto action = static_cast<TraceEntry::Action>(value);
    if (name == actionName(action)) return action;
    known += std::string(known.empty() ? "" : ", ") + actionName(action);
  }
  TORCH_CHECK_VALUE(false, "_record_memory_history: unknown action '", name,
                    "' in skip_actions (known: ", known, ")");
}

void recordMemoryHistory(const std::optional<std::string>& enabled,
                         const std::optional<std::string>& context,
                         const std::string& stacks, int64_t max_entries,
                         std::optional<int64_t> device, bool clear_history,
                         const std::vector<std::string>& skip_actions) {
  // Recording covers every device, as on cuda; a device given must exist.
  if (device) checkDeviceIndex(static_cast<c10::DeviceIndex>(*device));
  memory_history::Settings settings;
  TORCH_CHECK_VALUE(!enabled || *enabled == "state" || *enabled == "all",
                    "_record_memory_history: enabled must be None, 'state' "
                    "or 'all', got '",
                    enabled.value_or(""), "'");
  TORCH_CHECK_VALUE(!context || *context == "state" || *context == "alloc" ||
                        *context == "all",
                    "_record_memory_history: context must be None, 'state', "
                    "'alloc' or 'all', got '",
                    context.value_or(""), "'");
  TORCH_CHECK_VALUE(stacks == "python" || stacks == "all",
                    "_record_memory_history: stacks must be 'python' or "
                    "'all', got '",
                    stacks, "'");
  TORCH_CHECK_VALUE(max_entries >= 0,
                    "_record_memory_history: max_entries must be >= 0, got ",
                    max_entries);
  for (const std::string& name : skip_actions) {
    settings.skip_actions.insert(parseAction(name));
  }
  settings.enabled = enabled.has_value();
  settings.keep_trace = enabled == "all";
  settings.context = !context              ? RecordContext::NEVER
                     : *context == "state" ? RecordContext::STATE
                     : *context == "alloc" ? RecordContext::ALLOC
                                           : RecordContext::ALL;
  settings.cpp_stacks = stacks == "all";
  settings.max_entries = static_cast<size_t>(max_entries);
  settings.clear_history = clear_history;
  memory_history::configure(settings);
}

// Stacks are symbolized in one batch (frames repeat across entries); each
// dict that has a stack gets its "frames" once the batch is done.
class FrameBatch {
 public:
  void add(const std::shared_ptr<c10::GatheredContext>& context,
           py::dict target) {
    if (context == nullptr) {
      target["frames"] = py::list();
      return;
    }
    tracebacks_.push_back(torch::getCapturedTracebackFromContext(context));
    targets_.push_back(std::move(target));
  }

  // Frames as cuda's snapshots give them: {"filename", "line", "name"}.
  void symbolize() {
    const torch::SymbolizedTracebacks symbolized =
        torch::symbolize(tracebacks_);
    std::vector<py::dict> frames;
    frames.reserve(symbolized.all_frames.size());
    for (const auto& frame : symbolized.all_frames) {
      py::dict entry;
      entry["filename"] = frame.filename;
      entry["line"] = frame.lineno;
      entry["name"] = frame.funcname;
      frames.push_back(std::move(entry));
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
      py::list stack;
      for (const uint64_t index : symbolized.tracebacks[i]) {
        stack.append(frames[index]);
      }
      targets_[i]["frames"] = stack;
    }
  }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::dict> targets_;
};

int64_t streamId(c10::DeviceIndex device, void* handle) {
  return streamIdOfHandle(device, static_cast<mydevStream_t>(handle));
}

py::dict segmentDict(const SegmentInfo& segment, FrameBatch& frames) {
  py::dict result;
  result["device"] = segment.device;
  result["address"] = segment.address;
  result["total_size"] = segment.total_size;
  result["allocated_size"] = segment.allocated_size;
  result["active_size"] = segment.active_size;
  result["requested_size"] = segment.requested_size;
  result["stream"] = streamId(segment.device, segment.stream);
  result["segment_type"] = segment.is_large ? "large" : "small";
  result["segment_pool_id"] =
      py::make_tuple(segment.owner_private_pool_id.first,
                     segment.owner_private_pool_id.second);
  result["is_expandable"] = segment.is_expandable;
  frames.add(nullptr, result);
  py::list blocks;
  size_t address = segment.address;
  for (const auto& block : segment.blocks) {
    py::dict entry;
    entry["address"] = address;
    entry["size"] = block.size;
    entry["requested_size"] = block.requested_size;
    entry["state"] = block.allocated ? "active_allocated"
                     : block.active  ? "active_pending_free"
                                     : "inactive";
    frames.add(block.context_when_allocated, entry);
    blocks.append(entry);
    address += block.size;
  }
  result["blocks"] = blocks;
  return result;
}

py::dict traceEntryDict(const TraceEntry& entry, FrameBatch& frames) {
  py::dict result;
  result["action"] = actionName(entry.action_);
  if (entry.action_ == TraceEntry::OOM) {
    result["device_free"] = entry.addr_;
  } else {
    result["addr"] = entry.addr_;
  }
  result["size"] = entry.size_;
  result["stream"] = streamId(entry.device_, entry.stream_);
  result["time_us"] = entry.time_.t_;
  frames.add(entry.context_, result);
  return result;
}

// All devices, or only `device`'s segments and trace (the other devices'
// traces are then empty lists, so that device_traces stays indexed by
// device as the visualizer expects).
py::dict memorySnapshotDict(std::optional<int64_t> device) {
  if (device) checkDeviceIndex(static_cast<c10::DeviceIndex>(*device));
  FrameBatch frames;
  py::list segments;
  for (const SegmentInfo& segment : memorySnapshot()) {
    if (!device || segment.device == *device) {
      segments.append(segmentDict(segment, frames));
    }
  }
  py::list device_traces;
  for (const c10::DeviceIndex index : c10::irange(deviceCount())) {
    py::list entries;
    if (!device || index == *device) {
      for (const TraceEntry& entry : memory_history::trace(index)) {
        entries.append(traceEntryDict(entry, frames));
      }
    }
    device_traces.append(entries);
  }
  frames.symbolize();
  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = device_traces;
  return result;
}

}  // namespace

void bindMemoryHistory(py::module& module) {
  module.def("_record_memory_history", &recordMemoryHistory, py::arg("enabled"),
             py::arg("context"), py::arg("stacks"), py::arg("max_entries"),
             py::arg("device"), py::arg("clear_history"),
             py::arg("skip_actions"));
  module.def("_memory_snapshot", &memorySnapshotDict, py::arg("device"));
}

}  // namespace mydev
