// The device's own kernel for index_select along the first dimension of a
// contiguous tensor: whole rows picked by a vector of indices. An
// embedding lookup is one (nn.Embedding's forward is index_select of the
// weight's rows), so is a beam search's reorder of its cache, and a decode
// step makes them one token at a time.
//
// ATen's CPU kernel for such a call is a few row copies, but reaching it
// on the device costs a boxed call over host views, made on the host
// thread at every launch; this kernel holds only device addresses and
// sizes, so the host's part of a lookup is the same as an add's.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

namespace mydev {

// Launches aten::index_select (functional or out=), called with the device
// arguments `device_args`, as the row kernel on the current stream writing
// `result` (already shaped by the op's Meta kernel) if the call qualifies:
// dim 0 of a contiguous tensor of at least one dimension, an int64 or int32
// index of at most one dimension, contiguous, a contiguous result of the
// same dtype that overlaps neither, and at most kMaxRowGatherBytes to copy
// (ATen's kernel copies larger ones with a thread team). An index out of
// range raises ATen's IndexError from the kernel, as the CPU kernel run on
// the device would. Returns false, having done nothing, otherwise.
bool launchIndexSelectRows(const c10::OperatorHandle& op,
                           c10::ArrayRef<c10::IValue> device_args,
                           const at::Tensor& result);

}  // namespace mydev
