// The device's own kernels for whole rows picked by a vector of indices:
// index_select and advanced indexing (x[index]) gather them along the first
// dimension, index_fill writes a value into them along any dimension. An
// embedding lookup is a gather (nn.Embedding's forward is index_select of
// the weight's rows), so is a beam search's reorder of its cache, and a
// decode step makes them one token at a time; masking a few positions is a
// fill.
//
// ATen's CPU kernels for such calls are a few row copies, but reaching them
// on the device costs a boxed call over host views and a TensorIterator set
// up at every launch: microseconds of the executor's time per call, which a
// busy host does not hide (beside one busy process on 2 cores, x[index] and
// index_fill of one element took 1.7-2.0x the CPU's time). These kernels hold
// only device addresses and sizes, so a small call costs what an add does.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

namespace mydev {

// Each launches its ATen op, called with the device arguments `device_args`,
// as the device's kernel on the current stream writing `result` (already
// shaped by the op's Meta kernel) if the call qualifies, and returns false,
// having done nothing, otherwise. All of them take a contiguous tensor of at
// least one dimension, a contiguous int64 index, a contiguous result of the
// same dtype that overlaps no input but the one it updates in place, and at
// most kMaxRowBytes of result (ATen's kernels copy larger ones with a thread
// team). An index out of range raises ATen's IndexError with the CPU
// kernel's message from the kernel, as the CPU kernel run on the device
// would, at the next synchronizing call.

// aten::index_select (functional or out=) along dimension 0; the index may
// also be int32, of at most one dimension.
bool launchIndexSelectRows(const c10::OperatorHandle& op,
                           c10::ArrayRef<c10::IValue> device_args,
                           const at::Tensor& result);

// aten::index.Tensor with one index tensor, for dimension 0 (x[index]); the
// index may also be int32, of any shape, and negative indices count from
// the end.
bool launchIndexRows(const c10::OperatorHandle& op,
                     c10::ArrayRef<c10::IValue> device_args,
                     const at::Tensor& result);

// aten::index_fill.int_Scalar and its in-place form, along any dimension;
// negative indices count from the end. A value the dtype can't hold raises
// the CPU kernel's error at the call.
bool launchIndexFillRows(const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> device_args,
                         const at::Tensor& result);

}  // namespace mydev
