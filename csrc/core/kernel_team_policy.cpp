// When the simulator may size its kernels' host teams to the host's load
// (mydevSetFixedKernelTeamQuery): not while torch.use_deterministic_algorithms
// is on, since a parallel reduction's last bits depend on the team's size.
// Registered when the library loads, so C++ programs without Python (an
// AOTInductor runner) get the same rule.
#include <ATen/Context.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {
namespace {

int resultsMustNotDependOnLoad() {
  return at::globalContext().deterministicAlgorithms() ? 1 : 0;
}

struct RegisterKernelTeamPolicy {
  RegisterKernelTeamPolicy() {
    mydevSetFixedKernelTeamQuery(&resultsMustNotDependOnLoad);
  }
} register_kernel_team_policy;

}  // namespace
}  // namespace mydev
