// torch.accelerator.Graph on mydev: the GraphImplInterface registered for
// PrivateUse1, on the driver's stream capture (mydev_runtime.h), with a
// private pool of the caching allocator per graph and the generator's
// graph-safe state (generator.h), in the manner of CUDA's CUDAGraph.
#include "graph_impl.h"

#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cctype>
#include <memory>
#include <string>

#include "caching_allocator.h"
#include "device.h"
#include "generator.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

std::atomic<c10::CaptureId_t> g_next_pool_uid{1};

mydevStreamCaptureMode driverMode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal:
      return mydevStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed: return mydevStreamCaptureModeRelaxed;
    case at::GraphCaptureMode::Default:
    case at::GraphCaptureMode::Global: break;
  }
  return mydevStreamCaptureModeGlobal;  // CUDA's default too
}

// The kernel each replay enqueues before the graph: where its random
// kernels start this time.
struct RngStart {
  std::shared_ptr<GraphRngState> state;
  PhiloxInputs start;
};
void writeRngStart(void* data) {
  const auto* rng = static_cast<RngStart*>(data);
  rng->state->seed = rng->start.seed;
  rng->state->offset = rng->start.offset;
}
void releaseRngStart(void* data) { delete static_cast<RngStart*>(data); }

MydevGeneratorImpl& generatorOf(c10::DeviceIndex device) {
  return *at::check_generator<MydevGeneratorImpl>(defaultGenerator(device));
}

class MydevGraphImpl final : public at::GraphImplInterface {
 public:
  explicit MydevGraphImpl(const at::GraphImplArgs& args)
      : keep_graph_(args.keep_graph) {}

  ~MydevGraphImpl() override { reset(); }

  void capture_begin(c10::MempoolId_t pool,
                     at::GraphCaptureMode mode) override {
    TORCH_CHECK(!captured_ && !capturing_,
                "This graph already holds a capture; reset() it first");
    device_ = currentDevice();
    stream_ = getCurrentStream(device_).raw();
    const bool shared = pool.first != 0 || pool.second != 0;
    pool_ = shared ? pool : c10::MempoolId_t{g_next_pool_uid++, 0};
    MYDEV_CHECK(mydevStreamBeginCapture(stream_, driverMode(mode)));
    uint64_t capture_id = 0;
    mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
    MYDEV_CHECK(mydevStreamGetCaptureInfo(stream_, &status, &capture_id));
    capturing_ = true;
    beginAllocateToPool(device_, pool_, capture_id);
    rng_state_ = std::make_shared<GraphRngState>();
    MydevGeneratorImpl& generator = generatorOf(device_);
    const std::lock_guard<std::mutex> lock(generator.mutex_);
    generator.captureBegin(rng_state_);
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "capture_end() without capture_begin()");
    {
      MydevGeneratorImpl& generator = generatorOf(device_);
      const std::lock_guard<std::mutex> lock(generator.mutex_);
      rng_increment_ = generator.captureEnd();
    }
    capturing_ = false;
    endAllocateToPool(device_, pool_);
    const mydevError_t status = mydevStreamEndCapture(stream_, &graph_);
    if (status != mydevSuccess) {
      // The pool's blocks may be referenced by tensors the failed capture
      // produced; they return to the cache as those die. The error is
      // raised first: the driver's message says which call broke capture.
      try {
        MYDEV_CHECK(status);
      } catch (...) {
        releasePool(device_, pool_);
        throw;
      }
    }
    captured_ = true;
    if (!keep_graph_ && !debug_) {
      instantiate();
      destroyGraph();
    }
  }

  void instantiate() override {
    TORCH_CHECK(captured_, "instantiate() needs a captured graph");
    TORCH_CHECK(graph_ != nullptr,
                "instantiate(): the graph was not kept (keep_graph=False)");
    if (exec_ != nullptr) {
      MYDEV_CHECK(mydevGraphExecDestroy(exec_));
      exec_ = nullptr;
    }
    MYDEV_CHECK(mydevGraphInstantiate(&exec_, graph_));
  }

  void replay() override {
    TORCH_CHECK(captured_, "replay() needs a captured graph");
    if (exec_ == nullptr) {
      instantiate();
    }
    const mydevStream_t stream = getCurrentStream(device_).raw();
    if (rng_increment_ > 0) {
      MydevGeneratorImpl& generator = generatorOf(device_);
      PhiloxInputs start;
      {
        const std::lock_guard<std::mutex> lock(generator.mutex_);
        start = generator.reserve(rng_increment_);
      }
      auto* rng = new RngStart{rng_state_, start};
      const mydevError_t status =
          mydevLaunchKernelEx(stream, "mydev_graph_rng_start", &writeRngStart,
                              &releaseRngStart, rng);
      if (status != mydevSuccess && status != mydevErrorLaunchFailure) {
        delete rng;
      }
      MYDEV_CHECK(status);
    }
    MYDEV_CHECK(mydevGraphLaunch(exec_, stream));
  }

  void reset() override {
    if (capturing_) {
      return;  // the capture's owner ends it; nothing was created yet
    }
    if (exec_ != nullptr) {
      mydevGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
    destroyGraph();
    if (captured_) {
      releasePool(device_, pool_);
      captured_ = false;
    }
  }

  c10::MempoolId_t pool() const override {
    TORCH_CHECK(captured_ || capturing_,
                "pool() is only available once capture has begun");
    return pool_;
  }

  // The driver's graph is kept past capture_end so that debug_dump has
  // something to print.
  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_,
                "debug_dump() needs enable_debug_mode() before the capture");
    TORCH_CHECK(graph_ != nullptr, "debug_dump(): nothing captured");
    MYDEV_CHECK(mydevGraphDebugDotPrint(graph_, path.c_str()));
  }

 private:
  void destroyGraph() {
    if (graph_ != nullptr) {
      mydevGraphDestroy(graph_);
      graph_ = nullptr;
    }
  }

  const bool keep_graph_;
  bool debug_ = false;
  bool capturing_ = false;
  bool captured_ = false;
  c10::DeviceIndex device_ = 0;
  mydevStream_t stream_ = nullptr;
  c10::MempoolId_t pool_{0, 0};
  mydevGraph_t graph_ = nullptr;
  mydevGraphExec_t exec_ = nullptr;
  std::shared_ptr<GraphRngState> rng_state_;
  uint64_t rng_increment_ = 0;
};

// torch looks the implementation up by DeviceTypeName(PrivateUse1), which
// is the renamed backend's name in upper case ("MYDEV"), not the
// "PrivateUse1" token REGISTER_GRAPH_IMPL would stringify.
std::string registryKey() {
  std::string key = kDeviceName;
  for (char& c : key) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return key;
}

}  // namespace

c10::MempoolId_t graphPoolHandle() { return {0, g_next_pool_uid++}; }

}  // namespace mydev

namespace at {
C10_REGISTER_TYPED_CLASS(GraphImplRegistry, mydev::registryKey(),
                         mydev::MydevGraphImpl)
}  // namespace at
