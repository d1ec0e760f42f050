// Where an op's Meta kernel and its CPU kernel disagree about outputs, the
// device follows the CPU kernel (it is what runs): the Meta kernel's output
// metadata is corrected to the CPU kernel's contract before outputs are
// allocated. Applies to every overload of the ops listed (functional,
// in-place, out=).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "meta_cache.h"

namespace mydev {

void applyCpuOutputContract(const c10::OperatorHandle& op,
                            c10::ArrayRef<c10::IValue> args,
                            OutputMetadata& metadata);

}  // namespace mydev
