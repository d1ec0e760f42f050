#include "cpu_fallback_policy.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

#include "../core/device.h"

namespace mydev {
namespace {

constexpr int kUnset = -1;
std::atomic<int> policy{kUnset};

std::mutex counts_mutex;
std::map<std::string, int64_t> counts;
std::set<std::string> warned;

}  // namespace

CpuFallbackPolicy parseCpuFallbackPolicy(const std::string& text,
                                         const char* source) {
  if (text.empty() || text == "off") {
    return CpuFallbackPolicy::Off;
  }
  if (text == "warn") {
    return CpuFallbackPolicy::Warn;
  }
  if (text == "on") {
    return CpuFallbackPolicy::On;
  }
  TORCH_CHECK_VALUE(false, source, "='", text,
                    "' is invalid: expected off, warn or on");
}

CpuFallbackPolicy cpuFallbackPolicy() {
  int current = policy.load(std::memory_order_acquire);
  if (current == kUnset) {
    const char* env = std::getenv("MYDEV_CPU_FALLBACK");
    current = static_cast<int>(parseCpuFallbackPolicy(env == nullptr ? "" : env,
                                                      "MYDEV_CPU_FALLBACK"));
    int expected = kUnset;
    policy.compare_exchange_strong(expected, current);
    current = policy.load(std::memory_order_acquire);
  }
  return static_cast<CpuFallbackPolicy>(current);
}

void setCpuFallbackPolicy(CpuFallbackPolicy value) {
  policy.store(static_cast<int>(value), std::memory_order_release);
}

void runOnCpuIfAllowed(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                       const char* why_unsupported, c10::DispatchKey cpu_key) {
  const std::string name = c10::toString(op.operator_name());
  const CpuFallbackPolicy current = cpuFallbackPolicy();
  TORCH_CHECK_NOT_IMPLEMENTED(
      current != CpuFallbackPolicy::Off, kDeviceName, " has no kernel for ",
      name, ": ", why_unsupported,
      ". Set MYDEV_CPU_FALLBACK=warn (or on) to run it "
      "on the CPU, with its inputs copied there and its results copied back.");
  {
    const std::lock_guard<std::mutex> lock(counts_mutex);
    counts[name] += 1;
    if (current == CpuFallbackPolicy::Warn && warned.insert(name).second) {
      TORCH_WARN(kDeviceName, ": ", name,
                 " has no device kernel; running it on the CPU "
                 "(MYDEV_CPU_FALLBACK=warn). Its inputs are copied to the "
                 "host and its results back.");
    }
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

std::map<std::string, int64_t> cpuFallbackCounts() {
  const std::lock_guard<std::mutex> lock(counts_mutex);
  return counts;
}

void resetCpuFallbackCounts() {
  const std::lock_guard<std::mutex> lock(counts_mutex);
  counts.clear();
  warned.clear();
}

}  // namespace mydev
