// Graphs: the capture entry points, graph and executable-graph handles, and
// the replay, which is one kernel running the recorded work in submission
// order (capture.h says why that order is enough).
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "activity.h"
#include "capture.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"
#include "parallel_copy.h"
#include "stream.h"

namespace mydev_sim {
namespace {

constexpr uint32_t kGraphMagic = 0x6d796467;
constexpr uint32_t kExecMagic = 0x6d796478;
constexpr uint32_t kDeadMagic = 0xdead6a0f;

// Both handles are a magic word and the shared recorded work.
struct GraphHandle {
  uint32_t magic;
  std::shared_ptr<GraphNodes> nodes;
};

template <typename Handle>
mydevError_t resolve(Handle handle, uint32_t magic, const char* what,
                     GraphHandle** out) {
  auto* graph = reinterpret_cast<GraphHandle*>(handle);
  if (graph == nullptr || graph->magic != magic) {
    return fail(mydevErrorInvalidHandle, "%p is not a valid mydev %s",
                static_cast<void*>(handle), what);
  }
  *out = graph;
  return mydevSuccess;
}

void destroy(GraphHandle* graph) {
  graph->magic = kDeadMagic;
  delete graph;
}

// The replay kernel. Its data is a heap copy of the executable graph's
// shared_ptr, so a replay in flight keeps the work alive.
void run_graph(void* data) {
  const GraphNodes& nodes = **static_cast<std::shared_ptr<GraphNodes>*>(data);
  for (size_t i = 0; i < nodes.tasks.size(); ++i) {
    const Task& task = nodes.tasks[i];
    switch (task.kind) {
      case TaskKind::Kernel: try { task.fn(task.dst);
        } catch (const std::exception& error) {
          throw std::runtime_error(format("graph node %zu, kernel '%s': %s", i,
                                          task.name, error.what()));
        }
        break;
      case TaskKind::Copy: copy_bytes(task.dst, task.src, task.count); break;
      case TaskKind::Fill:
        fill_bytes(task.dst, task.fill_value, task.count);
        break;
      case TaskKind::EventMarker:
      case TaskKind::WaitEvent: break;  // never recorded (capture.h)
    }
  }
}

void release_graph_run(void* data) {
  delete static_cast<std::shared_ptr<GraphNodes>*>(data);
}

const char* kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::Kernel: return "kernel";
    case TaskKind::Copy: return "copy";
    case TaskKind::Fill: return "fill";
    case TaskKind::EventMarker: return "event";
    case TaskKind::WaitEvent: return "wait";
  }
  return "?";
}

}  // namespace
}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevStreamBeginCapture(mydevStream_t handle,
                                     mydevStreamCaptureMode mode) {
  if (mydevError_t status = enter()) return status;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  return begin_capture(stream, mode);
}

mydevError_t mydevStreamEndCapture(mydevStream_t handle, mydevGraph_t* graph) {
  if (mydevError_t status = enter()) return status;
  if (graph == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevStreamEndCapture: graph is null");
  }
  *graph = nullptr;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  std::shared_ptr<GraphNodes> nodes;
  if (mydevError_t status = end_capture(stream, &nodes)) return status;
  *graph = reinterpret_cast<mydevGraph_t>(
      new GraphHandle{kGraphMagic, std::move(nodes)});
  return mydevSuccess;
}

mydevError_t mydevStreamGetCaptureInfo(mydevStream_t handle,
                                       mydevStreamCaptureStatus* status,
                                       uint64_t* id) {
  if (mydevError_t error = enter()) return error;
  if (status == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamGetCaptureInfo: status is null");
  }
  Stream* stream = nullptr;
  if (mydevError_t error = resolve_stream(handle, &stream)) return error;
  Capture* capture = stream->capture();
  *status = mydevStreamCaptureStatusNone;
  if (id != nullptr) *id = 0;
  if (capture == nullptr) return mydevSuccess;
  std::lock_guard<std::mutex> lock(capture->mutex);
  *status = capture->invalid_reason.empty()
                ? mydevStreamCaptureStatusActive
                : mydevStreamCaptureStatusInvalidated;
  if (id != nullptr) *id = capture->id;
  return mydevSuccess;
}

mydevError_t mydevGraphGetNodeCount(mydevGraph_t handle, size_t* count) {
  if (mydevError_t status = enter()) return status;
  GraphHandle* graph = nullptr;
  if (mydevError_t status = resolve(handle, kGraphMagic, "graph", &graph)) {
    return status;
  }
  if (count == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevGraphGetNodeCount: null count");
  }
  *count = graph->nodes->tasks.size();
  return mydevSuccess;
}

mydevError_t mydevGraphDebugDotPrint(mydevGraph_t handle, const char* path) {
  if (mydevError_t status = enter()) return status;
  GraphHandle* graph = nullptr;
  if (mydevError_t status = resolve(handle, kGraphMagic, "graph", &graph)) {
    return status;
  }
  FILE* file = path == nullptr ? nullptr : std::fopen(path, "w");
  if (file == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevGraphDebugDotPrint: cannot write '%s'",
                path == nullptr ? "(null)" : path);
  }
  const GraphNodes& nodes = *graph->nodes;
  std::fprintf(file,
               "digraph mydev_graph {\n  label=\"mydev:%d, %zu nodes\";\n",
               nodes.device, nodes.tasks.size());
  for (size_t i = 0; i < nodes.tasks.size(); ++i) {
    const Task& task = nodes.tasks[i];
    std::fprintf(
        file, "  n%zu [label=\"%zu: %s %s\\nstream 0x%llx\\n%zu bytes\"];\n", i,
        i, kind_name(task.kind), task.kind == TaskKind::Kernel ? task.name : "",
        static_cast<unsigned long long>(nodes.streams[i]), task.count);
    if (i > 0) std::fprintf(file, "  n%zu -> n%zu;\n", i - 1, i);
  }
  std::fprintf(file, "}\n");
  std::fclose(file);
  return mydevSuccess;
}

mydevError_t mydevGraphInstantiate(mydevGraphExec_t* exec,
                                   mydevGraph_t handle) {
  if (mydevError_t status = enter()) return status;
  if (exec == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevGraphInstantiate: exec is null");
  }
  GraphHandle* graph = nullptr;
  if (mydevError_t status = resolve(handle, kGraphMagic, "graph", &graph)) {
    return status;
  }
  *exec = reinterpret_cast<mydevGraphExec_t>(
      new GraphHandle{kExecMagic, graph->nodes});
  return mydevSuccess;
}

mydevError_t mydevGraphLaunch(mydevGraphExec_t handle,
                              mydevStream_t stream_handle) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevGraphLaunch");
  GraphHandle* exec = nullptr;
  if (mydevError_t status =
          resolve(handle, kExecMagic, "executable graph", &exec)) {
    return status;
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(stream_handle, &stream)) {
    return status;
  }
  if (stream->device()->index() != exec->nodes->device) {
    return fail(mydevErrorInvalidValue,
                "mydevGraphLaunch: the graph was captured on mydev:%d, the "
                "stream belongs to mydev:%d",
                exec->nodes->device, stream->device()->index());
  }
  // Launched into a capture, the replay kernel is recorded like any other
  // (a child graph): run_graph does not consume its data.
  stream->enqueue(Task::kernel("mydevGraphLaunch", &run_graph,
                               new std::shared_ptr<GraphNodes>(exec->nodes),
                               &release_graph_run));
  return finish_enqueue(stream);
}

mydevError_t mydevGraphExecDestroy(mydevGraphExec_t handle) {
  if (mydevError_t status = enter()) return status;
  GraphHandle* exec = nullptr;
  if (mydevError_t status =
          resolve(handle, kExecMagic, "executable graph", &exec)) {
    return status;
  }
  destroy(exec);
  return mydevSuccess;
}

mydevError_t mydevGraphDestroy(mydevGraph_t handle) {
  if (mydevError_t status = enter()) return status;
  GraphHandle* graph = nullptr;
  if (mydevError_t status = resolve(handle, kGraphMagic, "graph", &graph)) {
    return status;
  }
  destroy(graph);
  return mydevSuccess;
}

}  // extern "C"
