// An out-of-tree op for mydev: myext::saxpy(x, y, alpha) = alpha * x + y.
//
// Built by torch.utils.cpp_extension against torch and torch-mydev's public
// header (mydev_extension.h, libtorch_mydev.so): see README.md. The op is
// defined with TORCH_LIBRARY and given a kernel per dispatch key; the mydev
// kernel is enqueued on the current mydev stream and reaches device memory
// only through kernel pointers, as a CUDA kernel reaches global memory.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <mydev_extension.h>

namespace {

void checkInputs(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "myext::saxpy: expected float32 tensors, got ", x.scalar_type(),
              " and ", y.scalar_type());
  TORCH_CHECK(x.sizes() == y.sizes(),
              "myext::saxpy: x and y must have the same shape, got ", x.sizes(),
              " and ", y.sizes());
  TORCH_CHECK(x.device() == y.device(),
              "myext::saxpy: x and y must be on the same device, got ",
              x.device(), " and ", y.device());
}

// The kernel body, shared by the CPU and the mydev kernel: one element per
// iteration, over raw pointers.
void saxpyLoop(const float* x, const float* y, float* out, int64_t n,
               float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = alpha * x[i] + y[i];
  }
}

at::Tensor saxpyCpu(const at::Tensor& x, const at::Tensor& y, double alpha) {
  checkInputs(x, y);
  const at::Tensor xc = x.contiguous();
  const at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  saxpyLoop(xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(),
            out.numel(), static_cast<float>(alpha));
  return out;
}

at::Tensor saxpyMydev(const at::Tensor& x, const at::Tensor& y, double alpha) {
  checkInputs(x, y);
  // contiguous() and empty_like() run on the device, in stream order.
  const at::Tensor xc = x.contiguous();
  const at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  // Kernel-side addresses of the device buffers, computed on the host; only
  // the kernel dereferences them. The lambda captures these values, not the
  // tensors: the caching allocator keeps memory freed meanwhile safe to reuse
  // in stream order.
  const auto* x_data =
      static_cast<const float*>(mydev::ext::kernelPointer(xc.data_ptr()));
  const auto* y_data =
      static_cast<const float*>(mydev::ext::kernelPointer(yc.data_ptr()));
  auto* out_data =
      static_cast<float*>(mydev::ext::kernelPointer(out.data_ptr()));
  const int64_t n = out.numel();
  const float a = static_cast<float>(alpha);
  // The current stream of the inputs' device (not necessarily the current
  // device): the op returns at once, the kernel runs after the work queued
  // before it.
  mydev::ext::launchKernel("myext::saxpy",
                           mydev::ext::currentStream(x.device().index()),
                           [=] { saxpyLoop(x_data, y_data, out_data, n, a); });
  return out;
}

// Shapes only: torch.compile and FakeTensor trace the op through this.
at::Tensor saxpyMeta(const at::Tensor& x, const at::Tensor& y, double) {
  checkInputs(x, y);
  return at::empty_like(
      x, x.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace

TORCH_LIBRARY(myext, m) {
  m.def("saxpy(Tensor x, Tensor y, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(myext, CPU, m) { m.impl("saxpy", &saxpyCpu); }

// PrivateUse1 is mydev's dispatch key.
TORCH_LIBRARY_IMPL(myext, PrivateUse1, m) { m.impl("saxpy", &saxpyMydev); }

TORCH_LIBRARY_IMPL(myext, Meta, m) { m.impl("saxpy", &saxpyMeta); }
