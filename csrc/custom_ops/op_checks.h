// Argument checks shared by the fused ops' C++ entry points. The Python
// definitions (device_ext/ops/) check the same things first, with the same
// messages; these keep direct C++ callers from reaching a kernel with
// arguments outside its contract.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "../core/device.h"

namespace mydev::custom_ops {

inline bool isFusedDtype(c10::ScalarType type) {
  return type == c10::ScalarType::Float || type == c10::ScalarType::BFloat16 ||
         type == c10::ScalarType::Half;
}

// A floating tensor of a supported dtype on mydev or the CPU.
inline void checkActivation(const char* op, const char* arg,
                            const at::Tensor& t) {
  TORCH_CHECK(t.defined(), op, ": ", arg, " is undefined");
  TORCH_CHECK(t.device().is_cpu() || t.device().is_privateuseone(), op, ": ",
              arg, " must be on ", kDeviceName, " or the CPU, got ",
              t.device());
  TORCH_CHECK(t.layout() == c10::kStrided, op, ": ", arg,
              " must be a strided tensor, got ", t.layout());
  TORCH_CHECK(isFusedDtype(t.scalar_type()), op, ": ", arg,
              " must have dtype float32, bfloat16 or float16, got ",
              t.scalar_type());
}

inline void checkSameDevice(const char* op, const char* arg,
                            const at::Tensor& t, const char* ref_arg,
                            const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), op, ": ", arg,
              " must be on the same device as ", ref_arg, " (", ref.device(),
              "), got ", t.device());
}

// A parameter read in float32: the activation's dtype or float32.
inline void checkParamDtype(const char* op, const char* arg,
                            const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.scalar_type() == x.scalar_type() ||
                  t.scalar_type() == c10::ScalarType::Float,
              op, ": ", arg, " must have x's dtype (", x.scalar_type(),
              ") or float32, got ", t.scalar_type());
}

// What a kernel reads: dense, row-major memory. A device op on mydev (a copy
// enqueued on the current stream), never a trip through the host.
inline at::Tensor contiguousInput(const at::Tensor& t) {
  return t.resolve_neg().contiguous();
}

}  // namespace mydev::custom_ops
