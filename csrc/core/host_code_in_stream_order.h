// Host code that runs at a precise point of a stream's order.
//
// The simulator's Triton kernels are executed by a Python interpreter. Python
// cannot run on a stream's executor thread: the host thread may hold the GIL
// while it waits, in a synchronizing call, for that very stream. So the stream
// gets a placeholder kernel that parks it, and the launching thread runs the
// code itself while the stream is parked. To every other piece of work the
// code is an ordinary kernel of that stream: it starts after everything
// enqueued on the stream before it and finishes before anything enqueued
// after it starts (events recorded later included).
#pragma once

#include <functional>

#include "../runtime/mydev_runtime.h"

namespace mydev {

// Runs `body` on the calling thread once the work enqueued on `stream` before
// this call has completed, holding back the work enqueued after it until
// `body` returns. Blocks the caller for that time (the caller must not hold
// locks that work queued ahead of it needs). `name` names the placeholder in
// driver errors and must outlive the call. An exception from `body` reaches
// the caller after the stream was released; the stream itself stays usable.
void runHostCodeInStreamOrder(mydevStream_t stream, const char* name,
                              const std::function<void()>& body);

}  // namespace mydev
