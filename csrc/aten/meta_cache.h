// Output metadata of ops on the device-kernel path, cached.
//
// An op's output shapes, strides and dtypes depend only on its arguments'
// metadata and non-tensor values, never on tensor data (ops whose outputs
// depend on data have no usable Meta kernel and take the synchronous path).
// Running the Meta kernel costs from a few to ~50 microseconds (some are
// Python); a training loop repeats the same calls, so the result is cached
// per (operator, argument signature) on each host thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>

#include <exception>
#include <memory>
#include <vector>

namespace mydev {

struct TensorMeta {
  bool defined = true;  // false: the op returned an undefined tensor
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset;  // relative to the first argument element (views)
  at::ScalarType dtype;
  bool is_conj = false;  // lazy conjugate/negative bits (views may set them)
  bool is_neg = false;
};

// One return of an op: a tensor, or a list of tensors.
struct ReturnMeta {
  bool is_list = false;
  std::vector<TensorMeta> tensors;

  bool has_undefined() const {
    for (const TensorMeta& t : tensors) {
      if (!t.defined) return true;
    }
    return false;
  }
};

using OutputMetadata = std::vector<ReturnMeta>;

// A call that writes a tensor overlapping another of its arguments, which
// the CPU and cuda refuse at the call: `error` is the Meta kernel's own
// exception, to be raised as it is (not a reason to try another path).
struct ArgumentOverlapError {
  std::exception_ptr error;
};

// The output metadata of `op` called with `args` (which live on mydev and
// the CPU). Throws whatever the Meta kernel throws (nothing is cached then),
// or ArgumentOverlapError. A tensor the op writes that is also another of
// its arguments (self passed again as out=) is one meta tensor for the
// Meta kernel too.
std::shared_ptr<const OutputMetadata> outputMetadata(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

}  // namespace mydev
