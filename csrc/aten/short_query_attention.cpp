#include "short_query_attention.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "float_dot_products.h"
#include "host_view.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

// Up to this many query positions the direct kernel beats the flash
// kernel's blocking (measured on the decode step of benchmarks/graphs.py:
// one position, 128 keys, head size 64).
constexpr int64_t kMaxQueryPositions = 4;

// Rows of work (one query position of one head) per thread at least: a
// decode step has a few heads, and a thread team costs more than they do.
constexpr int64_t kMinWorkPerThread = 1 << 16;

// scores[j] = the dot product of the query row with key row j. float32
// rows with contiguous elements take the vector loops of
// float_dot_products.h (a decode step's heads: ~5x faster than these
// strided scalar loops).
template <typename scalar_t, typename acc_t>
void dotWithKeys(const scalar_t* query, int64_t query_step,
                 const scalar_t* keys, int64_t key_stride, int64_t key_step,
                 int64_t count, int64_t size, acc_t* scores) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (query_step == 1 && key_step == 1) {
      rowDotProducts(keys, key_stride, count, query, size, scores);
      return;
    }
  }
  for (int64_t j = 0; j < count; ++j) {
    const scalar_t* key = keys + j * key_stride;
    acc_t dot = 0;
    for (int64_t e = 0; e < size; ++e) {
      dot += static_cast<acc_t>(query[e * query_step]) *
             static_cast<acc_t>(key[e * key_step]);
    }
    scores[j] = dot;
  }
}

// sum[e] += weight * value[e * step] for e < size.
template <typename scalar_t, typename acc_t>
void addWeightedValue(acc_t* sum, acc_t weight, const scalar_t* value,
                      int64_t step, int64_t size) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    if (step == 1) {
      addScaled(sum, weight, value, size);
      return;
    }
  }
  for (int64_t e = 0; e < size; ++e) {
    sum[e] += weight * static_cast<acc_t>(value[e * step]);
  }
}

template <typename scalar_t>
void attendRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const at::Tensor& out, const at::Tensor& lse, bool is_causal,
                double scale) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t heads = q.size(1), positions = q.size(2);
  const int64_t head_size = q.size(3), keys = k.size(2);
  const int64_t value_size = v.size(3);
  const scalar_t* q_data = q.const_data_ptr<scalar_t>();
  const scalar_t* k_data = k.const_data_ptr<scalar_t>();
  const scalar_t* v_data = v.const_data_ptr<scalar_t>();
  scalar_t* out_data = out.data_ptr<scalar_t>();
  float* lse_data = lse.data_ptr<float>();
  const auto qs = q.strides(), ks = k.strides(), vs = v.strides();
  const auto os = out.strides();
  const int64_t rows = q.size(0) * heads * positions;
  const int64_t work_per_row = keys * (head_size + value_size);
  const int64_t grain = std::max<int64_t>(1, kMinWorkPerThread / work_per_row);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> scores(keys);
    std::vector<acc_t> sum_of_values(value_size);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % positions;
      const int64_t h = (row / positions) % heads;
      const int64_t b = row / (positions * heads);
      const scalar_t* qi = q_data + b * qs[0] + h * qs[1] + i * qs[2];
      const scalar_t* kb = k_data + b * ks[0] + h * ks[1];
      const scalar_t* vb = v_data + b * vs[0] + h * vs[1];
      const int64_t attended = is_causal ? std::min(keys, i + 1) : keys;
      acc_t max_score = -std::numeric_limits<acc_t>::infinity();
      dotWithKeys(qi, qs[3], kb, ks[2], ks[3], attended, head_size,
                  scores.data());
      for (int64_t j = 0; j < attended; ++j) {
        scores[j] *= static_cast<acc_t>(scale);
        max_score = std::max(max_score, scores[j]);
      }
      acc_t total = 0;
      std::fill(sum_of_values.begin(), sum_of_values.end(), acc_t(0));
      for (int64_t j = 0; j < attended; ++j) {
        const acc_t weight = std::exp(scores[j] - max_score);
        total += weight;
        addWeightedValue(sum_of_values.data(), weight, vb + j * vs[2], vs[3],
                         value_size);
      }
      scalar_t* oi = out_data + b * os[0] + h * os[1] + i * os[2];
      for (int64_t e = 0; e < value_size; ++e) {
        oi[e * os[3]] = static_cast<scalar_t>(sum_of_values[e] / total);
      }
      lse_data[row] = static_cast<float>(max_score + std::log(total));
    }
  });
}

}  // namespace

bool shortQueryAttentionApplies(const at::Tensor& query, const at::Tensor& key,
                                const at::Tensor& value,
                                const std::optional<at::Tensor>& attn_mask) {
  return !attn_mask.has_value() && query.dim() == 4 && key.dim() == 4 &&
         value.dim() == 4 && query.size(2) <= kMaxQueryPositions &&
         at::isFloatingType(query.scalar_type()) &&
         key.scalar_type() == query.scalar_type() &&
         value.scalar_type() == query.scalar_type() &&
         key.size(0) == query.size(0) && value.size(0) == query.size(0) &&
         key.size(1) == query.size(1) && value.size(1) == query.size(1) &&
         key.size(3) == query.size(3) && value.size(2) == key.size(2) &&
         key.size(2) > 0;
}

void shortQueryAttention(const at::Tensor& query, const at::Tensor& key,
                         const at::Tensor& value, bool is_causal,
                         std::optional<double> scale, const at::Tensor& output,
                         const at::Tensor& logsumexp) {
  const double softmax_scale =
      scale.has_value() ? *scale
                        : 1.0 / std::sqrt(static_cast<double>(query.size(3)));
  launchKernel("short_query_attention",
               [q = hostView(query), k = hostView(key), v = hostView(value),
                out = hostView(output), lse = hostView(logsumexp), is_causal,
                softmax_scale] {
                 AT_DISPATCH_FLOATING_TYPES_AND2(
                     at::kHalf, at::kBFloat16, q.scalar_type(),
                     "short_query_attention", [&] {
                       attendRows<scalar_t>(q, k, v, out, lse, is_causal,
                                            softmax_scale);
                     });
               });
}

}  // namespace mydev
