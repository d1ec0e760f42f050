// Tests of stream capture and graphs in the simulated mydev driver, without
// torch.
//
//   g++ -O2 -std=c++17 -pthread csrc/runtime/*.cpp
//       csrc/runtime/tests/graph_test.cpp -o /tmp/graph_test && /tmp/graph_test
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "../mydev_runtime.h"
#include "check.h"

namespace {

// A replayable kernel: the driver owns the closure and releases it.
using Body = std::function<void()>;
std::atomic<int> g_released{0};

void run_body(void* data) { (*static_cast<Body*>(data))(); }
void release_body(void* data) {
  delete static_cast<Body*>(data);
  g_released.fetch_add(1);
}

mydevError_t launch(mydevStream_t stream, Body body) {
  auto* owned = new Body(std::move(body));
  const mydevError_t status =
      mydevLaunchKernelEx(stream, "body", run_body, release_body, owned);
  if (status != mydevSuccess && status != mydevErrorLaunchFailure) {
    delete owned;
  }
  return status;
}

void consuming_kernel(void*) {}

mydevGraphExec_t capture_counter(mydevStream_t stream,
                                 std::atomic<int>* counter, int kernels,
                                 mydevGraph_t* graph_out) {
  CHECK_OK(mydevStreamBeginCapture(stream, mydevStreamCaptureModeGlobal));
  for (int i = 0; i < kernels; ++i) {
    CHECK_OK(launch(stream, [counter] { counter->fetch_add(1); }));
  }
  mydevGraph_t graph = nullptr;
  CHECK_OK(mydevStreamEndCapture(stream, &graph));
  mydevGraphExec_t exec = nullptr;
  CHECK_OK(mydevGraphInstantiate(&exec, graph));
  *graph_out = graph;
  return exec;
}

void test_capture_and_replay() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  std::atomic<int> counter{0};
  mydevGraph_t graph = nullptr;
  mydevGraphExec_t exec = capture_counter(stream, &counter, 50, &graph);
  CHECK(counter == 0);  // captured, not run
  size_t nodes = 0;
  CHECK_OK(mydevGraphGetNodeCount(graph, &nodes));
  CHECK(nodes == 50);

  const std::string dot = "/tmp/mydev_graph_test.dot";
  CHECK_OK(mydevGraphDebugDotPrint(graph, dot.c_str()));
  std::ifstream file(dot);
  std::stringstream text;
  text << file.rdbuf();
  CHECK(text.str().find("n49 [label=\"49: kernel body") != std::string::npos);

  // The graph can go once instantiated; replays keep the work.
  CHECK_OK(mydevGraphDestroy(graph));
  CHECK(g_released == 0);
  for (int i = 0; i < 3; ++i) CHECK_OK(mydevGraphLaunch(exec, stream));
  CHECK_OK(mydevStreamSynchronize(stream));
  CHECK(counter == 150);
  // Destroying while a launch is in flight is safe.
  CHECK_OK(mydevGraphLaunch(exec, stream));
  CHECK_OK(mydevGraphExecDestroy(exec));
  CHECK_OK(mydevStreamSynchronize(stream));
  CHECK(counter == 200);
  CHECK(g_released == 50);
  CHECK_STATUS(mydevGraphLaunch(exec, stream), mydevErrorInvalidHandle);
  CHECK_OK(mydevStreamDestroy(stream));
}

void test_refusals_leave_stream_usable() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  mydevStream_t default0 = nullptr;
  CHECK_OK(mydevStreamGetDefault(0, &default0));
  CHECK_STATUS(mydevStreamBeginCapture(default0, mydevStreamCaptureModeGlobal),
               mydevErrorStreamCaptureUnsupported);
  CHECK(last_message_has("default stream"));

  const auto refused_then_usable =
      [&](const std::function<mydevError_t()>& call, const char* api) {
        CHECK_OK(mydevStreamBeginCapture(stream, mydevStreamCaptureModeGlobal));
        CHECK_STATUS(call(), mydevErrorStreamCaptureUnsupported);
        CHECK(last_message_has(api));
        mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
        CHECK_OK(mydevStreamGetCaptureInfo(stream, &status, nullptr));
        CHECK(status == mydevStreamCaptureStatusInvalidated);
        mydevGraph_t graph = reinterpret_cast<mydevGraph_t>(1);
        CHECK_STATUS(mydevStreamEndCapture(stream, &graph),
                     mydevErrorStreamCaptureInvalidated);
        CHECK(graph == nullptr);
        CHECK(last_message_has(api));
        std::atomic<int> ran{0};
        CHECK_OK(launch(stream, [&] { ran = 1; }));
        CHECK_OK(mydevStreamSynchronize(stream));
        CHECK(ran == 1);
      };
  refused_then_usable([&] { return mydevStreamSynchronize(stream); },
                      "mydevStreamSynchronize");
  refused_then_usable([&] { return mydevStreamQuery(stream); },
                      "mydevStreamQuery");
  refused_then_usable([&] { return mydevDeviceSynchronize(0); },
                      "mydevDeviceSynchronize");
  void* device = nullptr;
  CHECK_OK(mydevMalloc(&device, 64, 0));
  char host[64];
  refused_then_usable(
      [&] {
        return mydevMemcpyAsync(host, device, 64, mydevMemcpyDeviceToHost,
                                stream);
      },
      "mydevMemcpyAsync");
  refused_then_usable(
      [&] {
        return mydevLaunchKernel(stream, "consuming", consuming_kernel,
                                 nullptr);
      },
      "mydevLaunchKernel");
  mydevEvent_t event = nullptr;
  CHECK_OK(mydevEventCreate(&event, mydevEventDisableTiming));
  refused_then_usable(
      [&] {
        mydevEventRecord(event, stream);
        return mydevEventSynchronize(event);
      },
      "mydevEventSynchronize");
  CHECK_OK(mydevEventSynchronize(event));  // the capture ended
  CHECK_OK(mydevEventDestroy(event));
  CHECK_OK(mydevFree(device));
  CHECK_OK(mydevStreamDestroy(stream));
}

void test_capture_modes() {
  mydevStream_t stream = nullptr;
  mydevStream_t other = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  CHECK_OK(mydevStreamCreate(&other, 0, 0));
  const auto other_thread_sync = [&] {
    mydevError_t status = mydevSuccess;
    std::thread([&] { status = mydevStreamSynchronize(other); }).join();
    return status;
  };
  mydevGraph_t graph = nullptr;
  // thread_local: other threads are not affected, this one is.
  CHECK_OK(mydevStreamBeginCapture(stream, mydevStreamCaptureModeThreadLocal));
  CHECK_OK(other_thread_sync());
  CHECK_STATUS(mydevStreamSynchronize(other),
               mydevErrorStreamCaptureUnsupported);
  CHECK_STATUS(mydevStreamEndCapture(stream, &graph),
               mydevErrorStreamCaptureInvalidated);
  // global: every thread is.
  CHECK_OK(mydevStreamBeginCapture(stream, mydevStreamCaptureModeGlobal));
  CHECK_STATUS(other_thread_sync(), mydevErrorStreamCaptureUnsupported);
  CHECK_STATUS(mydevStreamEndCapture(stream, &graph),
               mydevErrorStreamCaptureInvalidated);
  // relaxed: unsafe calls are allowed, the capturing stream stays off limits.
  CHECK_OK(mydevStreamBeginCapture(stream, mydevStreamCaptureModeRelaxed));
  CHECK_OK(mydevStreamSynchronize(other));
  CHECK_OK(mydevDeviceSynchronize(0));
  CHECK_OK(mydevStreamEndCapture(stream, &graph));
  CHECK_OK(mydevGraphDestroy(graph));
  CHECK_STATUS(mydevStreamEndCapture(stream, &graph), mydevErrorInvalidValue);
  CHECK_OK(mydevStreamDestroy(stream));
  CHECK_OK(mydevStreamDestroy(other));
}

void test_multi_stream_capture() {
  mydevStream_t main = nullptr;
  mydevStream_t side = nullptr;
  CHECK_OK(mydevStreamCreate(&main, 1, 0));
  CHECK_OK(mydevStreamCreate(&side, 1, 0));
  mydevEvent_t fork = nullptr;
  mydevEvent_t join = nullptr;
  CHECK_OK(mydevEventCreate(&fork, mydevEventDisableTiming));
  CHECK_OK(mydevEventCreate(&join, mydevEventDisableTiming));
  void* a = nullptr;
  void* b = nullptr;
  CHECK_OK(mydevMalloc(&a, 4096, 1));
  CHECK_OK(mydevMalloc(&b, 4096, 1));
  std::string order;
  std::mutex order_mutex;
  const auto note = [&](char c) {
    return [&, c] {
      std::lock_guard<std::mutex> lock(order_mutex);
      order += c;
    };
  };
  CHECK_OK(mydevStreamBeginCapture(main, mydevStreamCaptureModeGlobal));
  CHECK_OK(launch(main, note('a')));
  CHECK_OK(mydevEventRecord(fork, main));
  CHECK_OK(mydevStreamWaitEvent(side, fork));  // side joins the capture
  mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
  CHECK_OK(mydevStreamGetCaptureInfo(side, &status, nullptr));
  CHECK(status == mydevStreamCaptureStatusActive);
  CHECK_OK(launch(side, note('b')));
  CHECK_OK(mydevMemsetAsync(a, 7, 4096, side));
  CHECK_OK(mydevMemcpyAsync(b, a, 4096, mydevMemcpyDeviceToDevice, side));
  CHECK_OK(mydevEventRecord(join, side));
  CHECK_OK(mydevStreamWaitEvent(main, join));
  CHECK_OK(launch(main, note('c')));
  mydevGraph_t graph = nullptr;
  CHECK_STATUS(mydevStreamEndCapture(side, &graph), mydevErrorInvalidValue);
  CHECK_OK(mydevStreamEndCapture(main, &graph));
  CHECK_OK(mydevStreamGetCaptureInfo(side, &status, nullptr));
  CHECK(status == mydevStreamCaptureStatusNone);
  size_t nodes = 0;
  CHECK_OK(mydevGraphGetNodeCount(graph, &nodes));
  CHECK(nodes == 5);
  mydevGraphExec_t exec = nullptr;
  CHECK_OK(mydevGraphInstantiate(&exec, graph));
  mydevStream_t on_device0 = nullptr;
  CHECK_OK(mydevStreamCreate(&on_device0, 0, 0));
  CHECK_STATUS(mydevGraphLaunch(exec, on_device0), mydevErrorInvalidValue);
  CHECK_OK(mydevGraphLaunch(exec, main));
  CHECK_OK(mydevGraphLaunch(exec, main));
  unsigned char host[4096];
  CHECK_OK(mydevMemcpy(host, b, 4096, mydevMemcpyDeviceToHost, main));
  CHECK(host[0] == 7 && host[4095] == 7);
  CHECK(order == "abcabc");
  CHECK_OK(mydevGraphExecDestroy(exec));
  CHECK_OK(mydevGraphDestroy(graph));
  CHECK_OK(mydevFree(a));
  CHECK_OK(mydevFree(b));
  CHECK_OK(mydevEventDestroy(fork));
  CHECK_OK(mydevEventDestroy(join));
  CHECK_OK(mydevStreamDestroy(main));
  CHECK_OK(mydevStreamDestroy(side));
  CHECK_OK(mydevStreamDestroy(on_device0));
}

// CUDA refuses to end a capture while a joined stream's work is not joined
// back (cudaErrorStreamCaptureUnjoined); so does the driver, naming the
// stream, and every stream leaves capture usable.
void test_unjoined_side_stream_fails_the_capture() {
  mydevStream_t main = nullptr;
  mydevStream_t side = nullptr;
  mydevStream_t third = nullptr;
  CHECK_OK(mydevStreamCreate(&main, 0, 0));
  CHECK_OK(mydevStreamCreate(&side, 0, 0));
  CHECK_OK(mydevStreamCreate(&third, 0, 0));
  mydevEvent_t fork = nullptr;
  mydevEvent_t join = nullptr;
  CHECK_OK(mydevEventCreate(&fork, mydevEventDisableTiming));
  CHECK_OK(mydevEventCreate(&join, mydevEventDisableTiming));
  std::atomic<int> ran{0};
  const auto count = [&] { ran.fetch_add(1); };
  char side_name[32];
  std::snprintf(side_name, sizeof(side_name), "%p", static_cast<void*>(side));
  const int released_before = g_released.load();
  mydevGraph_t graph = reinterpret_cast<mydevGraph_t>(1);

  // Never joined back.
  CHECK_OK(mydevStreamBeginCapture(main, mydevStreamCaptureModeGlobal));
  CHECK_OK(launch(main, count));
  CHECK_OK(mydevEventRecord(fork, main));
  CHECK_OK(mydevStreamWaitEvent(side, fork));
  CHECK_OK(launch(side, count));
  CHECK_STATUS(mydevStreamEndCapture(main, &graph),
               mydevErrorStreamCaptureUnjoined);
  CHECK(graph == nullptr);
  CHECK(last_message_has("has unjoined work"));
  CHECK(last_message_has(side_name));
  CHECK(g_released == released_before + 2);  // the dropped work is released
  mydevStreamCaptureStatus status = mydevStreamCaptureStatusActive;
  CHECK_OK(mydevStreamGetCaptureInfo(side, &status, nullptr));
  CHECK(status == mydevStreamCaptureStatusNone);

  // Joined back, then more work on the side stream: unjoined again.
  CHECK_OK(mydevStreamBeginCapture(main, mydevStreamCaptureModeGlobal));
  CHECK_OK(mydevEventRecord(fork, main));
  CHECK_OK(mydevStreamWaitEvent(side, fork));
  CHECK_OK(launch(side, count));
  CHECK_OK(mydevEventRecord(join, side));
  CHECK_OK(mydevStreamWaitEvent(main, join));
  CHECK_OK(launch(side, count));
  CHECK_STATUS(mydevStreamEndCapture(main, &graph),
               mydevErrorStreamCaptureUnjoined);
  CHECK(last_message_has(side_name));

  // A side stream that joined but recorded nothing has nothing to join.
  CHECK_OK(mydevStreamBeginCapture(main, mydevStreamCaptureModeGlobal));
  CHECK_OK(mydevEventRecord(fork, main));
  CHECK_OK(mydevStreamWaitEvent(side, fork));
  CHECK_OK(launch(main, count));
  CHECK_OK(mydevStreamEndCapture(main, &graph));
  CHECK_OK(mydevGraphDestroy(graph));

  // Joined back through another stream: main follows side through third.
  CHECK_OK(mydevStreamBeginCapture(main, mydevStreamCaptureModeGlobal));
  CHECK_OK(mydevEventRecord(fork, main));
  CHECK_OK(mydevStreamWaitEvent(side, fork));
  CHECK_OK(launch(side, count));
  CHECK_OK(mydevEventRecord(join, side));
  CHECK_OK(mydevStreamWaitEvent(third, join));
  CHECK_OK(launch(third, count));
  CHECK_OK(mydevEventRecord(join, third));
  CHECK_OK(mydevStreamWaitEvent(main, join));
  CHECK_OK(mydevStreamEndCapture(main, &graph));
  mydevGraphExec_t exec = nullptr;
  CHECK_OK(mydevGraphInstantiate(&exec, graph));
  CHECK(ran == 0);
  CHECK_OK(mydevGraphLaunch(exec, main));
  CHECK_OK(mydevStreamSynchronize(main));
  CHECK(ran == 2);

  // Every stream runs work again after the failed captures.
  for (mydevStream_t stream : {main, side, third}) {
    CHECK_OK(launch(stream, count));
    CHECK_OK(mydevStreamSynchronize(stream));
  }
  CHECK(ran == 5);
  CHECK_OK(mydevGraphExecDestroy(exec));
  CHECK_OK(mydevGraphDestroy(graph));
  CHECK_OK(mydevEventDestroy(fork));
  CHECK_OK(mydevEventDestroy(join));
  for (mydevStream_t stream : {main, side, third}) {
    CHECK_OK(mydevStreamDestroy(stream));
  }
}

void test_replay_is_one_activity_record() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  std::atomic<int> counter{0};
  mydevGraph_t graph = nullptr;
  mydevGraphExec_t exec = capture_counter(stream, &counter, 20, &graph);
  CHECK_OK(mydevActivityEnable(1));
  CHECK_OK(mydevGraphLaunch(exec, stream));
  CHECK_OK(mydevStreamSynchronize(stream));
  CHECK_OK(mydevActivityEnable(0));
  mydevActivityRecord records[8];
  size_t count = 0;
  CHECK_OK(mydevActivityFlush(records, 8, &count));
  CHECK(count == 1);
  CHECK(count == 1 && std::strcmp(records[0].name, "mydevGraphLaunch") == 0);
  CHECK(counter == 20);
  CHECK_OK(mydevGraphExecDestroy(exec));
  CHECK_OK(mydevGraphDestroy(graph));
  CHECK_OK(mydevStreamDestroy(stream));
}

}  // namespace

int main() {
  test_capture_and_replay();
  test_refusals_leave_stream_usable();
  test_capture_modes();
  test_multi_stream_capture();
  test_unjoined_side_stream_fails_the_capture();
  test_replay_is_one_activity_record();
  std::printf("graph_test: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
