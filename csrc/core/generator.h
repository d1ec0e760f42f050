// The mydev random number generator: a Philox counter-based generator whose
// whole state is (seed, offset), as on CUDA. Random kernels draw
// philox(seed, offset + i) and advance the offset by what they consumed, so
// results do not depend on how the work is split across threads, and
// DTensor can move a rank's offset to coordinate random ops across ranks.
//
// Precisely (csrc/aten/philox.h, csrc/aten/philox_random_ops.cpp): number
// p of the stream is lane p % 4 of Philox4x32-10 with key = seed and 128-bit
// counter = p / 4. Element i of an output, in row-major logical order
// whatever its strides, uses position p = offset + i:
//   uniform_(from, to)   from + u(p) * (to - from), u(p) = bits >> 8 / 2^24
//                        for float/half/bfloat16 (computed in float), bits
//                        / 2^32 for double; a value rounded up to `to`
//                        becomes `from`
//   normal_(mean, std)   mean + std * z(p), Box-Muller on the pair (p & ~1,
//                        p | 1): z = sqrt(-2 ln u1) * (cos if p is even, sin
//                        if odd)(2 pi u2), u1 in (0, 1] from p & ~1, u2 in
//                        [0, 1) from p | 1; the normal(mean, std) tensor
//                        overloads draw normal_(0, 1) and scale it
//   bernoulli_(p)        bits / 2^32 < p (double), p a float or a tensor
//                        broadcast to the output (and so dropout and
//                        native_dropout, whose keep-mask is bernoulli_(1 - p))
//   exponential_(lambd)  -ln(u) / lambd, u in (0, 1]
//   random_(from, to)    (and randint) from + bits % range for ranges up
//                        to 2^32; wider ranges (and the full 64-bit one)
//                        take two numbers per element: positions
//                        offset + 2i (high word) and offset + 2i + 1
// A kernel advances the offset by the numbers it may use rounded up to a
// multiple of 4 (reserve()), so a tensor drawn at offset o + k (k a
// multiple of 4) is the tail of the one drawn at offset o.
//
// The other random ops (randperm, multinomial, cauchy_, log_normal_,
// geometric_, poisson, _standard_gamma, rrelu, ...) run ATen's CPU kernels with
// a CPU generator seeded from (seed, offset) (csrc/aten/device_randomness.h):
// deterministic and coordinated through the offset, but not counter-based per
// element. Inside a graph that seed is taken when the kernel runs, so they
// too draw fresh numbers at each replay.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <memory>
#include <mutex>

namespace mydev {

// Where a graph's random kernels start at one replay: written in stream order
// by a kernel each replay enqueues before the graph, read by the captured
// kernels when they run (CUDA's graph-safe generator reads its seed and
// offset from device memory the same way), so replays draw fresh numbers.
struct GraphRngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct PhiloxInputs {
  uint64_t seed;
  uint64_t offset;
  // Set for a kernel captured in a graph: `offset` is then relative to the
  // replay's, and seed and offset are read from here when the kernel runs.
  std::shared_ptr<const GraphRngState> graph = nullptr;

  // What the kernel draws from; call it inside the kernel.
  PhiloxInputs atRun() const {
    return graph ? PhiloxInputs{graph->seed, graph->offset + offset} : *this;
  }
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
  // While a graph captures (between captureBegin and captureEnd), the
  // offset relative to the replay's start, with the graph's state.
  PhiloxInputs reserve(uint64_t increment);

  // Registers a capturing graph's state; captureEnd returns how far one
  // replay advances the offset. Under mutex_.
  void captureBegin(std::shared_ptr<const GraphRngState> state);
  uint64_t captureEnd();

  // The mutex ATen's random kernels take around generator use.
  std::mutex mutex_;

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  MydevGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
  std::shared_ptr<const GraphRngState> capturing_;
  uint64_t capture_offset_ = 0;
};

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

}  // namespace mydev
