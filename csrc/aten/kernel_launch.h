// Enqueueing host code as a mydev kernel on the current stream.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/util/Exception.h>

#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "../core/kernel_errors.h"
#include "../core/mydev_stream.h"
#include "../core/runtime_check.h"

namespace mydev {

namespace detail {
// A launch's closure is made on the launching (host) thread and done with on
// the stream's executor. It is destroyed back on a launching thread, because
// malloc's per-thread caches only pay when memory is freed by the thread that
// allocated it: freed on the executor, every launch's arguments sent the host
// thread down malloc's slow path (a fifth of a one-element op's host time).
struct ClosureBase {
  virtual ~ClosureBase() = default;
  ClosureBase* next_retired = nullptr;
};

template <typename Body>
struct KernelClosure final : ClosureBase {
  KernelClosure(c10::DeviceIndex device_index, Body&& kernel_body)
      : device(device_index), body(std::move(kernel_body)) {}
  c10::DeviceIndex device;
  Body body;
};

// The driver is done with `closure` (any thread, lock-free): it is queued
// for destroyRetiredClosures.
void retireClosure(ClosureBase* closure);
// Destroys a few retired closures on the calling thread; every launch calls
// it first, so the next closure reuses that memory.
void destroyRetiredClosures();

// The driver owns the closure (mydevLaunchKernelEx): a captured kernel runs
// at every replay of its graph, and releaseKernelBody retires it.
template <typename Body>
void runKernelBody(void* user_data) {
  auto* closure = static_cast<KernelClosure<Body>*>(user_data);
  // Kernels run ATen CPU kernels on host views; autograd was handled when
  // the op was dispatched on the host, so skip it here.
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    closure->body();
  } catch (const c10::Error& error) {
    // The driver gets the message (what() would add a C++ backtrace that
    // buries it); the exception itself is kept so that the synchronizing
    // call raises it with its own type.
    const std::string message = error.what_without_backtrace();
    recordKernelException(closure->device, std::current_exception(), message);
    throw std::runtime_error(message);
  }
}

template <typename Body>
void releaseKernelBody(void* user_data) {
  retireClosure(static_cast<KernelClosure<Body>*>(user_data));
}
}  // namespace detail

// Runs `body` on `stream` after the work already queued there. `name` must be
// a string literal (or otherwise outlive the kernel): errors quote it.
//
// A body captures host views (hostView), never owning device tensors: the
// caching allocator makes reuse safe in stream order, as on CUDA, and a body
// that dropped the last reference on the executor thread would re-enter the
// allocator from there.
template <typename Body>
void launchKernel(const char* name, const MydevStream& stream, Body&& body) {
  using Stored = std::decay_t<Body>;
  detail::destroyRetiredClosures();
  auto owned = std::make_unique<detail::KernelClosure<Stored>>(
      stream.device_index(), Stored(std::forward<Body>(body)));
  const mydevError_t status =
      mydevLaunchKernelEx(stream.raw(), name, &detail::runKernelBody<Stored>,
                          &detail::releaseKernelBody<Stored>, owned.get());
  // Success: the executor owns the body now. LaunchFailure (launch blocking
  // reporting a kernel error) means the body already ran and was freed.
  if (status == mydevSuccess || status == mydevErrorLaunchFailure) {
    owned.release();
  }
  MYDEV_CHECK(status);
}

template <typename Body>
void launchKernel(const char* name, Body&& body) {
  launchKernel(name, getCurrentStream(), std::forward<Body>(body));
}

// Runs `body` as a kernel on the current stream and waits for it, for results
// the host needs at once (data-dependent shapes, host values). An exception
// the body throws is rethrown here with its own type (IndexError stays
// IndexError) rather than becoming a kernel error.
template <typename Body>
void runKernelAndWait(const char* name, Body&& body) {
  auto error = std::make_shared<std::exception_ptr>();
  launchKernel(name, [error, body = std::forward<Body>(body)]() mutable {
    try {
      body();
    } catch (...) {
      *error = std::current_exception();
    }
  });
  const MydevStream stream = getCurrentStream();
  try {
    stream.synchronize();
  } catch (c10::Error& refused) {
    // The driver names the refused synchronize; the user needs the op.
    mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
    if (mydevStreamGetCaptureInfo(stream.raw(), &status, nullptr) ==
            mydevSuccess &&
        status != mydevStreamCaptureStatusNone) {
      refused.add_context(c10::str(
          name,
          " needs its results on the host at once (its output shape "
          "depends on the data, or it has no Meta kernel), so it cannot be "
          "captured in a graph"));
    }
    throw;
  }
  if (*error) {
    std::rethrow_exception(*error);
  }
}

}  // namespace mydev
