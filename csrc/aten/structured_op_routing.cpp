// ATen's structured ops (add, mul, mm, addmm, softmax, ...) reach a backend
// without kernels of its own through a generic kernel
// (CompositeExplicitAutogradNonFunctional) that computes the output's
// metadata on the host with the op's meta function (a TensorIterator for
// elementwise ops), allocates the output, and calls the op's out= overload,
// which the device-kernel path then serves. The device-kernel path has the
// output metadata already (meta_cache.h), so for a one-element op that
// generic kernel was a quarter of the host's time. Routing the functional
// overloads to the device-kernel path directly runs the same Meta kernel
// (cached) and the same out= CPU kernel, once.
#include <torch/library.h>

#include <string>

#include "device_kernel_path.h"
#include "native_meta_kernels.h"
#include "op_schema.h"
#include "structured_op_routing.h"

namespace mydev {
namespace {

// Functional ops (the in-place ones keep their out= overload's kernel name
// in profiles) with tensor results and no generator, whose C++ Meta kernel
// the device-kernel path runs itself: a Python Meta kernel would import
// torch._dynamo on a program's first ops (native_meta_kernels.h).
bool routable(const c10::OperatorHandle& op) {
  return !op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) &&
         hasNativeMetaKernel(op.operator_name()) &&
         returnsOnlyTensors(op.schema()) && !takesGenerator(op.schema()) &&
         outVariantOf(op).has_value();
}

}  // namespace

void routeStructuredOpsToDeviceKernelPath() {
  // Once, after every static registration of this library (an op with a
  // mydev kernel of its own keeps it). Never destroyed: the routes last
  // until the process exits.
  static const torch::Library* const library = [] {
    auto* routes =
        new torch::Library(torch::Library::IMPL, "aten",
                           c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
    for (const c10::OperatorName& name : dispatcher.getAllOpNamesForDispatchKey(
             c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
      const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
      if (op.has_value() && routable(*op)) {
        const std::string qualified =
            name.overload_name.empty() ? name.name
                                       : name.name + "." + name.overload_name;
        routes->impl(qualified.c_str(),
                     torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
      }
    }
    return routes;
  }();
  (void)library;
}

}  // namespace mydev
