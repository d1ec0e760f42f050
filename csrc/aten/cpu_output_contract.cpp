#include "cpu_output_contract.h"

#include <optional>
#include <string>

namespace mydev {
namespace {

std::optional<size_t> argumentIndex(const c10::FunctionSchema& schema, const char* name) {
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
void correctBatchNorm(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                      bool training, OutputMetadata& metadata) {
  const at::ScalarType type = statisticsType(schema, args);
  const int64_t channels = training ? args[0].toTensor().size(1) : 0;
  for (size_t r : {1, 2}) {
    TensorMeta& stats = metadata[r].tensors[0];
    stats.sizes = {channels};
    stats.strides = {1};
    stats.dtype = type;
  }
}

}  // namespace

void applyCpuOutputContract(const c10::OperatorHandle& op,
                            c10::ArrayRef<c10::IValue> args,
                            OutputMetadata& metadata) {
  const std::string& name = op.operator_name().name;
  const c10::FunctionSchema& schema = op.schema();
  if (name == "aten::native_batch_norm" || name == "aten::_native_batch_norm_legit") {
    correctBatchNorm(schema, args, argument(schema, args, "training")->toBool(), metadata);
  } else if (name == "aten::_batch_norm_with_update") {
    correctBatchNorm(schema, args, /*training=*/true, metadata);
  } else if (name == "aten::_batch_norm_no_update") {
    correctBatchNorm(schema, args, /*training=*/false, metadata);
  } else if (name == "aten::native_layer_norm") {
    const at::ScalarType type = statisticsType(schema, args);
    metadata[1].tensors[0].dtype = type;
    metadata[2].tensors[0].dtype = type;
  }
}

}  // namespace mydev
