// The C shims Inductor's C++ wrappers call for extern kernels on mydev
// (aoti_torch_<device>_<op>), for the JIT wrapper (mydev_cpp_wrapper.h) and
// AOTInductor models (mydev_aoti.h) alike: they run the ATen ops on the
// device, stream-ordered, through the launch table of
// mydev_compiled_kernel.h. Failures throw.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include "mydev_compiled_kernel.h"

namespace mydev_compiled {

inline MydevTensorHandle handle(AtenTensorHandle tensor) {
  return reinterpret_cast<MydevTensorHandle>(tensor);
}

inline AOTITorchError shim_result(int status) {
  check(status);
  return AOTI_TORCH_SUCCESS;
}

}  // namespace mydev_compiled

inline AOTITorchError aoti_torch_mydev_mm_out(AtenTensorHandle out,
                                              AtenTensorHandle self,
                                              AtenTensorHandle mat2) {
  using namespace mydev_compiled;
  return shim_result(abi().mm_out(handle(out), handle(self), handle(mat2)));
}

inline AOTITorchError aoti_torch_mydev_addmm_out(AtenTensorHandle out,
                                                 AtenTensorHandle self,
                                                 AtenTensorHandle mat1,
                                                 AtenTensorHandle mat2,
                                                 double beta, double alpha) {
  using namespace mydev_compiled;
  return shim_result(abi().addmm_out(handle(out), handle(self), handle(mat1),
                                     handle(mat2), beta, alpha));
}

inline AOTITorchError aoti_torch_mydev_bmm_out(AtenTensorHandle out,
                                               AtenTensorHandle self,
                                               AtenTensorHandle mat2) {
  using namespace mydev_compiled;
  return shim_result(abi().bmm_out(handle(out), handle(self), handle(mat2)));
}

inline AOTITorchError aoti_torch_mydev_baddbmm_out(AtenTensorHandle out,
                                                   AtenTensorHandle self,
                                                   AtenTensorHandle batch1,
                                                   AtenTensorHandle batch2,
                                                   double beta, double alpha) {
  using namespace mydev_compiled;
  return shim_result(abi().baddbmm_out(
      handle(out), handle(self), handle(batch1), handle(batch2), beta, alpha));
}

inline AOTITorchError aoti_torch_mydev__int_mm_out(AtenTensorHandle out,
                                                   AtenTensorHandle self,
                                                   AtenTensorHandle mat2) {
  using namespace mydev_compiled;
  return shim_result(abi().int_mm_out(handle(out), handle(self), handle(mat2)));
}

inline AOTITorchError aoti_torch_mydev_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding,
    int64_t padding_len_, const int64_t* dilation, int64_t dilation_len_,
    int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0) {
  using namespace mydev_compiled;
  return shim_result(abi().convolution(
      handle(input), handle(weight), reinterpret_cast<MydevTensorHandle*>(bias),
      stride, stride_len_, padding, padding_len_, dilation, dilation_len_,
      transposed, output_padding, output_padding_len_, groups,
      reinterpret_cast<MydevTensorHandle*>(ret0)));
}

inline AOTITorchError
aoti_torch_mydev__scaled_dot_product_fused_attention_overrideable(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value,
    AtenTensorHandle* attn_bias, double dropout_p, int32_t is_causal,
    int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3,
    int64_t* ret4, int64_t* ret5, AtenTensorHandle* ret6,
    AtenTensorHandle* ret7, AtenTensorHandle* ret8) {
  using namespace mydev_compiled;
  auto out = [](AtenTensorHandle* result) {
    return reinterpret_cast<MydevTensorHandle*>(result);
  };
  return shim_result(abi().attention(
      handle(query), handle(key), handle(value), out(attn_bias), dropout_p,
      is_causal, return_debug_mask, scale, out(ret0), out(ret1), out(ret2),
      out(ret3), ret4, ret5, out(ret6), out(ret7), out(ret8)));
}

inline AOTITorchError
aoti_torch_mydev__scaled_dot_product_fused_attention_overrideable_backward(
    AtenTensorHandle grad_out, AtenTensorHandle query, AtenTensorHandle key,
    AtenTensorHandle value, AtenTensorHandle attn_bias,
    const int32_t* grad_input_mask, int64_t grad_input_mask_len_,
    AtenTensorHandle out, AtenTensorHandle logsumexp,
    AtenTensorHandle cum_seq_q, AtenTensorHandle cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, int32_t is_causal,
    AtenTensorHandle philox_seed, AtenTensorHandle philox_offset, double* scale,
    AtenTensorHandle* ret0, AtenTensorHandle* ret1, AtenTensorHandle* ret2,
    AtenTensorHandle* ret3) {
  using namespace mydev_compiled;
  auto result = [](AtenTensorHandle* r) {
    return reinterpret_cast<MydevTensorHandle*>(r);
  };
  return shim_result(abi().attention_backward(
      handle(grad_out), handle(query), handle(key), handle(value),
      handle(attn_bias), grad_input_mask, grad_input_mask_len_, handle(out),
      handle(logsumexp), handle(cum_seq_q), handle(cum_seq_k), max_q, max_k,
      dropout_p, is_causal, handle(philox_seed), handle(philox_offset), scale,
      result(ret0), result(ret1), result(ret2), result(ret3)));
}
