#include "kernel_results.h"

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/hash.h>

#include <atomic>
#include <unordered_map>

#include "cpu_allocation_redirect.h"
#include "op_schema.h"

namespace mydev {
namespace {

std::atomic<int64_t> g_in_place{0};
std::atomic<int64_t> g_copied{0};

// Which CPU allocation of its output's size a kernel returns as that
// output (RedirectTarget::ordinal), learned from the previous runs of the
// same op and output layout on this executor thread: a kernel allocates
// deterministically for a given call, so the order repeats. Per thread, so
// no lock.
struct OutputKey {
  const c10::FunctionSchema* op;
  size_t output;  // return index, then list element
  size_t layout;  // hash of sizes, strides and dtype
  bool operator==(const OutputKey& other) const {
    return op == other.op && output == other.output && layout == other.layout;
  }
};

struct OutputKeyHash {
  size_t operator()(const OutputKey& key) const {
    return c10::get_hash(key.op, key.output, key.layout);
  }
};

thread_local std::unordered_map<OutputKey, uint32_t, OutputKeyHash>
    t_learned_ordinals;

// An output the kernel can compute into: its bytes are exactly what a CPU
// allocation of its size and layout would be.
bool redirectable(const at::Tensor& output) {
  return output.defined() && output.numel() > 0 &&
         output.storage_offset() == 0 &&
         output.is_non_overlapping_and_dense() &&
         output.storage().nbytes() == output.nbytes();
}

OutputKey keyOf(const c10::FunctionSchema& schema, size_t output,
                const at::Tensor& tensor) {
  size_t layout = static_cast<size_t>(tensor.scalar_type());
  for (const int64_t size : tensor.sizes()) {
    layout = c10::hash_combine(layout, static_cast<size_t>(size));
  }
  for (const int64_t stride : tensor.strides()) {
    layout = c10::hash_combine(layout, static_cast<size_t>(stride));
  }
  return {&schema, output, layout};
}

// One device output of the op and what the kernel returned for it.
struct Output {
  at::Tensor host_view;
  at::Tensor result;
  std::optional<size_t> target;  // index into the targets
  OutputKey key;
};

bool landedIn(const at::Tensor& result, const at::Tensor& output) {
  return result.data_ptr() == output.data_ptr() &&
         result.dtype() == output.dtype() && result.sizes() == output.sizes() &&
         result.strides() == output.strides() &&
         result.is_conj() == output.is_conj() &&
         result.is_neg() == output.is_neg();
}

bool inTakenTarget(const at::Tensor& result,
                   const c10::SmallVectorImpl<RedirectTarget>& targets) {
  const void* memory = result.storage().data();
  for (const RedirectTarget& target : targets) {
    if (target.taken && target.kernel_address == memory) {
      return true;
    }
  }
  return false;
}

// The outputs, flattened (list returns element by element), with a target
// for each fresh, redirectable one. Outputs that alias an argument (in-place
// returns) are never targets: their memory holds the argument.
void collectOutputs(const c10::FunctionSchema& schema,
                    const std::vector<c10::IValue>& host_outputs,
                    c10::SmallVectorImpl<Output>& outputs,
                    c10::SmallVectorImpl<RedirectTarget>& targets) {
  for (size_t r = 0; r < host_outputs.size(); ++r) {
    const bool fresh = !aliasedArgument(schema, r).has_value();
    const auto add = [&](const at::Tensor& host_view, size_t index) {
      Output output{host_view, at::Tensor(), std::nullopt, {}};
      if (fresh && redirectable(host_view)) {
        output.key = keyOf(schema, index, host_view);
        RedirectTarget target{host_view.data_ptr(), host_view.nbytes()};
        const auto learned = t_learned_ordinals.find(output.key);
        if (learned != t_learned_ordinals.end()) {
          target.ordinal = learned->second;
        } else {
          // Unknown yet: the first allocation of its size, after the ones
          // earlier outputs of that size take.
          for (const RedirectTarget& earlier : targets) {
            target.ordinal += earlier.nbytes == target.nbytes ? 1 : 0;
          }
        }
        output.target = targets.size();
        targets.push_back(target);
      }
      outputs.push_back(std::move(output));
    };
    if (host_outputs[r].isTensor()) {
      add(host_outputs[r].toTensor(), r);
    } else if (host_outputs[r].isTensorList()) {
      const c10::List<at::Tensor> list = host_outputs[r].toTensorList();
      for (size_t i = 0; i < list.size(); ++i) {
        add(list.get(i), (r << 32) | i);
      }
    }
  }
}

void takeResults(const torch::jit::Stack& stack,
                 const std::vector<c10::IValue>& host_outputs,
                 c10::SmallVectorImpl<Output>& outputs) {
  size_t next = 0;
  for (size_t r = 0; r < host_outputs.size(); ++r) {
    if (host_outputs[r].isTensor()) {
      outputs[next++].result = stack[r].toTensor();
    } else if (host_outputs[r].isTensorList()) {
      for (const at::Tensor& result : stack[r].toTensorList()) {
        outputs[next++].result = result;
      }
    }
  }
}

}  // namespace

bool outVariantCopiesResults(const c10::OperatorHandle& out_variant) {
  return !out_variant.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
         out_variant.hasKernelForDispatchKey(
             c10::DispatchKey::CompositeExplicitAutograd);
}

void runIntoOutputs(const c10::FunctionSchema& schema,
                    c10::function_ref<void(torch::jit::Stack*)> kernel,
                    torch::jit::Stack* stack,
                    const std::vector<c10::IValue>& host_outputs) {
  c10::SmallVector<Output, 4> outputs;
  c10::SmallVector<RedirectTarget, 4> targets;
  collectOutputs(schema, host_outputs, outputs, targets);
  RedirectCpuAllocations redirect(targets);
  kernel(stack);
  redirect.stop();
  takeResults(*stack, host_outputs, outputs);

  c10::SmallVector<Output*, 4> copies;
  for (Output& output : outputs) {
    if (!output.host_view.defined()) {
      continue;  // an output the op was told to skip
    }
    if (landedIn(output.result, output.host_view)) {
      g_in_place.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    copies.push_back(&output);
    if (output.target.has_value()) {
      // Learn which allocation the result was, for the next run.
      const std::optional<uint32_t> ordinal = redirect.ordinalOf(
          output.result.storage().data(), targets[*output.target].nbytes);
      if (ordinal.has_value()) {
        t_learned_ordinals[output.key] = *ordinal;
      } else {
        t_learned_ordinals.erase(output.key);
      }
    }
  }
  // A result left in the memory of another output (or of its own, laid out
  // differently) is read before any copy writes there.
  for (Output* copy : copies) {
    if (inTakenTarget(copy->result, targets)) {
      copy->result = copy->result.clone();
    }
  }
  for (Output* copy : copies) {
    copy->host_view.copy_(copy->result);
  }
  g_copied.fetch_add(static_cast<int64_t>(copies.size()),
                     std::memory_order_relaxed);
  outputs.clear();
  stack->clear();
  // Everything the kernel allocated in device outputs must be free now: a
  // CPU tensor outliving the kernel would reach device memory from the host
  // (and after the output's memory is reused).
  for (const RedirectTarget& target : targets) {
    TORCH_CHECK(!stillHeld(target),
                "internal error: a CPU kernel kept memory it allocated in a "
                "device output beyond its call");
  }
}

void copyOutArgument(const at::Tensor& host_out, const at::Tensor& device_out) {
  if (device_out.sizes() != host_out.sizes()) {
    // The kernel's whole buffer, then its view of it.
    const int64_t elements = static_cast<int64_t>(host_out.storage().nbytes() /
                                                  host_out.dtype().itemsize());
    const int64_t offset = device_out.storage_offset();
    device_out.resize_({elements});
    device_out.as_strided_(host_out.sizes(), host_out.strides(),
                           offset + host_out.storage_offset());
  }
  device_out.copy_(host_out);
}

ResultPlacementCounts resultPlacementCounts() {
  return {g_in_place.load(std::memory_order_relaxed),
          g_copied.load(std::memory_order_relaxed)};
}

void resetResultPlacementCounts() {
  g_in_place.store(0, std::memory_order_relaxed);
  g_copied.store(0, std::memory_order_relaxed);
}

}  // namespace mydev
