// The mydev random number generator: a Philox counter-based generator whose
// whole state is (seed, offset), as on CUDA. Random kernels draw
// philox(seed, offset + i) and advance the offset by what they consumed, so
// results do not depend on how the work is split across threads, and
// DTensor can move a rank's offset to coordinate random ops across ranks.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>

namespace mydev {

struct PhiloxInputs {
  uint64_t seed;
  uint64_t offset;
};

class MydevGeneratorImpl : public c10::GeneratorImpl {
 public:
  // Serialized state: seed (u64) then offset (i64), 16 bytes, the layout
  // torch.distributed.tensor expects of a device generator.
  static constexpr size_t kStateSize = 16;

  explicit MydevGeneratorImpl(c10::DeviceIndex device,
                              uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Reserves `increment` counter values for one kernel and returns where
  // they start. Rounded up to a multiple of 4: one Philox call yields four
  // 32-bit numbers.
  PhiloxInputs reserve(uint64_t increment);

  // The mutex ATen's random kernels take around generator use.
  std::mutex mutex_;

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  MydevGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

}  // namespace mydev
