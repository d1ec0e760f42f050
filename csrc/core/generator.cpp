#include "generator.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <cstring>

#include "device.h"
#include "mydev_stream.h"

namespace mydev {

MydevGeneratorImpl::MydevGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void MydevGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

void MydevGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, kDeviceName,
              " generator offset must be a multiple of 4, got ", offset);
  offset_ = offset;
}

uint64_t MydevGeneratorImpl::get_offset() const { return offset_; }

uint64_t MydevGeneratorImpl::current_seed() const { return seed_; }

uint64_t MydevGeneratorImpl::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom(/*is_cuda=*/true));
  return seed_;
}

void MydevGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateSize, kDeviceName,
              " RNG state must be ", kStateSize,
              " bytes (seed: uint64, offset: int64), got ", new_state.numel());
  const auto* bytes = new_state.data_dtype_initialized<uint8_t>();
  uint64_t seed = 0;
  int64_t offset = 0;
  std::memcpy(&seed, bytes, sizeof(seed));
  std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
  TORCH_CHECK(offset >= 0 && offset % 4 == 0, kDeviceName,
              " RNG state has an invalid offset ", offset,
              " (must be non-negative and a multiple of 4)");
  seed_ = seed;
  offset_ = static_cast<uint64_t>(offset);
}

c10::intrusive_ptr<c10::TensorImpl> MydevGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)},
                                     at::TensorOptions().dtype(at::kByte));
  auto* bytes = state.data_ptr<uint8_t>();
  const auto offset = static_cast<int64_t>(offset_);
  std::memcpy(bytes, &seed_, sizeof(seed_));
  std::memcpy(bytes + sizeof(seed_), &offset, sizeof(offset));
  return state.getIntrusivePtr();
}

PhiloxInputs MydevGeneratorImpl::reserve(uint64_t increment) {
  const uint64_t rounded = ((increment + 3) / 4) * 4;
  if (capturing_ != nullptr) {
    const PhiloxInputs inputs{0, capture_offset_, capturing_};
    capture_offset_ += rounded;
    return inputs;
  }
  const PhiloxInputs inputs{seed_, offset_};
  offset_ += rounded;
  return inputs;
}

void MydevGeneratorImpl::captureBegin(
    std::shared_ptr<const GraphRngState> state) {
  TORCH_CHECK(capturing_ == nullptr, kDeviceName, ":",
              static_cast<int>(device().index()),
              "'s generator is already used by a graph being captured");
  capturing_ = std::move(state);
  capture_offset_ = 0;
}

uint64_t MydevGeneratorImpl::captureEnd() {
  capturing_ = nullptr;
  return capture_offset_;
}

MydevGeneratorImpl* MydevGeneratorImpl::clone_impl() const {
  auto* copy = new MydevGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  static std::array<std::once_flag, kMaxDevices> created;
  // Leaked: generators are used by tensors destroyed at interpreter exit.
  static auto* generators = new std::array<at::Generator, kMaxDevices>();
  if (device < 0) {
    device = currentDevice();
  }
  checkDeviceIndex(device);
  // Starts from the fixed default seed, as CUDA's default generators do.
  std::call_once(created[device], [device] {
    (*generators)[device] = at::make_generator<MydevGeneratorImpl>(device);
  });
  return (*generators)[device];
}

at::Generator newGenerator(c10::DeviceIndex device) {
  if (device < 0) {
    device = currentDevice();
  }
  checkDeviceIndex(device);
  return at::make_generator<MydevGeneratorImpl>(device);
}

}  // namespace mydev
