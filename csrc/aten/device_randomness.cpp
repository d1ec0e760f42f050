#include "device_randomness.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "../core/device.h"
#include "../core/generator.h"

namespace mydev {
namespace {

// splitmix64's finaliser: nearby (seed, offset) pairs give unrelated seeds.
uint64_t mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

}  // namespace

PhiloxInputs reservePhilox(const std::optional<at::Generator>& requested,
                           c10::DeviceIndex device, uint64_t draws) {
  at::Generator source = requested.has_value() && requested->defined()
                             ? *requested
                             : defaultGenerator(device);
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a '", kDeviceName,
              "' device type for generator but found '", source.device().type(),
              "'");
  auto* impl = at::check_generator<MydevGeneratorImpl>(source);
  const std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->reserve(draws);
}

at::Generator hostGeneratorFor(const std::optional<at::Generator>& requested,
                               c10::DeviceIndex device, uint64_t draws) {
  const PhiloxInputs inputs = reservePhilox(requested, device, draws);
  // The CPU generator is seeded here, on the host: every replay of a graph
  // would draw the same numbers.
  TORCH_CHECK(inputs.graph == nullptr,
              "this random op runs ATen's CPU kernel with a generator seeded "
              "on the host, so it cannot be captured in a ",
              kDeviceName,
              " graph (its replays would repeat the same numbers); the "
              "counter-based ops (uniform_, normal_, bernoulli_, dropout, "
              "exponential_, random_, randint) can");
  return at::make_generator<at::CPUGeneratorImpl>(
      mix(inputs.seed ^ mix(inputs.offset)));
}

}  // namespace mydev
