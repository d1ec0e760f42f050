// Random ops on mydev draw from the device's generator (csrc/core/generator.h).
//
// The counter-based kernels (philox_random_ops.cpp) reserve their numbers
// with reservePhilox. The other random ops run ATen's CPU kernels, which
// take CPU generators: such a kernel gets a CPU generator seeded from the
// mydev generator's (seed, offset), and the offset advances by the numbers
// the op may draw. Values then depend only on the mydev generator's state:
// the same seed gives the same values, get/set_rng_state reproduces them,
// the CPU generator is untouched, and DTensor can steer each rank through
// the offset. Inside a graph both kinds draw fresh numbers at each replay.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <optional>

#include "../core/generator.h"

namespace mydev {

// Reserves `draws` numbers of the mydev generator an op on `device` should
// use (`requested`, or the device's default one; a generator of another
// device type is refused, as CUDA refuses a CPU generator), under the
// generator's mutex. Call it on the host, in program order.
PhiloxInputs reservePhilox(const std::optional<at::Generator>& requested,
                           c10::DeviceIndex device, uint64_t draws);

// A CPU generator for ATen's CPU kernel of an op on `device`, standing in
// for the `requested` one: seeded from reservePhilox(requested, device,
// draws). During a graph capture it is seeded by a kernel this enqueues on
// the current stream, from the replay's (seed, offset): launch the op's
// kernel next, on the same stream.
at::Generator hostGeneratorFor(const std::optional<at::Generator>& requested,
                               c10::DeviceIndex device, uint64_t draws);

}  // namespace mydev
