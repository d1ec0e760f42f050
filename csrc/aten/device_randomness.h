// Random ops on mydev draw from the device's generator (csrc/core/generator.h).
//
// The simulator's kernels are ATen's CPU kernels, which take CPU generators.
// So a random kernel gets a CPU generator seeded from the mydev generator's
// (seed, offset), and the offset advances by the numbers the op may draw.
// Values then depend only on the mydev generator's state: the same seed
// gives the same values, get/set_rng_state reproduces them, the CPU
// generator is untouched, and DTensor can steer each rank through the offset.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <optional>

namespace mydev {

// The generator a kernel for an op on `device` should use in place of the
// `requested` one (none: the device's default generator; a mydev generator;
// anything else is refused, as CUDA refuses a CPU generator). Reserves
// `draws` numbers of the mydev generator; call it on the host, in program
// order.
at::Generator hostGeneratorFor(const std::optional<at::Generator>& requested,
                               c10::DeviceIndex device, uint64_t draws);

}  // namespace mydev
