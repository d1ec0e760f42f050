#include "device_randomness.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "../core/device.h"
#include "../core/generator.h"
#include "../core/mydev_stream.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

// splitmix64's finaliser: nearby (seed, offset) pairs give unrelated seeds.
uint64_t mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// The CPU generator's seed for an op drawing at (seed, offset).
uint64_t hostSeed(const PhiloxInputs& inputs) {
  return mix(inputs.seed ^ mix(inputs.offset));
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
  if (inputs.graph == nullptr) {
    return at::make_generator<at::CPUGeneratorImpl>(hostSeed(inputs));
  }
  // Captured in a graph: the seed is the replay's, known only when the
  // kernels run. A kernel enqueued now, just before the op's own on the same
  // stream (the caller launches it next), seeds the generator that kernel
  // uses; each replay runs both again, with that replay's (seed, offset),
  // as CUDA's graph-safe kernels read theirs at run time.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
  launchKernel("mydev_seed_host_generator", getCurrentStream(device),
               [generator, inputs]() mutable {
                 const std::lock_guard<std::mutex> lock(generator.mutex());
                 generator.set_current_seed(hostSeed(inputs.atRun()));
               });
  return generator;
}

}  // namespace mydev
