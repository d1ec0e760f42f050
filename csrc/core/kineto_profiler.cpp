// The Kineto activity profiler of PrivateUse1: what makes
// torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1])
// show mydev kernels, copies and fills on device timelines, with device times
// in key_averages() and launch-to-kernel flow arrows in the chrome trace.
//
// It turns the driver's activity records (mydevActivity* in the driver API)
// into the activities CUPTI's records become for cuda: one host-side runtime
// event per enqueueing call (PRIVATEUSE1_RUNTIME, on the launching thread)
// and one device activity (CONCURRENT_KERNEL, GPU_MEMCPY or GPU_MEMSET) with
// pid = device index and tid = torch stream id, both linked to the torch
// operation that launched the work through Kineto's correlation ids.
//
// Kineto ships in the torch wheel only when torch was built with it; setup.py
// defines USE_KINETO then (torch.autograd.kineto_available()).
#ifdef USE_KINETO

// Kineto's activities format their metadata with fmt, whose compiled part
// torch does not export: use fmt's header-only form in this file.
#define FMT_HEADER_ONLY
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <c10/util/ApproximateClock.h>
#include <libkineto.h>
#include <output_base.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "device.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

using libkineto::ActivityType;

const std::set<ActivityType>& deviceActivityTypes() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
      ActivityType::GPU_MEMSET, ActivityType::GPU_USER_ANNOTATION,
      ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

ActivityType typeOf(const mydevActivityRecord& record) {
  switch (record.kind) {
    case mydevActivityKindMemcpy: return ActivityType::GPU_MEMCPY;
    case mydevActivityKindMemset: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL;
  }
}

// The names CUPTI's records get in cuda traces.
std::string deviceActivityName(const mydevActivityRecord& record) {
  switch (record.kind) {
    case mydevActivityKindKernel: return record.name;
    case mydevActivityKindMemset: return "Memset (Device)";
    case mydevActivityKindMemcpy:
      switch (record.copyKind) {
        case mydevMemcpyHostToDevice: return "Memcpy HtoD (Host -> Device)";
        case mydevMemcpyDeviceToHost: return "Memcpy DtoH (Device -> Host)";
        case mydevMemcpyDeviceToDevice: return "Memcpy DtoD (Device -> Device)";
        default: return "Memcpy HtoH (Host -> Host)";
      }
  }
  return record.name;
}

// Offset from the driver's clock to the one torch's profiler stamps host
// events with (c10::getTime: CLOCK_REALTIME), read around one driver reading;
// the tightest of a few bracketings wins.
int64_t driverToProfilerClock() {
  int64_t best_width = INT64_MAX;
  int64_t offset = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int64_t before = c10::getTime();
    int64_t driver = 0;
    MYDEV_CHECK(mydevActivityGetTimestamp(&driver));
    const int64_t after = c10::getTime();
    if (after - before < best_width) {
      best_width = after - before;
      offset = before + (after - before) / 2 - driver;
    }
  }
  return offset;
}

std::vector<mydevActivityRecord> drainRecords() {
  std::vector<mydevActivityRecord> records;
  constexpr size_t kChunk = 4096;
  for (;;) {
    const size_t have = records.size();
    records.resize(have + kChunk);
    size_t count = 0;
    MYDEV_CHECK(mydevActivityFlush(records.data() + have, kChunk, &count));
    records.resize(have + count);
    if (count < kChunk) return records;
  }
}

class MydevProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit MydevProfilerSession(std::set<ActivityType> types)
      : types_(std::move(types)),
        buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {
    buffer_->span.name = kDeviceName;
    buffer_->span.iteration = 0;  // "mydev (0)" next to "PyTorch Profiler (0)"
  }

  ~MydevProfilerSession() override {
    if (status_ == libkineto::TraceStatus::RECORDING) {
      mydevActivityEnable(0);
    }
  }

  void start() override {
    drainRecords();  // work recorded for an earlier session is not ours
    clock_offset_ = driverToProfilerClock();
    buffer_->span.startTime = c10::getTime();
    MYDEV_CHECK(mydevActivityEnable(1));
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    MYDEV_CHECK(mydevActivityEnable(0));
    buffer_->span.endTime = c10::getTime();
    records_ = drainRecords();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(
        logger, [](int32_t) { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity,
                    int64_t /*capture_start*/, int64_t capture_end) override {
    for (const mydevActivityRecord& record : records_) {
      const int64_t stream = streamIdOfHandle(
          static_cast<c10::DeviceIndex>(record.device), record.stream);
      const libkineto::ITraceActivity* op =
          record.externalId != 0
              ? linked_activity(static_cast<int32_t>(record.externalId))
              : nullptr;
      // Flow arrows only where both of their ends are in the trace.
      const bool flow =
          wants(typeOf(record)) && wants(ActivityType::PRIVATEUSE1_RUNTIME);
      if (wants(typeOf(record))) {
        logger.handleActivity(deviceActivity(record, stream, op, flow));
        streams_.insert({record.device, stream});
        if (record.userExternalId != 0 &&
            wants(ActivityType::GPU_USER_ANNOTATION)) {
          extendUserRange(
              record, stream,
              linked_activity(static_cast<int32_t>(record.userExternalId)));
        }
      }
      if (wants(ActivityType::PRIVATEUSE1_RUNTIME)) {
        logger.handleActivity(runtimeActivity(record, op, flow));
      }
    }
    for (auto& entry : user_ranges_) {
      logger.handleActivity(*entry.second);
    }
    const int64_t time = capture_end != 0 ? capture_end : c10::getTime();
    for (const int device : devices()) {
      logger.handleDeviceInfo(deviceInfo(device), time);
    }
  }

  // Kineto names one device per session; processTrace names them all.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const std::set<int> used = devices();
    const int device = used.empty() ? 0 : *used.begin();
    return std::make_unique<libkineto::DeviceInfo>(deviceInfo(device));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : streams_) {
      const std::string name =
          stream < 0 ? "driver stream" : "stream " + std::to_string(stream);
      infos.push_back({stream, stream, device, name});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override {
    mydevActivityPushExternalId(mydevActivityExternalIdOperation, id);
  }
  // An operation that began before this session pops what it never pushed
  // here: the driver's error then is expected and ignored.
  void popCorrelationId() override {
    mydevActivityPopExternalId(mydevActivityExternalIdOperation, nullptr);
  }
  void pushUserCorrelationId(uint64_t id) override {
    mydevActivityPushExternalId(mydevActivityExternalIdUser, id);
  }
  void popUserCorrelationId() override {
    mydevActivityPopExternalId(mydevActivityExternalIdUser, nullptr);
  }

 private:
  bool wants(ActivityType type) const { return types_.count(type) != 0; }

  std::set<int> devices() const {
    std::set<int> used;
    for (const auto& entry : streams_) used.insert(entry.first);
    return used;
  }

  static libkineto::DeviceInfo deviceInfo(int device) {
    return {device, device + libkineto::kExceedMaxPid,
            kDeviceName + (":" + std::to_string(device)),
            kDeviceName + (" " + std::to_string(device))};
  }

  // Activities live in the trace buffer handed to Kineto (getTraceBuffer),
  // so the pointers the logger keeps stay valid as long as the trace.
  libkineto::GenericTraceActivity& newActivity(ActivityType type,
                                               const std::string& name) {
    buffer_->emplace_activity(buffer_->span, type, name);
    return *buffer_->activities.back();
  }

  // Both halves of a record share its correlation id, and the flow (when
  // `flow`) goes from the host call to the device work.
  static void linkTo(libkineto::GenericTraceActivity& activity,
                     const mydevActivityRecord& record,
                     const libkineto::ITraceActivity* op, bool flow,
                     bool flow_start) {
    activity.id = static_cast<int32_t>(record.correlationId);
    activity.linked = op;
    if (flow) {
      activity.flow.id = static_cast<uint32_t>(record.correlationId);
      activity.flow.type = libkineto::kLinkAsyncCpuGpu;
      activity.flow.start = flow_start;
    }
    activity.addMetadata("correlation", record.correlationId);
  }

  const libkineto::ITraceActivity& deviceActivity(
      const mydevActivityRecord& record, int64_t stream,
      const libkineto::ITraceActivity* op, bool flow) {
    auto& activity = newActivity(typeOf(record), deviceActivityName(record));
    activity.startTime = record.start + clock_offset_;
    activity.endTime = record.end + clock_offset_;
    activity.device = record.device;
    activity.resource = static_cast<int32_t>(stream);
    linkTo(activity, record, op, flow, /*flow_start=*/false);
    activity.addMetadata("device", record.device);
    activity.addMetadata("stream", stream);
    if (record.kind != mydevActivityKindKernel) {
      activity.addMetadata("bytes", record.bytes);
      const int64_t duration = std::max<int64_t>(record.end - record.start, 1);
      // bytes per nanosecond is GB/s, as cuda traces state it.
      activity.addMetadata("memory bandwidth (GB/s)",
                           static_cast<double>(record.bytes) / duration);
    }
    return activity;
  }

  const libkineto::ITraceActivity& runtimeActivity(
      const mydevActivityRecord& record, const libkineto::ITraceActivity* op,
      bool flow) {
    auto& activity = newActivity(ActivityType::PRIVATEUSE1_RUNTIME, record.api);
    activity.startTime = record.apiStart + clock_offset_;
    activity.endTime = record.apiEnd + clock_offset_;
    activity.device = libkineto::processId();
    activity.resource = static_cast<int32_t>(record.hostThread);
    activity.threadId = static_cast<int32_t>(record.hostThread);
    linkTo(activity, record, op, flow, /*flow_start=*/true);
    return activity;
  }

  // A record_function range on the device: from the first to the last work
  // it enqueued on each stream, as Kineto draws gpu_user_annotation for cuda.
  void extendUserRange(const mydevActivityRecord& record, int64_t stream,
                       const libkineto::ITraceActivity* range) {
    if (range == nullptr) return;
    const auto key =
        std::make_tuple(record.device, stream, record.userExternalId);
    auto& slot = user_ranges_[key];
    if (slot == nullptr) {
      slot = &newActivity(ActivityType::GPU_USER_ANNOTATION, range->name());
      slot->startTime = record.start + clock_offset_;
      slot->endTime = record.end + clock_offset_;
      slot->device = record.device;
      slot->resource = static_cast<int32_t>(stream);
      slot->id = static_cast<int32_t>(record.userExternalId);
      slot->linked = range;
    }
    slot->startTime = std::min(slot->startTime, record.start + clock_offset_);
    slot->endTime = std::max(slot->endTime, record.end + clock_offset_);
  }

  const std::set<ActivityType> types_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  int64_t clock_offset_ = 0;
  std::vector<mydevActivityRecord> records_;
  std::set<std::pair<int, int64_t>> streams_;
  std::map<std::tuple<int, int64_t, uint64_t>, libkineto::GenericTraceActivity*>
      user_ranges_;
};

class MydevActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override {
    return deviceActivityTypes();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    std::set<ActivityType> ours;
    for (const ActivityType type : activity_types) {
      if (deviceActivityTypes().count(type) != 0) ours.insert(type);
    }
    // PRIVATEUSE1_RUNTIME is among torch's CPU activity types too: a
    // CPU-only profile must not switch device recording on.
    const bool device_work = ours.count(ActivityType::CONCURRENT_KERNEL) ||
                             ours.count(ActivityType::GPU_MEMCPY) ||
                             ours.count(ActivityType::GPU_MEMSET);
    if (!device_work) return nullptr;
    return std::make_unique<MydevProfilerSession>(std::move(ours));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  const std::string name_{kDeviceName};
};

REGISTER_PRIVATEUSE1_PROFILER(MydevActivityProfiler);

}  // namespace
}  // namespace mydev

#endif  // USE_KINETO
