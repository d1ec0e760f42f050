// C++ Meta kernels for the layers' heavy ops, forward and backward:
// convolution, batch, layer and group normalization, and the CPU flash
// attention behind scaled_dot_product_attention; and forward only, reflection
// padding (nn.ReflectionPad2d) and im2col (nn.Unfold). torch's Meta kernels for
// them are Python (the backward ones decompositions), and the first one a
// process runs imports torch._dynamo or sympy (native_meta_kernels.h). Each
// lays its results out as the CPU kernel does; a call it does not model
// throws, and the device-kernel path then runs the CPU kernel synchronously,
// which raises the CPU's own error at the call.
#include <ATen/OpMathType.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/empty.h>

#include "meta_layouts.h"
#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Tensor;

// native_layer_norm, which the device runs whole (composite_routing.cpp),
// as its CPU kernel shapes its results: a contiguous output like the input,
// and the per-row mean and reciprocal standard deviation shaped to
// broadcast against it, in float beside a reduced-precision input whose
// parameters are float. torch's Meta kernel for it is Python.
std::tuple<Tensor, Tensor, Tensor> nativeLayerNormMeta(
    const Tensor& input, at::IntArrayRef normalized_shape,
    const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const bool mixed = at::native::is_mixed_type(input, weight, bias);
  if (mixed) {
    at::native::check_mixed_data_type(input, weight, bias);
  }
  at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const auto statistics_dims =
      static_cast<size_t>(input.dim()) - normalized_shape.size();
  c10::DimVector statistics_shape(input.sizes().begin(),
                                  input.sizes().begin() + statistics_dims);
  statistics_shape.resize(input.dim(), 1);
  const auto statistics_options =
      input.options().dtype(at::native::param_scalar_type(input, mixed));
  return {at::empty(input.sizes(), input.options()),
          at::empty(statistics_shape, statistics_options),
          at::empty(statistics_shape, statistics_options)};
}

// The CPU kernel's test of a batch-norm operand being dense in some layout,
// and the layout it then keeps (a channels-last tensor whose
// suggest_memory_format() is ambiguous is kept channels-last).
bool denseInSomeLayout(const Tensor& t) {
  return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
         t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
}

at::MemoryFormat denseLayoutOf(const Tensor& t) {
  if (t.is_contiguous()) {
    return at::MemoryFormat::Contiguous;
  }
  return t.is_contiguous(at::MemoryFormat::ChannelsLast3d)
             ? at::MemoryFormat::ChannelsLast3d
             : at::MemoryFormat::ChannelsLast;
}

// native_batch_norm's CPU kernel: the output like the input (in its dense
// layout when every operand is dense), and the saved statistics, one per
// channel when training and empty otherwise, in float when the parameters
// are float beside a reduced-precision input.
std::tuple<Tensor, Tensor, Tensor> nativeBatchNormMeta(
    const Tensor& input, const OptionalTensor& weight_opt,
    const OptionalTensor& bias_opt, const OptionalTensor& running_mean_opt,
    const OptionalTensor& running_var_opt, bool training, double /*momentum*/,
    double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const Tensor running_mean = running_mean_opt.value_or(Tensor());
  const Tensor running_var = running_var_opt.value_or(Tensor());
  checkFloating(input, "batch_norm");
  TORCH_CHECK(input.dim() >= 2, "batch_norm: left to the CPU kernel");
  const bool all_dense = denseInSomeLayout(input) &&
                         (!weight.defined() || weight.is_contiguous()) &&
                         (!bias.defined() || bias.is_contiguous()) &&
                         running_mean.is_contiguous() &&
                         running_var.is_contiguous();
  Tensor output = emptyLikeIn(
      input, all_dense ? denseLayoutOf(input) : input.suggest_memory_format());
  const bool mixed =
      at::native::is_mixed_type(input, weight, bias, running_mean, running_var);
  const auto statistics_options =
      input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  const int64_t statistics_size = training ? input.size(1) : 0;
  return {std::move(output), at::empty({statistics_size}, statistics_options),
          at::empty({statistics_size}, statistics_options)};
}

// native_group_norm's CPU kernel: the output in the input's suggested
// layout (which the input must be dense in), the per-sample, per-group
// mean and reciprocal standard deviation in the parameters' dtype.
std::tuple<Tensor, Tensor, Tensor> nativeGroupNormMeta(
    const Tensor& input, const OptionalTensor& weight_opt,
    const OptionalTensor& bias_opt, int64_t n, int64_t channels,
    int64_t /*hxw*/, int64_t groups, double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const at::MemoryFormat layout = input.suggest_memory_format();
  TORCH_CHECK(
      groups > 0 && channels % groups == 0 && input.is_contiguous(layout) &&
          (!weight.defined() ||
           (weight.dim() == 1 && weight.numel() == channels &&
            weight.is_contiguous())) &&
          (!bias.defined() || (bias.dim() == 1 && bias.numel() == channels &&
                               bias.is_contiguous())),
      "group_norm: left to the CPU kernel");
  const bool mixed = at::native::is_mixed_type(input, weight, bias);
  if (mixed) {
    at::native::check_mixed_data_type(input, weight, bias);
  }
  const auto statistics_options =
      input.options().dtype(at::native::param_scalar_type(input, mixed));
  return {emptyLikeIn(input, layout),
          at::empty({n, groups}, statistics_options),
          at::empty({n, groups}, statistics_options)};
}

// aten::convolution's CPU kernel picks a backend (oneDNN or ATen's own
// convolutions), which computes in the layout it prefers, forward and
// backward. For 4-D operands every CPU backend takes channels-last when
// the input or the weight suggests it, contiguous otherwise. 3-D and 5-D
// operands are modelled only when contiguous; other layouts are left to
// the CPU kernel.
at::MemoryFormat convolutionLayout(const Tensor& input, const Tensor& weight) {
  if (input.dim() == 4) {
    return input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                   weight.suggest_memory_format() ==
                       at::MemoryFormat::ChannelsLast
               ? at::MemoryFormat::ChannelsLast
               : at::MemoryFormat::Contiguous;
  }
  TORCH_CHECK(input.is_contiguous() && weight.is_contiguous(),
              "convolution: left to the CPU kernel");
  return at::MemoryFormat::Contiguous;
}

// The convolution's output in that layout; anything unusual (empty inputs,
// mismatched shapes) is left to the CPU kernel, run synchronously.
Tensor convolutionMeta(const Tensor& input, const Tensor& weight,
                       const OptionalTensor& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation,
                       bool transposed, at::IntArrayRef output_padding,
                       int64_t groups) {
  const int64_t dims = weight.dim();
  const auto spatial = static_cast<size_t>(dims - 2);
  const int64_t in_channels =
      transposed ? weight.size(0) : weight.size(1) * groups;
  TORCH_CHECK(dims >= 3 && dims <= 5 && input.dim() == dims &&
                  input.numel() > 0 && groups > 0 &&
                  input.size(1) == in_channels && stride.size() == spatial &&
                  padding.size() == spatial && dilation.size() == spatial &&
                  (!transposed || output_padding.size() == spatial) &&
                  input.scalar_type() == weight.scalar_type() &&
                  (!bias.has_value() || !bias->defined() ||
                   bias->scalar_type() == input.scalar_type()),
              "convolution: left to the CPU kernel");
  c10::DimVector shape{input.size(0),
                       transposed ? weight.size(1) * groups : weight.size(0)};
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t in = input.size(d + 2);
    const int64_t kernel_extent = dilation[d] * (weight.size(d + 2) - 1) + 1;
    const int64_t out =
        transposed ? (in - 1) * stride[d] - 2 * padding[d] + kernel_extent +
                         output_padding[d]
                   : (in + 2 * padding[d] - kernel_extent) / stride[d] + 1;
    TORCH_CHECK(out > 0 && stride[d] > 0,
                "convolution: left to the CPU kernel");
    shape.push_back(out);
  }
  return at::empty(
      shape, input.options().memory_format(convolutionLayout(input, weight)));
}

// convolution_backward's CPU kernel computes each requested gradient in
// the convolution's layout (convolutionLayout), shaped like its operand;
// the bias gradient has one entry per output channel.
std::tuple<Tensor, Tensor, Tensor> convolutionBackwardMeta(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalIntArrayRef /*bias_sizes*/, at::IntArrayRef /*stride*/,
    at::IntArrayRef /*padding*/, at::IntArrayRef /*dilation*/,
    bool /*transposed*/, at::IntArrayRef /*output_padding*/, int64_t groups,
    std::array<bool, 3> output_mask) {
  const int64_t dims = input.dim();
  checkFloating(input, "convolution_backward");
  TORCH_CHECK(dims >= 3 && dims <= 5 && weight.dim() == dims &&
                  grad_output.dim() == dims && input.numel() > 0 &&
                  groups > 0 && weight.scalar_type() == input.scalar_type() &&
                  grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: left to the CPU kernel");
  const at::MemoryFormat layout = convolutionLayout(input, weight);
  return {gradientIf(output_mask[0],
                     [&] {
                       return at::empty(input.sizes(),
                                        input.options().memory_format(layout));
                     }),
          gradientIf(output_mask[1],
                     [&] {
                       return at::empty(weight.sizes(),
                                        weight.options().memory_format(layout));
                     }),
          gradientIf(output_mask[2], [&] {
            return at::empty({grad_output.size(1)}, grad_output.options());
          })};
}

// The normalizations' backward CPU kernels refuse parameters of another
// dtype than the input's unless mixed; those calls, and gradients asked of
// absent parameters, are left to them.
void checkParameterGradients(const Tensor& input, const OptionalTensor& weight,
                             std::array<bool, 3> output_mask, const char* op) {
  checkFloating(input, op);
  const bool has_weight = weight.has_value() && weight->defined();
  TORCH_CHECK((has_weight || (!output_mask[1] && !output_mask[2])) &&
                  (!has_weight || weight->scalar_type() == input.scalar_type()),
              op, ": left to the CPU kernel");
}

// The gradients a normalization's backward returns, each only when asked
// for: the input's in `input_layout`, the weight's and the bias's shaped
// like the parameters the CPU kernel allocates them like.
std::tuple<Tensor, Tensor, Tensor> normalizationGradients(
    std::array<bool, 3> output_mask, const Tensor& input,
    at::MemoryFormat input_layout, const Tensor& weight_like,
    const Tensor& bias_like) {
  return {gradientIf(output_mask[0],
                     [&] { return emptyLikeIn(input, input_layout); }),
          gradientIf(output_mask[1],
                     [&] {
                       return at::empty(weight_like.sizes(),
                                        weight_like.options());
                     }),
          gradientIf(output_mask[2], [&] {
            return at::empty(bias_like.sizes(), bias_like.options());
          })};
}

// native_batch_norm_backward's CPU kernel: the input gradient in the
// input's suggested layout, the parameters' gradients one per channel
// (like the weight).
std::tuple<Tensor, Tensor, Tensor> nativeBatchNormBackwardMeta(
    const Tensor& grad_output, const Tensor& input,
    const OptionalTensor& weight, const OptionalTensor& /*running_mean*/,
    const OptionalTensor& /*running_var*/, const OptionalTensor& /*save_mean*/,
    const OptionalTensor& /*save_invstd*/, bool /*train*/, double /*eps*/,
    std::array<bool, 3> output_mask) {
  checkParameterGradients(input, weight, output_mask, "batch_norm_backward");
  TORCH_CHECK(input.dim() >= 2 && grad_output.sizes() == input.sizes() &&
                  grad_output.scalar_type() == input.scalar_type(),
              "batch_norm_backward: left to the CPU kernel");
  return normalizationGradients(
      output_mask, input, input.suggest_memory_format(), *weight, *weight);
}

// native_layer_norm_backward's CPU kernel: every gradient contiguous and
// shaped like its operand.
std::tuple<Tensor, Tensor, Tensor> nativeLayerNormBackwardMeta(
    const Tensor& grad_output, const Tensor& input,
    at::IntArrayRef /*normalized_shape*/, const Tensor& /*mean*/,
    const Tensor& /*rstd*/, const OptionalTensor& weight,
    const OptionalTensor& bias, std::array<bool, 3> output_mask) {
  checkParameterGradients(input, weight, output_mask, "layer_norm_backward");
  TORCH_CHECK(grad_output.sizes() == input.sizes() &&
                  (!output_mask[2] || (bias.has_value() && bias->defined())),
              "layer_norm_backward: left to the CPU kernel");
  return normalizationGradients(
      output_mask, input, at::MemoryFormat::Contiguous,
      weight.value_or(Tensor()), bias.value_or(Tensor()));
}

// native_group_norm_backward's CPU kernel: the input gradient in the
// input's suggested layout, both parameter gradients like the weight.
std::tuple<Tensor, Tensor, Tensor> nativeGroupNormBackwardMeta(
    const Tensor& grad_output, const Tensor& input, const Tensor& /*mean*/,
    const Tensor& /*rstd*/, const OptionalTensor& weight, int64_t /*n*/,
    int64_t /*channels*/, int64_t /*hxw*/, int64_t /*groups*/,
    std::array<bool, 3> output_mask) {
  checkParameterGradients(input, weight, output_mask, "group_norm_backward");
  TORCH_CHECK(grad_output.sizes() == input.sizes() &&
                  grad_output.scalar_type() == input.scalar_type(),
              "group_norm_backward: left to the CPU kernel");
  return normalizationGradients(
      output_mask, input, input.suggest_memory_format(), *weight, *weight);
}

// scaled_dot_product_attention's CPU flash kernel, for the calls it
// accepts: query, key and value 4-D ([batch, heads, length, head size]) of
// one floating dtype and head size, no dropout, a mask (if any) 2-D or 4-D
// and boolean, float or of the query's dtype.
void checkFlashAttentionOperands(const Tensor& query, const Tensor& key,
                                 const Tensor& value, double dropout_p,
                                 const OptionalTensor& attn_mask) {
  const bool mask_accepted =
      !attn_mask.has_value() || !attn_mask->defined() ||
      ((attn_mask->dim() == 2 || attn_mask->dim() == 4) &&
       (attn_mask->scalar_type() == at::kBool ||
        attn_mask->scalar_type() == at::kFloat ||
        attn_mask->scalar_type() == query.scalar_type()));
  checkFloating(query, "scaled_dot_product_flash_attention");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
                  key.scalar_type() == query.scalar_type() &&
                  value.scalar_type() == query.scalar_type() &&
                  query.size(3) == value.size(3) &&
                  key.size(3) == value.size(3) && dropout_p == 0.0 &&
                  mask_accepted,
              "scaled_dot_product_attention: left to the CPU kernel");
}

// [batch, heads, length, ...] allocated as [batch, length, heads, ...]:
// the flash kernels' layout of their per-head results.
Tensor headsInnerOf(c10::IntArrayRef shape, const at::TensorOptions& options) {
  c10::DimVector allocated(shape.begin(), shape.end());
  std::swap(allocated[1], allocated[2]);
  return at::empty(allocated, options).transpose(1, 2);
}

// The output in the query's layout and the log-sum-exp per query row, in
// the dtype the kernel accumulates in.
std::tuple<Tensor, Tensor> flashAttentionMeta(
    const Tensor& query, const Tensor& key, const Tensor& value,
    double dropout_p, bool /*is_causal*/, const OptionalTensor& attn_mask,
    std::optional<double> /*scale*/) {
  checkFlashAttentionOperands(query, key, value, dropout_p, attn_mask);
  return {emptyLikeIn(query, at::MemoryFormat::Preserve),
          headsInnerOf(
              query.sizes().slice(0, 3),
              query.options().dtype(at::toOpMathType(query.scalar_type())))};
}

std::tuple<Tensor, Tensor, Tensor> flashAttentionBackwardMeta(
    const Tensor& grad_output, const Tensor& query, const Tensor& key,
    const Tensor& value, const Tensor& /*out*/, const Tensor& /*logsumexp*/,
    double dropout_p, bool /*is_causal*/, const OptionalTensor& attn_mask,
    std::optional<double> /*scale*/) {
  checkFlashAttentionOperands(query, key, value, dropout_p, attn_mask);
  TORCH_CHECK(
      grad_output.defined() && grad_output.scalar_type() == query.scalar_type(),
      "scaled_dot_product_attention: left to the CPU kernel");
  return {headsInnerOf(query.sizes(), query.options()),
          headsInnerOf(key.sizes(), key.options()),
          headsInnerOf(value.sizes(), value.options())};
}

// reflection_pad2d's CPU kernel: a [batch,] channels, height, width result
// grown by the padding, in the input's suggested layout when batched. Pads
// that are negative or reach the input's edge are left to the CPU kernel.
Tensor reflectionPad2dMeta(const Tensor& self, at::IntArrayRef padding) {
  const int64_t dims = self.dim();
  TORCH_CHECK((dims == 3 || dims == 4) && padding.size() == 4,
              "reflection_pad2d: left to the CPU kernel");
  const int64_t height = self.size(dims - 2);
  const int64_t width = self.size(dims - 1);
  TORCH_CHECK(self.numel() > 0 && padding[0] >= 0 && padding[1] >= 0 &&
                  padding[2] >= 0 && padding[3] >= 0 && padding[0] < width &&
                  padding[1] < width && padding[2] < height &&
                  padding[3] < height,
              "reflection_pad2d: left to the CPU kernel");
  c10::DimVector shape(self.sizes().begin(), self.sizes().end());
  shape[dims - 2] = height + padding[2] + padding[3];
  shape[dims - 1] = width + padding[0] + padding[1];
  return at::empty(shape, self.options().memory_format(
                              dims == 4 ? self.suggest_memory_format()
                                        : at::MemoryFormat::Contiguous));
}

// im2col's CPU kernel (F.unfold): after ATen's own shape check, a
// contiguous [batch,] channels * kernel area, blocks result.
Tensor im2colMeta(const Tensor& self, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding,
                  at::IntArrayRef stride) {
  TORCH_CHECK(kernel_size.size() == 2 && dilation.size() == 2 &&
                  padding.size() == 2 && stride.size() == 2 &&
                  (self.dim() == 3 || self.dim() == 4),
              "im2col: left to the CPU kernel");
  at::native::im2col_shape_check(self, Tensor(), kernel_size[0], kernel_size[1],
                                 dilation[0], dilation[1], padding[0],
                                 padding[1], stride[0], stride[1]);
  const int64_t dims = self.dim();
  const int64_t blocks =
      at::native::sliding_window_count(self.size(dims - 2), padding[0],
                                       dilation[0], kernel_size[0], stride[0]) *
      at::native::sliding_window_count(self.size(dims - 1), padding[1],
                                       dilation[1], kernel_size[1], stride[1]);
  const int64_t rows = self.size(dims - 3) * kernel_size[0] * kernel_size[1];
  if (dims == 3) {
    return at::empty({rows, blocks}, self.options());
  }
  return at::empty({self.size(0), rows, blocks}, self.options());
}

}  // namespace

void addLayerMetaKernels(NativeMetaTable& table) {
  using Convolution = Tensor(
      const Tensor&, const Tensor&, const OptionalTensor&, at::IntArrayRef,
      at::IntArrayRef, at::IntArrayRef, bool, at::IntArrayRef, int64_t);
  using ConvolutionBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const Tensor&, at::OptionalIntArrayRef,
      at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, bool, at::IntArrayRef,
      int64_t, std::array<bool, 3>);
  using LayerNorm = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, at::IntArrayRef, const OptionalTensor&,
      const OptionalTensor&, double);
  using LayerNormBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, at::IntArrayRef, const Tensor&,
      const Tensor&, const OptionalTensor&, const OptionalTensor&,
      std::array<bool, 3>);
  using BatchNorm = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const OptionalTensor&, const OptionalTensor&,
      const OptionalTensor&, const OptionalTensor&, bool, double, double);
  using BatchNormBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const OptionalTensor&,
      const OptionalTensor&, const OptionalTensor&, const OptionalTensor&,
      const OptionalTensor&, bool, double, std::array<bool, 3>);
  using GroupNorm = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const OptionalTensor&, const OptionalTensor&, int64_t,
      int64_t, int64_t, int64_t, double);
  using GroupNormBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const Tensor&, const Tensor&,
      const OptionalTensor&, int64_t, int64_t, int64_t, int64_t,
      std::array<bool, 3>);
  using FlashAttention = std::tuple<Tensor, Tensor>(
      const Tensor&, const Tensor&, const Tensor&, double, bool,
      const OptionalTensor&, std::optional<double>);
  using FlashAttentionBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
      const Tensor&, double, bool, const OptionalTensor&,
      std::optional<double>);
  table.add<Convolution>("aten::convolution", "", &convolutionMeta);
  table.add<Tensor(const Tensor&, at::IntArrayRef)>("aten::reflection_pad2d",
                                                    "", &reflectionPad2dMeta);
  table.add<Tensor(const Tensor&, at::IntArrayRef, at::IntArrayRef,
                   at::IntArrayRef, at::IntArrayRef)>("aten::im2col", "",
                                                      &im2colMeta);
  table.add<ConvolutionBackward>("aten::convolution_backward", "",
                                 &convolutionBackwardMeta);
  table.add<LayerNorm>("aten::native_layer_norm", "", &nativeLayerNormMeta);
  table.add<LayerNormBackward>("aten::native_layer_norm_backward", "",
                               &nativeLayerNormBackwardMeta);
  table.add<BatchNorm>("aten::native_batch_norm", "", &nativeBatchNormMeta);
  table.add<BatchNormBackward>("aten::native_batch_norm_backward", "",
                               &nativeBatchNormBackwardMeta);
  table.add<GroupNorm>("aten::native_group_norm", "", &nativeGroupNormMeta);
  table.add<GroupNormBackward>("aten::native_group_norm_backward", "",
                               &nativeGroupNormBackwardMeta);
  table.add<FlashAttention>("aten::_scaled_dot_product_flash_attention_for_cpu",
                            "", &flashAttentionMeta);
  table.add<FlashAttentionBackward>(
      "aten::_scaled_dot_product_flash_attention_for_cpu_backward", "",
      &flashAttentionBackwardMeta);
}

}  // namespace mydev
