// The function table that code torch.compile builds for mydev launches
// through (see device_ext/include/mydev_compiled_kernel.h for the contract):
// JIT kernel modules and wrappers get it from device_ext._C's capsule,
// AOTInductor models from the model loader (aoti_model_runner.cpp).
#include "compiled_kernel_abi.h"

#include <ATen/ops/_int_mm.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/mm.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>

#include "device.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

thread_local char last_error_message[512];

template <typename... Args>
void setLastError(const char* format, Args... args) {
  std::snprintf(last_error_message, sizeof(last_error_message), format,
                args...);
}

const char* lastError() { return last_error_message; }

void* kernelPointer(void* device_pointer) {
  return mydevKernelPointer(device_pointer);
}

int streamDevice(void* stream) {
  int device = -1;
  if (mydevStreamGetDevice(static_cast<mydevStream_t>(stream), &device) !=
      mydevSuccess) {
    setLastError("%s", mydevGetLastErrorMessage());
    return -1;
  }
  return device;
}

void* currentStream(int device) {
  try {
    return getCurrentStream(static_cast<c10::DeviceIndex>(device)).raw();
  } catch (const std::exception& error) {
    setLastError("%s", error.what());
    return nullptr;
  }
}

int exchangeDevice(int device) {
  try {
    const c10::DeviceIndex index = static_cast<c10::DeviceIndex>(device);
    checkDeviceIndex(index);
    const c10::DeviceIndex previous = currentDevice();
    if (index != previous) {
      MYDEV_CHECK(mydevSetDevice(index));
    }
    return previous;
  } catch (const std::exception& error) {
    setLastError("%s", error.what());
    return -1;
  }
}

struct CompiledKernel {
  MydevKernelBody run;
  void* payload;
};

void runCompiledKernel(void* user_data) {
  const std::unique_ptr<CompiledKernel> kernel(
      static_cast<CompiledKernel*>(user_data));
  kernel->run(kernel->payload);
}

int launch(void* stream, const char* name, MydevKernelBody run,
           MydevKernelBody discard, void* payload) {
  auto kernel = std::make_unique<CompiledKernel>(CompiledKernel{run, payload});
  const mydevError_t status =
      mydevLaunchKernel(static_cast<mydevStream_t>(stream), name,
                        &runCompiledKernel, kernel.get());
  if (status == mydevSuccess) {
    kernel.release();
    return 0;
  }
  if (status == mydevErrorLaunchFailure) {
    // Launch blocking: the kernel ran, failed, and freed what it owned.
    kernel.release();
  } else {
    discard(payload);
  }
  setLastError("%s", mydevGetLastErrorMessage());
  return 1;
}

// ---- extern kernels of the C++ wrapper (C shims)

at::Tensor& tensor(MydevTensorHandle handle) {
  return *torch::aot_inductor::tensor_handle_to_tensor_pointer(
      reinterpret_cast<AtenTensorHandle>(handle));
}

// Runs `op`, turning exceptions into a status and last_error().
template <typename Op>
int guarded(const char* name, Op&& op) {
  try {
    op();
    return 0;
  } catch (const c10::Error& error) {
    setLastError("%s: %s", name, error.what_without_backtrace());
  } catch (const std::exception& error) {
    setLastError("%s: %s", name, error.what());
  }
  return 1;
}

std::optional<at::Tensor> optionalTensor(MydevTensorHandle* handle) {
  return handle != nullptr && *handle != nullptr
             ? std::optional<at::Tensor>(tensor(*handle))
             : std::nullopt;
}

// Stores a new handle for `result` (NULL for an undefined tensor) in `slot`;
// the wrapper passes a NULL slot for results it does not use.
void storeResult(MydevTensorHandle* slot, at::Tensor result) {
  if (slot == nullptr) {
    return;
  }
  *slot = result.defined()
              ? reinterpret_cast<MydevTensorHandle>(
                    torch::aot_inductor::new_tensor_handle(std::move(result)))
              : nullptr;
}

void storeResult(int64_t* slot, const c10::SymInt& result) {
  if (slot != nullptr) {
    *slot = result.expect_int();
  }
}

int mmOut(MydevTensorHandle out, MydevTensorHandle self,
          MydevTensorHandle mat2) {
  return guarded("mm",
                 [&] { at::mm_out(tensor(out), tensor(self), tensor(mat2)); });
}

int addmmOut(MydevTensorHandle out, MydevTensorHandle self,
             MydevTensorHandle mat1, MydevTensorHandle mat2, double beta,
             double alpha) {
  return guarded("addmm", [&] {
    at::addmm_out(tensor(out), tensor(self), tensor(mat1), tensor(mat2), beta,
                  alpha);
  });
}

int bmmOut(MydevTensorHandle out, MydevTensorHandle self,
           MydevTensorHandle mat2) {
  return guarded("bmm",
                 [&] { at::bmm_out(tensor(out), tensor(self), tensor(mat2)); });
}

int baddbmmOut(MydevTensorHandle out, MydevTensorHandle self,
               MydevTensorHandle batch1, MydevTensorHandle batch2, double beta,
               double alpha) {
  return guarded("baddbmm", [&] {
    at::baddbmm_out(tensor(out), tensor(self), tensor(batch1), tensor(batch2),
                    beta, alpha);
  });
}

int intMmOut(MydevTensorHandle out, MydevTensorHandle self,
             MydevTensorHandle mat2) {
  return guarded("_int_mm", [&] {
    at::_int_mm_out(tensor(out), tensor(self), tensor(mat2));
  });
}

int convolution(MydevTensorHandle input, MydevTensorHandle weight,
                MydevTensorHandle* bias, const int64_t* stride,
                int64_t stride_len, const int64_t* padding, int64_t padding_len,
                const int64_t* dilation, int64_t dilation_len,
                int32_t transposed, const int64_t* output_padding,
                int64_t output_padding_len, int64_t groups,
                MydevTensorHandle* result) {
  return guarded("convolution", [&] {
    at::Tensor output = at::convolution(
        tensor(input), tensor(weight), optionalTensor(bias),
        {stride, static_cast<size_t>(stride_len)},
        {padding, static_cast<size_t>(padding_len)},
        {dilation, static_cast<size_t>(dilation_len)}, transposed != 0,
        {output_padding, static_cast<size_t>(output_padding_len)}, groups);
    storeResult(result, std::move(output));
  });
}

int attention(MydevTensorHandle query, MydevTensorHandle key,
              MydevTensorHandle value, MydevTensorHandle* attn_bias,
              double dropout_p, int32_t is_causal, int32_t return_debug_mask,
              double* scale, MydevTensorHandle* output,
              MydevTensorHandle* logsumexp, MydevTensorHandle* cum_seq_q,
              MydevTensorHandle* cum_seq_k, int64_t* max_q, int64_t* max_k,
              MydevTensorHandle* philox_seed, MydevTensorHandle* philox_offset,
              MydevTensorHandle* debug_attn_mask) {
  return guarded("_scaled_dot_product_fused_attention_overrideable", [&] {
    auto results = at::_scaled_dot_product_fused_attention_overrideable(
        tensor(query), tensor(key), tensor(value), optionalTensor(attn_bias),
        dropout_p, is_causal != 0, return_debug_mask != 0,
        scale != nullptr ? std::optional<double>(*scale) : std::nullopt);
    storeResult(output, std::get<0>(results));
    storeResult(logsumexp, std::get<1>(results));
    storeResult(cum_seq_q, std::get<2>(results));
    storeResult(cum_seq_k, std::get<3>(results));
    storeResult(max_q, std::get<4>(results));
    storeResult(max_k, std::get<5>(results));
    storeResult(philox_seed, std::get<6>(results));
    storeResult(philox_offset, std::get<7>(results));
    storeResult(debug_attn_mask, std::get<8>(results));
  });
}

int attentionBackward(
    MydevTensorHandle grad_out, MydevTensorHandle query, MydevTensorHandle key,
    MydevTensorHandle value, MydevTensorHandle attn_bias,
    const int32_t* grad_input_mask, int64_t grad_input_mask_len,
    MydevTensorHandle out, MydevTensorHandle logsumexp,
    MydevTensorHandle cum_seq_q, MydevTensorHandle cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, int32_t is_causal,
    MydevTensorHandle philox_seed, MydevTensorHandle philox_offset,
    double* scale, MydevTensorHandle* grad_query, MydevTensorHandle* grad_key,
    MydevTensorHandle* grad_value, MydevTensorHandle* grad_attn_bias) {
  return guarded(
      "_scaled_dot_product_fused_attention_overrideable_backward", [&] {
        TORCH_CHECK(grad_input_mask_len == 4, "expected 4 gradient flags, got ",
                    grad_input_mask_len);
        std::array<bool, 4> mask{};
        for (size_t i = 0; i < mask.size(); ++i) {
          mask[i] = grad_input_mask[i] != 0;
        }
        auto maybe = [](MydevTensorHandle handle) {
          return handle != nullptr ? tensor(handle) : at::Tensor();
        };
        auto grads =
            at::_scaled_dot_product_fused_attention_overrideable_backward(
                tensor(grad_out), tensor(query), tensor(key), tensor(value),
                maybe(attn_bias), mask, tensor(out), tensor(logsumexp),
                maybe(cum_seq_q), maybe(cum_seq_k), max_q, max_k, dropout_p,
                is_causal != 0, maybe(philox_seed), maybe(philox_offset),
                scale != nullptr ? std::optional<double>(*scale)
                                 : std::nullopt);
        storeResult(grad_query, std::get<0>(grads));
        storeResult(grad_key, std::get<1>(grads));
        storeResult(grad_value, std::get<2>(grads));
        storeResult(grad_attn_bias, std::get<3>(grads));
      });
}

const MydevCompiledKernelAbi kAbi{MYDEV_COMPILED_KERNEL_ABI_VERSION,
                                  nullptr,
                                  &kernelPointer,
                                  &streamDevice,
                                  &currentStream,
                                  &exchangeDevice,
                                  &launch,
                                  &lastError,
                                  &mmOut,
                                  &addmmOut,
                                  &bmmOut,
                                  &baddbmmOut,
                                  &intMmOut,
                                  &convolution,
                                  &attention,
                                  &attentionBackward};

}  // namespace

const MydevCompiledKernelAbi& compiledKernelAbi() { return kAbi; }

void setCompiledKernelError(const char* message) {
  setLastError("%s", message);
}

}  // namespace mydev
