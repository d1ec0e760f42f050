// Counter-based random kernels: uniform_, normal_ (and normal's
// out-of-place overloads), bernoulli_ (and so dropout), random_ and
// exponential_. Element i of the output, in row-major logical order, is a
// function of philox(seed, offset + i) only (formulas in
// csrc/core/generator.h), so values do not depend on how at::parallel_for
// splits the work, nor on the output's strides, and a tensor drawn at
// offset o + k is the tail of the one drawn at offset o: what DTensor's
// OffsetBasedRNGTracker relies on to make a shard the slice of the whole.
//
// The argument checks and overload plumbing are ATen's own
// (ATen/native/DistributionTemplates.h), so errors read as on CPU; the
// functors below are the kernels those templates call.
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>

#include "../core/device.h"
#include "../core/generator.h"
#include "device_randomness.h"
#include "host_view.h"
#include "kernel_launch.h"
#include "philox.h"

namespace mydev {
namespace {

using at::native::templates::bernoulli_impl_;
using at::native::templates::bernoulli_out_impl;

// Elements per at::parallel_for task: a Philox block costs about as much as
// a few dozen simple elementwise operations.
constexpr int64_t kGrainSize = 4096;

// Runs on the stream. Element i of `out` (row-major logical order) becomes
// value_at(stream, i). Non-contiguous outputs are drawn densely and then
// copied, so they get the values a contiguous output would.
template <typename scalar_t, typename ValueAt>
void fillInLogicalOrder(const at::Tensor& out, uint64_t seed,
                        const ValueAt& value_at) {
  const bool dense = out.is_contiguous();
  const at::Tensor target = dense ? out : at::empty(out.sizes(), out.options());
  scalar_t* data = target.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, target.numel(), kGrainSize,
                   [&](int64_t begin, int64_t end) {
                     PhiloxStream stream(seed);
                     for (int64_t i = begin; i < end; ++i) {
                       data[i] = value_at(stream, i);
                     }
                   });
  if (!dense) {
    out.copy_(target);
  }
}

// Reserves `numbers_per_element` numbers per element of `self` (on the
// host, in program order) and enqueues fill(host view of self, start).
template <typename Fill>
void launchRandomKernel(const char* name, const at::TensorBase& self,
                        const std::optional<at::Generator>& generator,
                        uint64_t numbers_per_element, Fill fill) {
  // Only a mydev generator brought a host tensor here.
  TORCH_CHECK(self.device().is_privateuseone(), name,
              ": Expected a 'cpu' device type for generator but found '",
              kDeviceName, "'");
  const c10::DeviceGuard guard(self.device());
  const PhiloxInputs start =
      reservePhilox(generator, self.device().index(),
                    static_cast<uint64_t>(self.numel()) * numbers_per_element);
  launchKernel(name, [view = hostView(at::Tensor(self)), start,
                      fill = std::move(fill)] { fill(view, start.atRun()); });
}

template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to,
                  std::optional<at::Generator> generator) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, iter.dtype(), "uniform_", [&] {
          launchRandomKernel(
              "uniform_", iter.tensor_base(0), generator, 1,
              [from, to](const at::Tensor& out, PhiloxInputs start) {
                using acc_t = at::opmath_type<scalar_t>;
                const auto low = static_cast<acc_t>(from);
                const auto high = static_cast<acc_t>(to);
                fillInLogicalOrder<scalar_t>(
                    out, start.seed, [&](PhiloxStream& stream, int64_t i) {
                      const acc_t u =
                          uniformFromBits<acc_t>(stream.at(start.offset + i));
                      const auto value =
                          static_cast<scalar_t>(u * (high - low) + low);
                      // Rounding to scalar_t may reach the excluded bound.
                      return static_cast<acc_t>(value) >= high && low < high
                                 ? static_cast<scalar_t>(low)
                                 : value;
                    });
              });
        });
  }
};

// Standard normal at `position`: Box-Muller on the pair of numbers at
// (position & ~1, position | 1); the even position takes the cosine, the odd
// one the sine.
template <typename acc_t>
acc_t standardNormalAt(PhiloxStream& stream, uint64_t position) {
  const acc_t u1 =
      positiveUniformFromBits<acc_t>(stream.at(position & ~uint64_t{1}));
  const acc_t u2 = uniformFromBits<acc_t>(stream.at(position | 1));
  const acc_t radius = std::sqrt(acc_t(-2) * std::log(u1));
  const acc_t angle = acc_t(2 * M_PI) * u2;
  return radius * (position % 2 == 0 ? std::cos(angle) : std::sin(angle));
}

template <typename RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& self, double mean, double std,
                  std::optional<at::Generator> generator) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, self.scalar_type(), "normal_", [&] {
          launchRandomKernel(
              "normal_", self, generator, 1,
              [mean, std](const at::Tensor& out, PhiloxInputs start) {
                using acc_t = at::opmath_type<scalar_t>;
                fillInLogicalOrder<scalar_t>(
                    out, start.seed, [&](PhiloxStream& stream, int64_t i) {
                      const acc_t z =
                          standardNormalAt<acc_t>(stream, start.offset + i);
                      return static_cast<scalar_t>(z * static_cast<acc_t>(std) +
                                                   static_cast<acc_t>(mean));
                    });
              });
        });
  }
};

template <typename RNG>
struct BernoulliKernel {
  void operator()(const at::TensorBase& self, double p,
                  std::optional<at::Generator> generator) {
    AT_DISPATCH_ALL_TYPES_AND3(
        at::kBool, at::kHalf, at::kBFloat16, self.scalar_type(), "bernoulli_",
        [&] {
          launchRandomKernel(
              "bernoulli_", self, generator, 1,
              [p](const at::Tensor& out, PhiloxInputs start) {
                fillInLogicalOrder<scalar_t>(
                    out, start.seed, [&](PhiloxStream& stream, int64_t i) {
                      return static_cast<scalar_t>(
                          uniformFromBits<double>(stream.at(start.offset + i)) <
                          p);
                    });
              });
        });
  }

  void operator()(const at::TensorBase& self, const at::TensorBase& p,
                  std::optional<at::Generator> generator) {
    // Probabilities as doubles on self's device (CPU ones are copied over,
    // as CUDA does), broadcast to self's shape.
    const at::Tensor probabilities =
        at::Tensor(p).to(self.device(), at::kDouble).expand(self.sizes());
    AT_DISPATCH_ALL_TYPES_AND3(
        at::kBool, at::kHalf, at::kBFloat16, self.scalar_type(), "bernoulli_",
        [&] {
          launchRandomKernel(
              "bernoulli_", self, generator, 1,
              [p_view = hostView(probabilities)](const at::Tensor& out,
                                                 PhiloxInputs start) {
                const at::Tensor dense_p = p_view.contiguous();
                const double* p_data = dense_p.const_data_ptr<double>();
                fillInLogicalOrder<scalar_t>(
                    out, start.seed, [&](PhiloxStream& stream, int64_t i) {
                      const double p_i = p_data[i];
                      TORCH_CHECK(
                          p_i >= 0 && p_i <= 1,
                          "bernoulli_ expects p to be in [0, 1], but got p=",
                          p_i);
                      return static_cast<scalar_t>(
                          uniformFromBits<double>(stream.at(start.offset + i)) <
                          p_i);
                    });
              });
        });
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda,
                  std::optional<at::Generator> generator) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, iter.dtype(), "exponential_", [&] {
          launchRandomKernel(
              "exponential_", iter.tensor_base(0), generator, 1,
              [lambda](const at::Tensor& out, PhiloxInputs start) {
                using acc_t = at::opmath_type<scalar_t>;
                fillInLogicalOrder<scalar_t>(
                    out, start.seed, [&](PhiloxStream& stream, int64_t i) {
                      const acc_t u = positiveUniformFromBits<acc_t>(
                          stream.at(start.offset + i));
                      return static_cast<scalar_t>(-std::log(u) /
                                                   static_cast<acc_t>(lambda));
                    });
              });
        });
  }
};

// Integers in [base, base + range), range == 0 meaning 2^64. Ranges up to
// 2^32 take one number per element, wider ones two (element i: positions
// offset + 2i, high word, and offset + 2i + 1).
template <typename scalar_t>
void fillIntegers(const at::Tensor& out, PhiloxInputs start, uint64_t range,
                  int64_t base) {
  const bool wide = range == 0 || range > (uint64_t{1} << 32);
  fillInLogicalOrder<scalar_t>(
      out, start.seed, [&](PhiloxStream& stream, int64_t i) {
        uint64_t bits = 0;
        if (wide) {
          const uint64_t position = start.offset + 2 * static_cast<uint64_t>(i);
          bits = (static_cast<uint64_t>(stream.at(position)) << 32) |
                 stream.at(position + 1);
        } else {
          bits = stream.at(start.offset + i);
        }
        const uint64_t drawn = range == 0 ? bits : bits % range;
        return static_cast<scalar_t>(
            static_cast<int64_t>(drawn + static_cast<uint64_t>(base)));
      });
}

void launchIntegerKernel(const at::TensorBase& self,
                         const std::optional<at::Generator>& generator,
                         uint64_t range, int64_t base) {
  const bool wide = range == 0 || range > (uint64_t{1} << 32);
  AT_DISPATCH_V2(
      self.scalar_type(), "random_", AT_WRAP([&] {
        launchRandomKernel(
            "random_", self, generator, wide ? 2 : 1,
            [range, base](const at::Tensor& out, PhiloxInputs start) {
              fillIntegers<scalar_t>(out, start, range, base);
            });
      }),
      at::kBool, at::kHalf, at::kBFloat16, AT_EXPAND(AT_ALL_TYPES),
      AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base,
                  std::optional<at::Generator> generator) {
    launchIntegerKernel(iter.tensor_base(0), generator, range, base);
  }

  // [int64 min, int64 max]: all 64 bits.
  void operator()(at::TensorIteratorBase& iter,
                  std::optional<at::Generator> generator) {
    const at::ScalarType dtype = iter.dtype();
    TORCH_CHECK(
        dtype == at::kLong || dtype == at::kDouble || dtype == at::kFloat ||
            dtype == at::kBFloat16,
        "random_ over the full 64-bit range handles only int64, double, float "
        "and bfloat16, got ",
        dtype);
    launchIntegerKernel(iter.tensor_base(0), generator, 0,
                        std::numeric_limits<int64_t>::min());
  }
};

// random_() without bounds: [0, 2^mantissa digits] for floating types,
// [0, max] for integral ones, as on CPU.
template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter,
                  std::optional<at::Generator> generator) {
    uint64_t range = 0;
    AT_DISPATCH_ALL_TYPES_AND3(
        at::kBool, at::kHalf, at::kBFloat16, iter.dtype(), "random_", [&] {
          if constexpr (std::is_same_v<scalar_t, bool>) {
            range = 2;
          } else if constexpr (std::is_integral_v<scalar_t>) {
            range =
                static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;
          } else {
            range = (uint64_t{1} << std::numeric_limits<scalar_t>::digits) + 1;
          }
        });
    launchIntegerKernel(iter.tensor_base(0), generator, range, 0);
  }
};

using RNG = MydevGeneratorImpl*;

at::Tensor& uniform(at::Tensor& self, double from, double to,
                    std::optional<at::Generator> generator) {
  return at::native::templates::uniform_impl_<UniformKernel, RNG>(
      self, from, to, std::move(generator));
}

at::Tensor& normalInPlace(at::Tensor& self, double mean, double std,
                          std::optional<at::Generator> generator) {
  return at::native::templates::normal_impl_<NormalKernel, RNG>(
      self, mean, std, std::move(generator));
}

at::Tensor normalTensorFloat(const at::Tensor& mean, double std,
                             std::optional<at::Generator> generator) {
  return at::native::templates::normal_impl<NormalKernel, RNG>(
      mean, std, std::move(generator));
}

at::Tensor normalFloatTensor(double mean, const at::Tensor& std,
                             std::optional<at::Generator> generator) {
  return at::native::templates::normal_impl<NormalKernel, RNG>(
      mean, std, std::move(generator));
}

at::Tensor normalTensorTensor(const at::Tensor& mean, const at::Tensor& std,
                              std::optional<at::Generator> generator) {
  return at::native::templates::normal_impl<NormalKernel, RNG>(
      mean, std, std::move(generator));
}

at::Tensor& normalTensorFloatOut(const at::Tensor& mean, double std,
                                 std::optional<at::Generator> generator,
                                 at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, RNG>(
      out, mean, std, std::move(generator));
}

at::Tensor& normalFloatTensorOut(double mean, const at::Tensor& std,
                                 std::optional<at::Generator> generator,
                                 at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, RNG>(
      out, mean, std, std::move(generator));
}

at::Tensor& normalTensorTensorOut(const at::Tensor& mean, const at::Tensor& std,
                                  std::optional<at::Generator> generator,
                                  at::Tensor& out) {
  return at::native::templates::normal_out_impl<NormalKernel, RNG>(
      out, mean, std, std::move(generator));
}

at::Tensor& bernoulliScalar(at::Tensor& self, double p,
                            std::optional<at::Generator> generator) {
  return bernoulli_impl_<BernoulliKernel, RNG>(self, p, std::move(generator));
}

at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p,
                            std::optional<at::Generator> generator) {
  return bernoulli_impl_<BernoulliKernel, RNG>(self, p, std::move(generator));
}

at::Tensor& bernoulliOut(const at::Tensor& p,
                         std::optional<at::Generator> generator,
                         at::Tensor& out) {
  return bernoulli_out_impl<BernoulliKernel, RNG>(out, p, std::move(generator));
}

at::Tensor& randomFromTo(at::Tensor& self, int64_t from,
                         std::optional<int64_t> to,
                         std::optional<at::Generator> generator) {
  return at::native::templates::random_from_to_impl<RandomFromToKernel, RNG>(
      self, from, to, std::move(generator));
}

at::Tensor& randomTo(at::Tensor& self, int64_t to,
                     std::optional<at::Generator> generator) {
  return randomFromTo(self, 0, to, std::move(generator));
}

at::Tensor& randomFull(at::Tensor& self,
                       std::optional<at::Generator> generator) {
  return at::native::templates::random_impl<RandomKernel, RNG>(
      self, std::move(generator));
}

at::Tensor& exponential(at::Tensor& self, double lambda,
                        std::optional<at::Generator> generator) {
  return at::native::templates::exponential_impl_<ExponentialKernel, RNG>(
      self, lambda, std::move(generator));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform);
  m.impl("normal_", normalInPlace);
  m.impl("normal.Tensor_float", normalTensorFloat);
  m.impl("normal.float_Tensor", normalFloatTensor);
  m.impl("normal.Tensor_Tensor", normalTensorTensor);
  m.impl("normal.Tensor_float_out", normalTensorFloatOut);
  m.impl("normal.float_Tensor_out", normalFloatTensorOut);
  m.impl("normal.Tensor_Tensor_out", normalTensorTensorOut);
  m.impl("bernoulli_.float", bernoulliScalar);
  m.impl("bernoulli_.Tensor", bernoulliTensor);
  m.impl("bernoulli.out", bernoulliOut);
  m.impl("random_.from", randomFromTo);
  m.impl("random_.to", randomTo);
  m.impl("random_", randomFull);
  m.impl("exponential_", exponential);
}

}  // namespace mydev
