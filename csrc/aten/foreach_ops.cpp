// The _foreach_* ops optimizers use (foreach=True) as single device kernels.
//
// For PrivateUse1, ATen's _foreach_* kernels are composites that loop over
// the tensor lists calling the per-tensor op, i.e. one device launch (and
// host-side dispatch) per tensor: an AdamW step over 200 parameters made
// thousands of launches. Routed to the device-kernel path instead, each
// _foreach_* call is one launch whose body runs the CPU implementation over
// host views of every tensor in the lists.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

#include "device_kernel_path.h"
#include "op_schema.h"

namespace mydev {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const c10::OperatorName& name :
       c10::Dispatcher::singleton().getAllOpNames()) {
    if (!isForeachOp(name)) {
      continue;
    }
    const std::string qualified = name.overload_name.empty()
                                      ? name.name
                                      : name.name + "." + name.overload_name;
    m.impl(qualified.c_str(),
           torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
  }
}

}  // namespace mydev
