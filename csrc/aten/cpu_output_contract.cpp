#include "cpu_output_contract.h"

#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/core/stack.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host_view.h"
#include "ivalue_tensors.h"
#include "op_schema.h"

namespace mydev {
namespace {

std::optional<size_t> argumentIndex(const c10::FunctionSchema& schema,
                                    const char* name) {
  return schema.argumentIndexWithName(name);
}

const c10::IValue* argument(const c10::FunctionSchema& schema,
                            c10::ArrayRef<c10::IValue> args, const char* name) {
  const std::optional<size_t> index = argumentIndex(schema, name);
  return index.has_value() ? &args[*index] : nullptr;
}

bool isReducedFloat(at::ScalarType type) {
  return type == at::kHalf || type == at::kBFloat16;
}

// Normalization statistics: float32 when a reduced-precision input meets a
// float32 parameter ("mixed"), otherwise the input's dtype. (The Meta
// kernels say float32 always.)
at::ScalarType statisticsType(const c10::FunctionSchema& schema,
                              c10::ArrayRef<c10::IValue> args) {
  const at::ScalarType input_type = args[0].toTensor().scalar_type();
  if (!isReducedFloat(input_type)) {
    return input_type;
  }
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    const c10::IValue* value = argument(schema, args, name);
    if (value != nullptr && value->isTensor() && value->toTensor().defined() &&
        value->toTensor().scalar_type() == at::kFloat) {
      return at::kFloat;
    }
  }
  return input_type;
}

// Batch norm's saved mean and inverse std have one value per channel when
// training and none otherwise. (The Meta kernels say one per channel.)
void correctBatchNorm(const c10::FunctionSchema& schema,
                      c10::ArrayRef<c10::IValue> args, bool training,
                      OutputMetadata& metadata) {
  const at::ScalarType type = statisticsType(schema, args);
  const int64_t channels = training ? args[0].toTensor().size(1) : 0;
  for (size_t r : {1, 2}) {
    TensorMeta& stats = metadata[r].tensors[0];
    stats.sizes = {channels};
    stats.strides = {1};
    stats.dtype = type;
  }
}

// A convolution's output follows the memory format the CPU's backend choice
// computes in (channels-last when input or weight is), which the Meta kernel,
// seeing a device whose backend is "overrideable", says is contiguous.
// Only metadata is read: host views stand in for CPU tensors of the same
// layout, without touching the data.
void correctConvolution(c10::ArrayRef<c10::IValue> args,
                        OutputMetadata& metadata) {
  const at::Tensor input = hostView(args[0].toTensor());
  const at::Tensor weight = hostView(args[1].toTensor());
  const std::optional<at::Tensor> bias_arg = args[2].toOptional<at::Tensor>();
  const std::optional<at::Tensor> bias =
      bias_arg.has_value() && bias_arg->defined()
          ? std::optional<at::Tensor>(hostView(*bias_arg))
          : std::nullopt;
  const std::vector<int64_t> stride = args[3].toIntVector();
  const std::vector<int64_t> padding = args[4].toIntVector();
  const std::vector<int64_t> dilation = args[5].toIntVector();
  const std::vector<int64_t> output_padding = args[7].toIntVector();
  const at::native::ConvBackend backend = at::native::select_conv_backend(
      input, weight, bias, c10::fromIntArrayRefSlow(stride),
      c10::fromIntArrayRefSlow(padding), c10::fromIntArrayRefSlow(dilation),
      args[6].toBool(), c10::fromIntArrayRefSlow(output_padding),
      c10::SymInt(args[8].toInt()), std::nullopt);
  const at::MemoryFormat format =
      at::native::_determine_backend_memory_format(input, weight, backend);
  TensorMeta& output = metadata[0].tensors[0];
  if (format == at::MemoryFormat::ChannelsLast && output.sizes.size() == 4) {
    output.strides = c10::get_channels_last_strides_2d(output.sizes);
  } else if (format == at::MemoryFormat::ChannelsLast3d &&
             output.sizes.size() == 5) {
    output.strides = c10::get_channels_last_strides_3d(output.sizes);
  }
}

// A multilabel margin loss over one sample (1-D input) without reduction is
// a 0-dim tensor on the CPU. (The Meta kernel says one value per sample,
// [1], as for a batch of one.)
void correctMultilabelMarginLoss(c10::ArrayRef<c10::IValue> args,
                                 OutputMetadata& metadata) {
  if (args[0].toTensor().dim() <= 1 && args[2].toInt() == at::Reduction::None) {
    TensorMeta& loss = metadata[0].tensors[0];
    loss.sizes = {};
    loss.strides = {};
  }
}

// Eigenvectors come from LAPACK column-major on the CPU (the Meta kernel
// says row-major).
void makeColumnMajor(TensorMeta& matrices) {
  const size_t dim = matrices.sizes.size();
  if (dim < 2) {
    return;
  }
  // Row-major strides of the transposed shape, transposed back.
  std::vector<int64_t> transposed = matrices.sizes;
  std::swap(transposed[dim - 1], transposed[dim - 2]);
  const c10::DimVector strides = c10::contiguous_strides(transposed);
  matrices.strides.assign(strides.begin(), strides.end());
  std::swap(matrices.strides[dim - 1], matrices.strides[dim - 2]);
}

// Ops whose CPU kernel chooses the output layout by itself (the FFT
// library from the transform's dims and the input's strides, max_unpool
// from the input's suggested memory format): the CPU kernel is asked, on
// scratch CPU inputs of the same layout. Output metadata is cached per
// signature, so this runs once per signature.
void correctFromCpuProbe(const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> args,
                         OutputMetadata& metadata) {
  torch::jit::Stack stack;
  for (const c10::IValue& arg : args) {
    stack.push_back(mapTensors(arg, [](const at::Tensor& t) {
      if (!t.defined()) {
        return t;
      }
      return at::empty_strided(t.sizes(), t.strides(),
                               t.options().device(c10::kCPU))
          .zero_();
    }));
  }
  op.callBoxed(&stack);
  for (size_t r = 0; r < metadata.size() && r < stack.size(); ++r) {
    if (!stack[r].isTensor() || metadata[r].is_list) {
      continue;
    }
    const at::Tensor probe = stack[r].toTensor();
    TensorMeta& meta = metadata[r].tensors[0];
    if (probe.defined() && probe.sizes() == c10::IntArrayRef(meta.sizes)) {
      meta.strides = probe.strides().vec();
    }
  }
}

// A broadcast input (stride 0 along a dimension of size > 1) does not
// order the dimensions.
bool isExpanded(const at::Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) {
      return true;
    }
  }
  return false;
}

// A pointwise kernel (TensorIterator) resizes an empty out= tensor to the
// layout of its inputs (a transposed input gives a transposed result, as
// the functional op does; a narrowed column-major one, a dense column-major
// result); the out= Meta kernels say contiguous.
void correctPointwiseOut(const c10::FunctionSchema& schema,
                         c10::ArrayRef<c10::IValue> args,
                         OutputMetadata& metadata) {
  for (size_t r = 0; r < metadata.size(); ++r) {
    const std::optional<size_t> out = aliasedArgument(schema, r);
    if (!out.has_value() || !schema.arguments()[*out].is_out() ||
        metadata[r].is_list || !args[*out].isTensor() ||
        args[*out].toTensor().numel() != 0) {
      continue;
    }
    TensorMeta& meta = metadata[r].tensors[0];
    for (size_t i = 0; i < args.size(); ++i) {
      if (schema.arguments()[i].is_out() || !args[i].isTensor()) {
        continue;
      }
      const at::Tensor& input = args[i].toTensor();
      if (!input.defined() || input.sizes() != c10::IntArrayRef(meta.sizes)) {
        continue;
      }
      if (input.is_non_overlapping_and_dense()) {
        meta.strides = input.strides().vec();
        break;
      }
      if (!isExpanded(input)) {
        // Dense strides in the input's order of strides.
        meta.strides = at::infer_dense_strides(input.sizes(), input.strides());
        break;
      }
    }
  }
}

bool layoutChosenByTheCpuKernel(const std::string& name) {
  return name == "aten::_fft_r2c" || name == "aten::_fft_c2r" ||
         name == "aten::_fft_c2c" || name == "aten::max_unpool2d" ||
         name == "aten::max_unpool3d";
}

}  // namespace

void applyCpuOutputContract(const c10::OperatorHandle& op,
                            c10::ArrayRef<c10::IValue> args,
                            OutputMetadata& metadata) {
  const std::string& name = op.operator_name().name;
  const c10::FunctionSchema& schema = op.schema();
  if (name == "aten::native_batch_norm" ||
      name == "aten::_native_batch_norm_legit") {
    correctBatchNorm(schema, args, argument(schema, args, "training")->toBool(),
                     metadata);
  } else if (name == "aten::_batch_norm_with_update") {
    correctBatchNorm(schema, args, /*training=*/true, metadata);
  } else if (name == "aten::_batch_norm_no_update") {
    correctBatchNorm(schema, args, /*training=*/false, metadata);
  } else if (name == "aten::convolution") {
    correctConvolution(args, metadata);
  } else if (name == "aten::multilabel_margin_loss_forward") {
    correctMultilabelMarginLoss(args, metadata);
  } else if (name == "aten::nonzero_static") {
    // The CPU kernel writes a row-major [size, dim] result (the Meta
    // kernel says a transposed, column-major one, as CUDA's).
    TensorMeta& indices = metadata[0].tensors[0];
    const c10::DimVector strides = c10::contiguous_strides(indices.sizes);
    indices.strides.assign(strides.begin(), strides.end());
  } else if (name == "aten::_native_multi_head_attention" &&
             !argument(schema, args, "need_weights")->toBool()) {
    // Without need_weights the CPU kernel returns no attention weights (an
    // undefined tensor); the Meta kernel says an empty one.
    metadata[1].tensors[0].defined = false;
  } else if (name == "aten::linalg_eig") {
    makeColumnMajor(metadata[1].tensors[0]);
  } else if (layoutChosenByTheCpuKernel(name) &&
             !aliasedArgument(schema, 0).has_value()) {
    correctFromCpuProbe(op, args, metadata);
  } else if (name == "aten::native_layer_norm") {
    const at::ScalarType type = statisticsType(schema, args);
    metadata[1].tensors[0].dtype = type;
    metadata[2].tensors[0].dtype = type;
  } else if (op.hasTag(at::Tag::pointwise)) {
    correctPointwiseOut(schema, args, metadata);
  }
}

}  // namespace mydev
