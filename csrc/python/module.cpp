// device_ext._C: Python bindings for what torch does not already expose
// generically (torch.Stream/Event/accelerator reach mydev through the
// DeviceGuardImpl and the DeviceAllocator).
#include <pybind11/chrono.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <string>

#include "../aten/cpu_fallback_policy.h"
#include "../aten/debug_kernels.h"
#include "../aten/kernel_results.h"
#include "../aten/kernel_scratch_cache.h"
#include "../aten/native_elementwise.h"
#include "../aten/structured_op_routing.h"
#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "../core/generator.h"
#include "../core/graph_impl.h"
#include "../core/ipc_storage_sharing.h"
#include "../core/kernel_errors.h"
#include "../core/mydev_stream.h"
#include "../core/runtime_check.h"
#include "../custom_ops/custom_ops.h"
#include "../distributed/gloo_transport_backend.h"
#include "../distributed/shm_transport_backend.h"
#include "compiled_kernel_abi.h"
#include "compiled_wrapper_bindings.h"
#include "memory_history_bindings.h"
#include "triton_launch_bindings.h"

namespace py = pybind11;

namespace mydev {
namespace {

struct DeviceProperties {
  std::string name;
  size_t total_memory;
  int multi_processor_count;
  int major;
  int minor;
  int simd_width_bytes;
  int warp_size;
  bool can_map_peer_memory;
};

DeviceProperties deviceProperties(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  mydevDeviceProp prop{};
  MYDEV_CHECK(mydevGetDeviceProperties(&prop, device));
  return {prop.name,
          prop.totalGlobalMem,
          prop.multiProcessorCount,
          prop.major,
          prop.minor,
          prop.simdWidthBytes,
          prop.warpSize,
          prop.canMapPeerMemory != 0};
}

py::dict stat(const c10::CachingAllocator::Stat& value) {
  py::dict result;
  result["current"] = value.current;
  result["peak"] = value.peak;
  result["allocated"] = value.allocated;
  result["freed"] = value.freed;
  return result;
}

py::dict statArray(const c10::CachingAllocator::StatArray& array) {
  static const char* const kPools[] = {"all", "small_pool", "large_pool"};
  py::dict by_pool;
  for (size_t i = 0; i < array.size(); ++i) {
    by_pool[kPools[i]] = stat(array[i]);
  }
  return by_pool;
}

// Same keys as torch.cuda.memory_stats before flattening.
py::dict memoryStats(c10::DeviceIndex device) {
  const auto stats = cachingAllocator().getDeviceStats(device);
  py::dict result;
  result["allocation"] = statArray(stats.allocation);
  result["segment"] = statArray(stats.segment);
  result["active"] = statArray(stats.active);
  result["allocated_bytes"] = statArray(stats.allocated_bytes);
  result["reserved_bytes"] = statArray(stats.reserved_bytes);
  result["active_bytes"] = statArray(stats.active_bytes);
  result["requested_bytes"] = statArray(stats.requested_bytes);
  result["inactive_split"] = statArray(stats.inactive_split);
  result["inactive_split_bytes"] = statArray(stats.inactive_split_bytes);
  result["oversize_allocations"] = stat(stats.oversize_allocations);
  result["oversize_segments"] = stat(stats.oversize_segments);
  result["max_split_size"] = stats.max_split_size;
  result["num_alloc_retries"] = stats.num_alloc_retries;
  result["num_ooms"] = stats.num_ooms;
  result["num_sync_all_streams"] = stats.num_sync_all_streams;
  result["num_device_alloc"] = stats.num_device_alloc;
  result["num_device_free"] = stats.num_device_free;
  return result;
}

// torch.Event.elapsed_time accepts only an exact torch.Event as `end`;
// torch.mydev.Event subclasses it, so timing goes through here.
double eventElapsedTime(py::handle start, py::handle end) {
  for (py::handle event : {start, end}) {
    TORCH_CHECK_TYPE(
        PyObject_IsInstance(event.ptr(),
                            reinterpret_cast<PyObject*>(THPEventClass)) == 1,
        "elapsed_time expects torch.Event objects");
  }
  const c10::Event& first = reinterpret_cast<THPEvent*>(start.ptr())->event;
  const c10::Event& second = reinterpret_cast<THPEvent*>(end.ptr())->event;
  // Each device has its own clock on real hardware, as on cuda.
  TORCH_CHECK(first.device_index() < 0 || second.device_index() < 0 ||
                  first.device() == second.device(),
              "elapsed_time: the events are on different devices (",
              first.device(), " and ", second.device(),
              "); time events recorded on one device");
  py::gil_scoped_release no_gil;
  return first.elapsedTime(second);
}

py::tuple streamPriorityRange() {
  int least = 0;
  int greatest = 0;
  MYDEV_CHECK(mydevDeviceGetStreamPriorityRange(&least, &greatest));
  return py::make_tuple(least, greatest);
}

// Lets other Python threads (and kernels that run Python, see
// triton_launch_bindings.cpp) run while this thread waits; nullptr if it did
// not hold the GIL.
void* releaseGilIfHeld() {
  if (Py_IsInitialized() && _Py_IsFinalizing() == 0 && PyGILState_Check()) {
    return PyEval_SaveThread();
  }
  return nullptr;
}

void restoreGil(void* released) {
  if (released != nullptr) {
    PyEval_RestoreThread(static_cast<PyThreadState*>(released));
  }
}

// The driver and the distributed backends live in the library, which has no
// Python: they learn about the interpreter from here.
void installInterpreterHooks() {
  MYDEV_CHECK(mydevSetHostWaitHooks(&releaseGilIfHeld, &restoreGil));
  distributed::CommStreamBackend::setInterpreterHooks(
      {[] { return _Py_IsFinalizing() != 0; },
       [](const std::function<void()>& wait) {
         void* released = releaseGilIfHeld();
         wait();
         restoreGil(released);
       }});
}

}  // namespace
}  // namespace mydev

PYBIND11_MODULE(_C, m) {
  using namespace mydev;
  m.doc() = "torch-mydev native extension";
  routeStructuredOpsToDeviceKernelPath();

  py::class_<DeviceProperties>(m, "_DeviceProperties")
      .def_readonly("name", &DeviceProperties::name)
      .def_readonly("total_memory", &DeviceProperties::total_memory)
      .def_readonly("multi_processor_count",
                    &DeviceProperties::multi_processor_count)
      .def_readonly("major", &DeviceProperties::major)
      .def_readonly("minor", &DeviceProperties::minor)
      .def_readonly("simd_width_bytes", &DeviceProperties::simd_width_bytes)
      .def_readonly("warp_size", &DeviceProperties::warp_size)
      .def_readonly("can_map_peer_memory",
                    &DeviceProperties::can_map_peer_memory)
      .def("__repr__", [](const DeviceProperties& p) {
        return "_MydevDeviceProperties(name='" + p.name +
               "', major=" + std::to_string(p.major) +
               ", minor=" + std::to_string(p.minor) +
               ", total_memory=" + std::to_string(p.total_memory >> 20) +
               "MB, multi_processor_count=" +
               std::to_string(p.multi_processor_count) + ")";
      });

  // Wrapped: the configuration warning of deviceCount() becomes a Python
  // UserWarning.
  m.def("_device_count", torch::wrap_pybind_function(
                             [] { return static_cast<int>(deviceCount()); }));
  m.def("_current_device", [] { return static_cast<int>(currentDevice()); });
  m.def("_set_device", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
    MYDEV_CHECK(mydevSetDevice(device));
  });
  m.def("_init", [] {
    int count = 0;
    MYDEV_CHECK(mydevGetDeviceCount(&count));
  });
  m.def("_check_device_index", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_is_initialized", [] { return mydevIsInitialized() != 0; });
  m.def("_is_in_bad_fork", [] { return mydevIsForkedChild() != 0; });
  m.def("_launch_blocking", [] { return mydevLaunchBlocking() != 0; });
  m.def("_get_device_properties", [](int device) {
    return deviceProperties(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_stream_priority_range", &streamPriorityRange);
  m.def("_event_elapsed_time", &eventElapsedTime);
  m.def("_stream_priority", [](int64_t stream_id, int device) {
    return MydevStream(
               c10::Stream(c10::Stream::UNSAFE,
                           c10::Device(c10::DeviceType::PrivateUse1,
                                       static_cast<c10::DeviceIndex>(device)),
                           stream_id))
        .priority();
  });
  m.def("_current_stream", [](int device) {
    const MydevStream stream =
        getCurrentStream(static_cast<c10::DeviceIndex>(device));
    return py::make_tuple(stream.id(), static_cast<int>(stream.device_index()));
  });
  // The driver handle of the current stream, as torch.compile's wrapper
  // passes it to kernel launches (CUDA's _cuda_getCurrentRawStream).
  m.def("_current_raw_stream", [](int device) {
    return reinterpret_cast<uintptr_t>(
        getCurrentStream(static_cast<c10::DeviceIndex>(device)).raw());
  });
  m.attr("_compiled_kernel_abi") =
      py::reinterpret_steal<py::object>(compiledKernelAbiCapsule());
  m.def("_set_stream", [](int64_t stream_id, int device) {
    setCurrentStream(MydevStream(
        c10::Stream(c10::Stream::UNSAFE,
                    c10::Device(c10::DeviceType::PrivateUse1,
                                static_cast<c10::DeviceIndex>(device)),
                    stream_id)));
  });
  m.def(
      "_synchronize",
      [](int device) {
        checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
        MYDEV_CHECK(mydevDeviceSynchronize(device));
      },
      py::call_guard<py::gil_scoped_release>());
  // The message of a kernel failure no synchronizing call reported yet
  // (clearing it), or None; never waits.
  m.def("_take_pending_kernel_failure", [](int device) -> py::object {
    if (mydevDeviceGetPendingFailure(device) != mydevErrorLaunchFailure) {
      return py::none();
    }
    const std::string message = mydevGetLastErrorMessage();
    (void)takeKernelException(message);  // reported here, not at a later call
    return py::str(message);
  });
  m.def("_graph_pool_handle", [] { return graphPoolHandle(); });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        defaultGenerator(static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_memory_stats", [](int device) {
    return memoryStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_reset_peak_memory_stats", [](int device) {
    cachingAllocator().resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_reset_accumulated_memory_stats", [](int device) {
    cachingAllocator().resetAccumulatedStats(
        static_cast<c10::DeviceIndex>(device));
  });
  m.def(
      "_empty_cache",
      [] {
        cachingAllocator().emptyCache({0, 0});
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_mem_get_info", [](int device) {
    return cachingAllocator().getMemoryInfo(
        static_cast<c10::DeviceIndex>(device));
  });
  m.def("_set_cpu_fallback_policy", [](const std::string& policy) {
    setCpuFallbackPolicy(
        parseCpuFallbackPolicy(policy, "set_cpu_fallback_policy: policy"));
  });
  m.def("_cpu_fallback_policy", [] {
    switch (cpuFallbackPolicy()) {
      case CpuFallbackPolicy::Off: return "off";
      case CpuFallbackPolicy::Warn: return "warn";
      case CpuFallbackPolicy::On: return "on";
    }
    return "off";
  });
  m.def("_cpu_fallback_counts", &cpuFallbackCounts);
  m.def("_reset_cpu_fallback_counts", &resetCpuFallbackCounts);
  m.def("_result_placement_counts", [] {
    const ResultPlacementCounts counts = resultPlacementCounts();
    return std::make_pair(counts.in_place, counts.copied);
  });
  m.def("_reset_result_placement_counts", &resetResultPlacementCounts);
  m.def("_native_elementwise_launches", &nativeElementwiseLaunches);
  m.def("_reset_native_elementwise_launches", &resetNativeElementwiseLaunches);
  m.def("_kernel_scratch_stats", [] {
    const KernelScratchStats stats = kernelScratchStats();
    return std::make_pair(stats.cached_bytes, stats.reuses);
  });
  m.def("_sleep", &sleepOnCurrentStream, py::arg("milliseconds"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fail_on_stream", &failOnCurrentStream, py::arg("message"));
  // torch.mydev._debug.hold_stream() wraps these for tests.
  py::class_<StreamLatch, std::shared_ptr<StreamLatch>>(m, "_StreamLatch")
      .def(py::init<>())
      .def("release", &StreamLatch::release)
      .def_property_readonly("released", &StreamLatch::released)
      .def_property_readonly("reached", &StreamLatch::reached)
      .def("wait_until_reached", &StreamLatch::waitUntilReached,
           py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
  m.def("_hold_stream", &holdCurrentStream, py::arg("latch"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>());

  // The fused custom ops' kernels (device_ext/ops/ defines the ops).
  m.def("_fused_rms_norm", &custom_ops::rmsNorm, py::arg("x"),
        py::arg("weight"), py::arg("eps"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_rms_norm_backward", &custom_ops::rmsNormBackward,
        py::arg("grad_out"), py::arg("x"), py::arg("weight"), py::arg("eps"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_swiglu", &custom_ops::swiglu, py::arg("gate"), py::arg("up"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_swiglu_backward", &custom_ops::swigluBackward,
        py::arg("grad_out"), py::arg("gate"), py::arg("up"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_rotary_embedding", &custom_ops::rotaryEmbedding, py::arg("x"),
        py::arg("cos"), py::arg("sin"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_rotary_embedding_backward",
        &custom_ops::rotaryEmbeddingBackward, py::arg("grad_out"),
        py::arg("cos"), py::arg("sin"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_fused_kernels_isa", &custom_ops::fusedKernelsIsa);

  bindTritonLaunch(m);     // device_ext/triton_backend launches through it
  bindMemoryHistory(m);    // torch.mydev.memory._record_memory_history
  bindCompiledWrapper(m);  // inductor_backend/wrapper_runtime.py

  // The myccl c10d backend (device_ext/distributed.py registers it). The
  // base class is the one torch binds in torch._C._distributed_c10d.
  py::module::import("torch._C._distributed_c10d");
  py::class_<distributed::ShmTransportBackend, c10d::Backend,
             c10::intrusive_ptr<distributed::ShmTransportBackend>>(
      m, "ShmTransportBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int size, std::chrono::milliseconds timeout) {
             return c10::make_intrusive<distributed::ShmTransportBackend>(
                 store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"), py::call_guard<py::gil_scoped_release>())
      .def("algorithm_counts",
           &distributed::ShmTransportBackend::algorithmCounts)
      // split_group() deep-copies the parent backend's `options`; None keeps
      // the parent's timeout.
      .def_property_readonly(
          "options",
          [](const distributed::ShmTransportBackend&) { return py::none(); });
  installInterpreterHooks();
  m.def("_myccl_python_is_exiting",
        &distributed::CommStreamBackend::pythonIsExiting);
  // The driver's peer-memory calls, for tests of them across processes: a
  // handle's bytes, and opening one to a raw address (read it only once the
  // owner's writes are complete).
  m.def("_ipc_get_mem_handle", [](const at::Tensor& tensor) {
    mydevIpcMemHandle_t handle{};
    MYDEV_CHECK(mydevIpcGetMemHandle(&handle, tensor.data_ptr()));
    return py::bytes(handle.reserved, sizeof(handle.reserved));
  });
  m.def("_ipc_open_mem_handle", [](const py::bytes& bytes) {
    const std::string text = bytes;
    TORCH_CHECK(text.size() == MYDEV_IPC_HANDLE_SIZE, "not an IPC handle");
    mydevIpcMemHandle_t handle{};
    std::memcpy(handle.reserved, text.data(), text.size());
    void* ptr = nullptr;
    MYDEV_CHECK(mydevIpcOpenMemHandle(&ptr, handle));
    return reinterpret_cast<uintptr_t>(ptr);
  });
  m.def("_ipc_close_mem_handle", [](uintptr_t ptr) {
    MYDEV_CHECK(mydevIpcCloseMemHandle(reinterpret_cast<void*>(ptr)));
  });
  // Storage sharing between processes (device_ext/_storage_sharing.py).
  m.def("_ipc_share_storage",
        [](const at::Tensor& tensor, uintptr_t unused_counters) {
          const SharedStorage shared = shareStorage(tensor, unused_counters);
          return py::make_tuple(
              shared.device, py::bytes(shared.allocation_handle),
              shared.offset_bytes, shared.size_bytes, shared.counters,
              shared.took_counters, shared.sequence);
        });
  m.def(
      "_ipc_open_storage",
      [](int device, const std::string& handle, uint64_t offset_bytes,
         uint64_t size_bytes, uintptr_t counters, int64_t sequence,
         int64_t producer_pid) {
        const SharedStorage shared{device,   handle, offset_bytes, size_bytes,
                                   counters, false,  sequence};
        return openSharedStorage(shared, producer_pid);
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_ipc_release_duplicate_share", &releaseDuplicateShare,
        py::call_guard<py::gil_scoped_release>());
  m.def("_ipc_collect", &collectReleasedStorages,
        py::call_guard<py::gil_scoped_release>());
  m.def("_ipc_release_received_at_exit", &releaseReceivedAtExit);
  // An opened pointer is a device pointer like any other: the host reads it
  // through a copy.
  m.def("_ipc_read", [](uintptr_t ptr, size_t nbytes) {
    std::string bytes(nbytes, '\0');
    MYDEV_CHECK(mydevMemcpy(bytes.data(), reinterpret_cast<const void*>(ptr),
                            nbytes, mydevMemcpyDeviceToHost, nullptr));
    return py::bytes(bytes);
  });
  // The driver's translation, for the Triton executor (it computes with
  // device addresses and loads and stores at the kernel-side ones).
  m.def("_kernel_pointer", [](uintptr_t ptr) {
    return reinterpret_cast<uintptr_t>(
        mydevKernelPointer(reinterpret_cast<const void*>(ptr)));
  });
  // myccl over gloo's TCP transport (device_ext/_myccl_transport.py picks
  // it); `gloo` is a torch.distributed.ProcessGroupGloo of the same ranks.
  py::class_<distributed::GlooTransportBackend, c10d::Backend,
             c10::intrusive_ptr<distributed::GlooTransportBackend>>(
      m, "GlooTransportBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<distributed::GlooTransportBackend>(
                 gloo, timeout);
           }),
           py::arg("gloo"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly(
          "options",
          [](const distributed::GlooTransportBackend&) { return py::none(); });
}
