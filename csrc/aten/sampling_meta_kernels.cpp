// C++ Meta kernels for draws that have no at::meta kernel: multinomial
// (sampling a language model's next token) and randperm. torch's Meta
// kernels for them are Python, and the first one a process runs imports
// sympy (native_meta_kernels.h). Each shapes its result as the CPU kernel
// does; a call it does not model throws, and the device-kernel path then
// runs the CPU kernel synchronously, which raises the CPU's own error at
// the call. The probabilities themselves are checked on the data, by the
// kernel, as on cuda.
#include <ATen/ops/empty.h>

#include "meta_layouts.h"
#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Tensor;

// multinomial's CPU kernel: int64 indices, n_samples per distribution.
Tensor multinomialMeta(const Tensor& self, int64_t n_samples, bool replacement,
                       std::optional<at::Generator> /*generator*/) {
  checkFloating(self, "multinomial");
  TORCH_CHECK((self.dim() == 1 || self.dim() == 2) && n_samples > 0 &&
                  (replacement || n_samples <= self.size(-1)),
              "multinomial: left to the CPU kernel");
  const auto options = self.options().dtype(at::kLong);
  if (self.dim() == 1) {
    return at::empty({n_samples}, options);
  }
  return at::empty({self.size(0), n_samples}, options);
}

// randperm is composite over this out= overload, whose CPU kernel resizes
// the output to n; outputs of a dtype that can hold every index exactly.
Tensor& randpermOutMeta(int64_t n, std::optional<at::Generator> /*generator*/,
                        Tensor& out) {
  TORCH_CHECK(n >= 0 && (out.scalar_type() == at::kLong ||
                         (out.scalar_type() == at::kInt &&
                          n <= std::numeric_limits<int32_t>::max())),
              "randperm: left to the CPU kernel");
  out.resize_({n});
  return out;
}

}  // namespace

void addSamplingMetaKernels(NativeMetaTable& table) {
  table.add<Tensor(const Tensor&, int64_t, bool, std::optional<at::Generator>)>(
      "aten::multinomial", "", &multinomialMeta);
  table.add<Tensor&(int64_t, std::optional<at::Generator>, Tensor&)>(
      "aten::randperm", "generator_out", &randpermOutMeta);
}

}  // namespace mydev
