// What the C++ wrapper Inductor generates for mydev (cpp_wrapper=True)
// includes: the CPU wrapper runtime (tensor handles, allocation through the
// dispatcher), the launch contract and mydev's C shims (mydev_c_shims.h).
// Failures throw: the wrapper's entry point turns the exception into a
// Python RuntimeError carrying its message. AOTInductor models include
// mydev_aoti.h instead.
#pragma once

#include <torch/csrc/inductor/cpp_wrapper/cpu.h>

#include "mydev_c_shims.h"
