// The shared-memory transport's frame around every collective: numbering,
// the choice between the staged and the direct algorithm, the probe of
// whether the ranks can map each other's memory, and the barrier. The
// collectives themselves are in shm_transport_backend_{reductions,copies,
// all_to_all,point_to_point}.cpp.
#include "shm_transport_backend.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

#include "../aten/host_view.h"
#include "shm_transport_backend_chunks.h"

namespace mydev::distributed {

namespace {

std::optional<Algorithm> forcedAlgorithm() {
  const char* value = std::getenv("MYCCL_ALGO");
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "auto") {
    return std::nullopt;
  }
  TORCH_CHECK(text == "direct" || text == "staged", "myccl: MYCCL_ALGO='", text,
              "' is invalid: expected auto, direct or staged");
  return text == "direct" ? Algorithm::kDirect : Algorithm::kStaged;
}

}  // namespace

using shm_chunks::describe;

// ----------------------------------------------------------------
// ShmTransportBackend

ShmTransportBackend::ShmTransportBackend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout)
    : CommStreamBackend(rank, size, timeout),
      transport_(std::make_unique<ShmTransport>(store, rank, size, timeout)),
      forced_(forcedAlgorithm()),
      peers_(size) {}

ShmTransportBackend::~ShmTransportBackend() { drain(); }

c10::intrusive_ptr<c10d::Backend> ShmTransportBackend::createSubgroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ShmTransportBackend>(store, rank, size, timeout);
}

void ShmTransportBackend::abortPeers() { transport_->abort(); }

void ShmTransportBackend::onTimeoutChanged(std::chrono::milliseconds timeout) {
  transport_->setTimeout(timeout);
}

std::map<std::string, uint64_t> ShmTransportBackend::algorithmCounts() const {
  return {{"direct", direct_runs_.load()}, {"staged", staged_runs_.load()}};
}

CommStreamBackend::Kernel ShmTransportBackend::numbered(
    std::function<void(uint64_t)> body) {
  // Called right before the launch (see CommStreamBackend's transport
  // kernels): every rank numbers its collectives alike.
  const uint64_t collective = next_collective_++;
  return [body = std::move(body), collective] { body(collective); };
}

void ShmTransportBackend::chooseAlgorithm(Descriptor& mine, size_t bytes,
                                          size_t direct_from_bytes,
                                          const at::Tensor* buffer) const {
  Algorithm algorithm = Algorithm::kStaged;
  if (peer_access_ != PeerAccess::kNo && bytes > 0) {
    algorithm = forced_ ? *forced_
                        : (bytes >= direct_from_bytes ? Algorithm::kDirect
                                                      : Algorithm::kStaged);
  }
  mine.algorithm = static_cast<int32_t>(algorithm);
  if (algorithm == Algorithm::kDirect && buffer != nullptr) {
    mine.input = PeerMemory::publish(deviceAddressOf(*buffer));
  }
}

void ShmTransportBackend::runSteps(
    const Descriptor& mine, const char* name,
    c10::function_ref<void(CollectiveSteps&)> direct,
    c10::function_ref<void(CollectiveSteps&)> staged) {
  CollectiveSteps steps(*transport_, mine.collective, name, mine);
  if (mine.algorithm == static_cast<int32_t>(Algorithm::kDirect)) {
    steps.step();
    if (peersReachable(steps)) {
      count(Algorithm::kDirect);
      direct(steps);
      steps.finish(/*wait_for_peers=*/true);
      peers_.closeOpened();
      return;
    }
  }
  count(Algorithm::kStaged);
  staged(steps);
  steps.finish(/*wait_for_peers=*/false);
}

void ShmTransportBackend::count(Algorithm algorithm) {
  (algorithm == Algorithm::kDirect ? direct_runs_ : staged_runs_).fetch_add(1);
}

bool ShmTransportBackend::peersReachable(CollectiveSteps& steps) {
  if (peer_access_ == PeerAccess::kUnknown) {
    // Each rank tries to map every peer's published buffer (which keeps the
    // mapping for later collectives), then all learn what every rank found:
    // one failure means staging for the group's lifetime; if nobody had
    // anything to map, the next direct collective probes again.
    using Probe = ShmTransport::PeerProbe;
    ShmTransport& transport = steps.transport();
    Probe mine = Probe::kNotTried;
    for (int r = 0; r < transport.size() && mine != Probe::kFailed; ++r) {
      const PeerBuffer& buffer = steps.descriptor(r).input;
      if (r != transport.rank() && buffer.published != 0) {
        std::string why;
        mine = peers_.open(r, buffer, &why) != nullptr ? Probe::kMapped
                                                       : Probe::kFailed;
      }
    }
    transport.publishPeerProbe(mine);
    steps.step();
    bool any_failed = false;
    bool any_mapped = false;
    for (int r = 0; r < transport.size(); ++r) {
      any_failed = any_failed || transport.peerProbe(r) == Probe::kFailed;
      any_mapped = any_mapped || transport.peerProbe(r) == Probe::kMapped;
    }
    peers_.closeOpened();
    if (any_failed) {
      peer_access_ = PeerAccess::kNo;
    } else if (any_mapped) {
      peer_access_ = PeerAccess::kYes;
    } else {
      return true;  // nothing to map: direct costs nothing here
    }
  }
  return peer_access_ == PeerAccess::kYes;
}

std::vector<char*> ShmTransportBackend::openPeers(CollectiveSteps& steps,
                                                  PeerBuffer Descriptor::*which,
                                                  char* own) {
  const int rank = transport_->rank();
  std::vector<char*> pointers(static_cast<size_t>(transport_->size()));
  for (int r = 0; r < transport_->size(); ++r) {
    pointers[static_cast<size_t>(r)] =
        r == rank ? own : peers_.openOrThrow(r, steps.descriptor(r).*which);
  }
  return pointers;
}

// -------------------------------------------------------------------- barrier

CommStreamBackend::Kernel ShmTransportBackend::barrierKernel() {
  return numbered([this](uint64_t collective) {
    const Descriptor mine =
        describe(collective, c10d::OpType::BARRIER, at::kByte, 0);
    CollectiveSteps steps(*transport_, collective, "barrier", mine);
    steps.step();
    steps.finish(/*wait_for_peers=*/false);
  });
}

}  // namespace mydev::distributed
