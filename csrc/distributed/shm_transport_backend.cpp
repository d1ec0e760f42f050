#include "shm_transport_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../aten/host_view.h"
#include "collective_checks.h"
#include "reduction.h"

namespace mydev::distributed {

namespace {

constexpr size_t kSlotBytes = ShmTransport::kSlotBytes;

// From these message sizes on, the direct algorithms are used. Staging
// costs one group-wide synchronization per 4 MiB chunk plus two copies of
// every byte (into a slot, out of it); direct costs two synchronizations
// (publish buffers, then wait until every peer is done with ours) and no
// staging copy. With benchmarks/collectives.py on the 2-core dev host
// (float32, 2 and 4 ranks, loaded): staged 64 KiB all_reduce 30-60 us,
// direct 1 MiB 100-120 us at 8-10 GB/s bus bandwidth. The crossover was
// set to 256 KiB from these runs and not tuned finer (the machine's load
// moves it more than the algorithms do).
constexpr size_t kDirectAllreduceBytes = size_t{256} << 10;
constexpr size_t kDirectCopyBytes = size_t{256}
                                    << 10;  // gather, scatter, broadcast
// The direct all-reduce writes each reduced piece to every rank while the
// piece is still in this core's L2.
constexpr size_t kReducePieceBytes = size_t{128} << 10;

char* bytesOf(const at::Tensor& host_view) {
  return static_cast<char*>(host_view.data_ptr());
}

uint64_t chunksOf(int64_t numel, int64_t per_chunk) {
  // An empty tensor still takes one step: the first step exchanges the
  // descriptors.
  return numel == 0
             ? 1
             : static_cast<uint64_t>((numel + per_chunk - 1) / per_chunk);
}

// Calls `chunk(offset, length)` for each piece of `numel` elements, `per`
// at a time, in order (see chunksOf).
template <typename Chunk>
void forEachChunk(int64_t numel, int64_t per, Chunk&& chunk) {
  const uint64_t chunks = chunksOf(numel, per);
  for (uint64_t c = 0; c < chunks; ++c) {
    const int64_t off = static_cast<int64_t>(c) * per;
    chunk(off, std::min(per, numel - off));
  }
}

// The first element of rank `r`'s slice when `numel` elements are split in
// `size` nearly equal slices.
int64_t sliceBegin(int64_t numel, int size, int r) { return numel * r / size; }

Descriptor describe(uint64_t collective, c10d::OpType kind,
                    at::ScalarType dtype, int64_t numel, int root = -1,
                    int reduce_op = -1) {
  Descriptor d{};
  d.collective = collective;
  d.kind = static_cast<int32_t>(kind);
  d.dtype = static_cast<int32_t>(dtype);
  d.numel = numel;
  d.root = root;
  d.reduce_op = reduce_op;
  d.algorithm = static_cast<int32_t>(
      Algorithm::kStaged);  // unless chooseAlgorithm says direct
  return d;
}

void copyBytes(char* dst, const char* src, size_t bytes) {
  if (dst != src && bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

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

// ------------------------------------------------------------------ allreduce

CommStreamBackend::Kernel ShmTransportBackend::allreduceKernel(
    const at::Tensor& view, ReduceOp op) {
  return numbered([this, view, op](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const int size = transport.size();
    const int rank = transport.rank();
    const int64_t elem = view.element_size();
    const int64_t numel = view.numel();
    const at::ScalarType dtype = view.scalar_type();
    char* data = bytesOf(view);
    Descriptor mine =
        describe(collective, c10d::OpType::ALLREDUCE, dtype, numel, -1, op);
    chooseAlgorithm(mine, static_cast<size_t>(numel * elem),
                    kDirectAllreduceBytes, &view);
    runSteps(
        mine, "allreduce",
        [&](CollectiveSteps& steps) {
          // In place, one pass: rank r owns slice r. It reduces slice r
          // of every rank's buffer, a cache-sized piece at a time, and
          // writes the result into slice r of every buffer. No other
          // rank reads or writes slice r, so no step is needed between
          // reading and writing; the final wait keeps this rank's buffer
          // alive until every peer is done writing into it.
          const std::vector<char*> buffers =
              openPeers(steps, &Descriptor::input, data);
          const int64_t begin = sliceBegin(numel, size, rank);
          const int64_t end = sliceBegin(numel, size, rank + 1);
          const int64_t piece = static_cast<int64_t>(kReducePieceBytes) / elem;
          std::vector<const void*> parts(buffers.size());
          for (int64_t off = begin; off < end; off += piece) {
            const int64_t len = std::min(piece, end - off);
            for (size_t r = 0; r < buffers.size(); ++r) {
              parts[r] = buffers[r] + off * elem;
            }
            char* reduced = data + off * elem;
            reduceBuffers(reduced, parts, len, dtype, op);
            for (int r = 0; r < size; ++r) {
              copyBytes(buffers[static_cast<size_t>(r)] + off * elem, reduced,
                        static_cast<size_t>(len * elem));
            }
          }
        },
        [&](CollectiveSteps& steps) {
          forEachChunk(
              numel, static_cast<int64_t>(kSlotBytes) / elem,
              [&](int64_t off, int64_t len) {
                steps.step(
                    [&] {
                      copyBytes(static_cast<char*>(transport.slot(rank)),
                                data + off * elem,
                                static_cast<size_t>(len * elem));
                    },
                    [&] {
                      std::vector<const void*> parts;
                      for (int r = 0; r < size; ++r) {
                        parts.push_back(transport.slot(r));
                      }
                      reduceBuffers(data + off * elem, parts, len, dtype, op);
                    });
              });
        });
  });
}

// ------------------------------------------------------------------ broadcast

CommStreamBackend::Kernel ShmTransportBackend::broadcastKernel(
    const at::Tensor& view, int root) {
  return numbered([this, view, root](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const bool is_root = transport.rank() == root;
    const int64_t elem = view.element_size();
    const int64_t numel = view.numel();
    char* data = bytesOf(view);
    Descriptor mine = describe(collective, c10d::OpType::BROADCAST,
                               view.scalar_type(), numel, root);
    chooseAlgorithm(mine, static_cast<size_t>(numel * elem), kDirectCopyBytes,
                    &view);
    runSteps(
        mine, "broadcast",
        [&](CollectiveSteps& steps) {
          if (!is_root) {
            copyBytes(data,
                      peers_.openOrThrow(root, steps.descriptor(root).input),
                      static_cast<size_t>(numel * elem));
          }
        },
        [&](CollectiveSteps& steps) {
          char* slot = static_cast<char*>(transport.slot(root));
          forEachChunk(numel, static_cast<int64_t>(kSlotBytes) / elem,
                       [&](int64_t off, int64_t len) {
                         const size_t bytes = static_cast<size_t>(len * elem);
                         char* chunk = data + off * elem;
                         steps.step(
                             [&] {
                               if (is_root) {
                                 copyBytes(slot, chunk, bytes);
                               }
                             },
                             [&] {
                               if (!is_root) {
                                 copyBytes(chunk, slot, bytes);
                               }
                             });
                       });
        });
  });
}

// ------------------------------------------------------------------ allgather

void ShmTransportBackend::allgatherBody(
    uint64_t collective, const char* name, const at::Tensor& input,
    const std::vector<at::Tensor>& outputs) {
  ShmTransport& transport = *transport_;
  const int size = transport.size();
  const int64_t elem = input.element_size();
  const int64_t numel = input.numel();
  const size_t bytes = static_cast<size_t>(numel * elem);
  char* data = bytesOf(input);
  Descriptor mine =
      describe(collective, c10d::OpType::ALLGATHER, input.scalar_type(), numel);
  chooseAlgorithm(mine, bytes * size, kDirectCopyBytes, &input);
  runSteps(
      mine, name,
      [&](CollectiveSteps& steps) {
        // The input may be this rank's slice of the output (FSDP's copy-in):
        // peers only read it, and this rank writes only the other slices.
        const std::vector<char*> inputs =
            openPeers(steps, &Descriptor::input, data);
        for (int r = 0; r < size; ++r) {
          copyBytes(bytesOf(outputs[static_cast<size_t>(r)]),
                    inputs[static_cast<size_t>(r)], bytes);
        }
      },
      [&](CollectiveSteps& steps) {
        forEachChunk(
            numel, static_cast<int64_t>(kSlotBytes) / elem,
            [&](int64_t off, int64_t len) {
              const size_t chunk_bytes = static_cast<size_t>(len * elem);
              steps.step(
                  [&] {
                    copyBytes(
                        static_cast<char*>(transport.slot(transport.rank())),
                        data + off * elem, chunk_bytes);
                  },
                  [&] {
                    for (int r = 0; r < size; ++r) {
                      copyBytes(
                          bytesOf(outputs[static_cast<size_t>(r)]) + off * elem,
                          static_cast<char*>(transport.slot(r)), chunk_bytes);
                    }
                  });
            });
      });
}

CommStreamBackend::Kernel ShmTransportBackend::allgatherKernel(
    const char* name, const at::Tensor& in,
    const std::vector<at::Tensor>& views) {
  return numbered([this, name, in, views](uint64_t collective) {
    allgatherBody(collective, name, in, views);
  });
}

CommStreamBackend::Kernel ShmTransportBackend::allgatherIntoTensorKernel(
    const at::Tensor& in, const at::Tensor& out) {
  std::vector<at::Tensor> views;
  for (int r = 0; r < size_; ++r) {
    views.push_back(out.narrow(0, r * in.numel(), in.numel()));
  }
  return allgatherKernel("_allgather_base", in, views);
}

// ------------------------------------------------------------- reduce_scatter

CommStreamBackend::Kernel ShmTransportBackend::reduceScatterKernel(
    const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
  return numbered([this, in, out, op](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const int size = transport.size();
    const int rank = transport.rank();
    const int64_t elem = in.element_size();
    const int64_t numel = out.numel();  // per rank
    const at::ScalarType dtype = out.scalar_type();
    Descriptor mine = describe(collective, c10d::OpType::_REDUCE_SCATTER_BASE,
                               dtype, numel, -1, op);
    chooseAlgorithm(mine, static_cast<size_t>(numel * elem * size),
                    kDirectAllreduceBytes, &in);
    runSteps(
        mine, "_reduce_scatter_base",
        [&](CollectiveSteps& steps) {
          const std::vector<char*> inputs =
              openPeers(steps, &Descriptor::input, bytesOf(in));
          std::vector<const void*> parts;
          for (char* input : inputs) {
            parts.push_back(input + rank * numel * elem);
          }
          reduceBuffers(bytesOf(out), parts, numel, dtype, op);
        },
        [&](CollectiveSteps& steps) {
          // Each slot holds one chunk for every destination rank.
          const int64_t per = static_cast<int64_t>(kSlotBytes) / elem / size;
          forEachChunk(numel, per, [&](int64_t off, int64_t len) {
            steps.step(
                [&] {
                  char* slot = static_cast<char*>(transport.slot(rank));
                  for (int d = 0; d < size; ++d) {
                    copyBytes(slot + d * per * elem,
                              bytesOf(in) + (d * numel + off) * elem,
                              static_cast<size_t>(len * elem));
                  }
                },
                [&] {
                  std::vector<const void*> parts;
                  for (int r = 0; r < size; ++r) {
                    parts.push_back(static_cast<char*>(transport.slot(r)) +
                                    rank * per * elem);
                  }
                  reduceBuffers(bytesOf(out) + off * elem, parts, len, dtype,
                                op);
                });
          });
        });
  });
}

// --------------------------------------------------------------------- reduce

CommStreamBackend::Kernel ShmTransportBackend::reduceKernel(
    const at::Tensor& view, ReduceOp op, int root) {
  return numbered([this, view, op, root](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const int64_t elem = view.element_size();
    const int64_t numel = view.numel();
    char* data = bytesOf(view);
    const Descriptor mine = describe(collective, c10d::OpType::REDUCE,
                                     view.scalar_type(), numel, root, op);
    runSteps(mine, "reduce", /*direct=*/nullptr, [&](CollectiveSteps& steps) {
      forEachChunk(
          numel, static_cast<int64_t>(kSlotBytes) / elem,
          [&](int64_t off, int64_t len) {
            steps.step(
                [&] {
                  copyBytes(
                      static_cast<char*>(transport.slot(transport.rank())),
                      data + off * elem, static_cast<size_t>(len * elem));
                },
                [&] {
                  if (transport.rank() != root) {
                    return;
                  }
                  std::vector<const void*> parts;
                  for (int r = 0; r < transport.size(); ++r) {
                    parts.push_back(transport.slot(r));
                  }
                  reduceBuffers(data + off * elem, parts, len,
                                view.scalar_type(), op);
                });
          });
    });
  });
}

// ------------------------------------------------------------ gather, scatter

CommStreamBackend::Kernel ShmTransportBackend::gatherKernel(
    const at::Tensor& in, const std::vector<at::Tensor>& views, int root) {
  return numbered([this, in, views, root](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const int64_t elem = in.element_size();
    const int64_t numel = in.numel();
    const Descriptor mine = describe(collective, c10d::OpType::GATHER,
                                     in.scalar_type(), numel, root);
    runSteps(mine, "gather", /*direct=*/nullptr, [&](CollectiveSteps& steps) {
      forEachChunk(
          numel, static_cast<int64_t>(kSlotBytes) / elem,
          [&](int64_t off, int64_t len) {
            const size_t bytes = static_cast<size_t>(len * elem);
            steps.step(
                [&] {
                  copyBytes(
                      static_cast<char*>(transport.slot(transport.rank())),
                      bytesOf(in) + off * elem, bytes);
                },
                [&] {
                  if (transport.rank() != root) {
                    return;
                  }
                  for (int r = 0; r < transport.size(); ++r) {
                    copyBytes(
                        bytesOf(views[static_cast<size_t>(r)]) + off * elem,
                        static_cast<char*>(transport.slot(r)), bytes);
                  }
                });
          });
    });
  });
}

CommStreamBackend::Kernel ShmTransportBackend::scatterKernel(
    const std::vector<at::Tensor>& views, const at::Tensor& out, int root) {
  return numbered([this, out, views, root](uint64_t collective) {
    ShmTransport& transport = *transport_;
    const int size = transport.size();
    const int rank = transport.rank();
    const int64_t elem = out.element_size();
    const int64_t numel = out.numel();
    const Descriptor mine = describe(collective, c10d::OpType::SCATTER,
                                     out.scalar_type(), numel, root);
    runSteps(mine, "scatter", /*direct=*/nullptr, [&](CollectiveSteps& steps) {
      const int64_t per = static_cast<int64_t>(kSlotBytes) / elem / size;
      char* slot = static_cast<char*>(transport.slot(root));
      forEachChunk(numel, per, [&](int64_t off, int64_t len) {
        const size_t bytes = static_cast<size_t>(len * elem);
        steps.step(
            [&] {
              if (rank != root) {
                return;
              }
              for (int d = 0; d < size; ++d) {
                copyBytes(slot + d * per * elem,
                          bytesOf(views[static_cast<size_t>(d)]) + off * elem,
                          bytes);
              }
            },
            [&] {
              copyBytes(bytesOf(out) + off * elem, slot + rank * per * elem,
                        bytes);
            });
      });
    });
  });
}

// ----------------------------------------------------------------- all_to_all

void ShmTransportBackend::alltoallBody(uint64_t collective, const char* name,
                                       int32_t dtype,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& outputs) {
  ShmTransport& transport = *transport_;
  const int size = transport.size();
  const int rank = transport.rank();
  const int64_t elem = static_cast<int64_t>(
      c10::elementSize(static_cast<at::ScalarType>(dtype)));
  Descriptor mine = describe(collective, c10d::OpType::ALLTOALL,
                             static_cast<at::ScalarType>(dtype), 0);
  mine.has_counts = 1;
  for (int r = 0; r < size; ++r) {
    mine.send_counts[r] = inputs[static_cast<size_t>(r)].numel();
    mine.recv_counts[r] = outputs[static_cast<size_t>(r)].numel();
  }
  // Per-peer sizes may differ, so the choice cannot depend on them: direct
  // whenever the ranks can reach each other's memory.
  chooseAlgorithm(mine, 1, 0, /*buffer=*/nullptr);
  const bool direct =
      mine.algorithm == static_cast<int32_t>(Algorithm::kDirect);
  if (direct) {
    for (int r = 0; r < size; ++r) {
      const at::Tensor& part = inputs[static_cast<size_t>(r)];
      if (part.numel() > 0) {
        mine.parts[r] = PeerMemory::publish(deviceAddressOf(part));
        mine.input = mine.parts[r];
      }
    }
  }
  runSteps(
      mine, name,
      [&](CollectiveSteps& steps) {
        for (int s = 0; s < size; ++s) {
          const at::Tensor& out = outputs[static_cast<size_t>(s)];
          if (out.numel() == 0) {
            continue;
          }
          const char* from =
              s == rank
                  ? bytesOf(inputs[static_cast<size_t>(rank)])
                  : peers_.openOrThrow(s, steps.descriptor(s).parts[rank]);
          copyBytes(bytesOf(out), from,
                    static_cast<size_t>(out.numel() * elem));
        }
      },
      [&](CollectiveSteps& steps) {
        // Each slot holds one segment per destination; the steps needed are
        // set by the largest piece of any rank, which every rank knows after
        // the first step.
        const int64_t per = static_cast<int64_t>(kSlotBytes) / size / elem;
        const auto stage = [&](int64_t c) {
          steps.step(
              [&] {
                char* slot = static_cast<char*>(transport.slot(rank));
                for (int d = 0; d < size; ++d) {
                  const int64_t n = inputs[static_cast<size_t>(d)].numel();
                  const int64_t off = std::min(n, c * per);
                  copyBytes(
                      slot + d * per * elem,
                      bytesOf(inputs[static_cast<size_t>(d)]) + off * elem,
                      static_cast<size_t>(std::min(per, n - off) * elem));
                }
              },
              [&] {
                for (int s = 0; s < size; ++s) {
                  const int64_t n = outputs[static_cast<size_t>(s)].numel();
                  const int64_t off = std::min(n, c * per);
                  copyBytes(
                      bytesOf(outputs[static_cast<size_t>(s)]) + off * elem,
                      static_cast<char*>(transport.slot(s)) + rank * per * elem,
                      static_cast<size_t>(std::min(per, n - off) * elem));
                }
              });
        };
        // A failed direct attempt already exchanged the descriptors.
        const uint64_t first_chunk = direct ? 0 : 1;
        if (!direct) {
          stage(0);  // also exchanges the descriptors
        }
        int64_t largest = 0;
        for (int r = 0; r < size; ++r) {
          for (int d = 0; d < size; ++d) {
            largest = std::max(largest, steps.descriptor(r).send_counts[d]);
          }
        }
        const uint64_t chunks = chunksOf(largest, per);
        for (uint64_t c = first_chunk; c < chunks; ++c) {
          stage(static_cast<int64_t>(c));
        }
      });
}

namespace {

// Flat views of the per-rank pieces of the host view `t` (rows of dim 0).
std::vector<at::Tensor> splitViews(const at::Tensor& t,
                                   const std::vector<int64_t>& rows) {
  const at::Tensor flat = t.view(-1);
  const int64_t row_numel = t.size(0) == 0 ? 0 : t.numel() / t.size(0);
  std::vector<at::Tensor> views;
  int64_t offset = 0;
  for (const int64_t n : rows) {
    views.push_back(flat.narrow(0, offset * row_numel, n * row_numel));
    offset += n;
  }
  return views;
}

}  // namespace

CommStreamBackend::Kernel ShmTransportBackend::alltoallBaseKernel(
    const at::Tensor& in, const at::Tensor& out, const AlltoallRows& rows) {
  return alltoallKernel(splitViews(in, rows.input),
                        splitViews(out, rows.output));
}

CommStreamBackend::Kernel ShmTransportBackend::alltoallKernel(
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& outputs) {
  const auto dtype = static_cast<int32_t>(inputs[0].scalar_type());
  return numbered([this, dtype, inputs, outputs](uint64_t collective) {
    alltoallBody(collective, "all_to_all", dtype, inputs, outputs);
  });
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

// ------------------------------------------------------------- point to point

void ShmTransportBackend::runP2P(const std::vector<P2PRequest>& requests,
                                 const char* name) {
  ShmTransport& transport = *transport_;
  const int rank = transport.rank();
  std::vector<P2POperation> operations;
  operations.reserve(requests.size());
  for (const P2PRequest& request : requests) {
    P2PChannel& channel = request.is_send
                              ? transport.channel(rank, request.peer)
                              : transport.channel(request.peer, rank);
    operations.emplace_back(channel, request.is_send, bytesOf(request.view),
                            request.view.numel(),
                            static_cast<int32_t>(request.view.scalar_type()),
                            static_cast<size_t>(request.view.nbytes()),
                            request.tag, rank, request.peer);
  }
  // All operations advance together: a receive that cannot finish yet does
  // not hold back a send that the peer waits for. But one channel carries
  // one message at a time, in the batch's order: two sends to the same peer
  // interleaving their chunks would hand the receiver a chunk of the wrong
  // message.
  transport.waitUntil(
      [&] {
        bool all_done = true;
        std::vector<const P2PChannel*> channels_in_use;
        for (P2POperation& operation : operations) {
          if (operation.done()) {
            continue;
          }
          all_done = false;
          const P2PChannel* channel = &operation.channel();
          if (std::find(channels_in_use.begin(), channels_in_use.end(),
                        channel) != channels_in_use.end()) {
            continue;
          }
          if (!operation.progress()) {
            channels_in_use.push_back(channel);
          }
        }
        return all_done;
      },
      name,
      [&] {
        for (const P2POperation& operation : operations) {
          if (!operation.done()) {
            return operation.waitingFor();
          }
        }
        return std::string("nothing");
      });
}

CommStreamBackend::Kernel ShmTransportBackend::pointToPointKernel(
    bool is_send, const at::Tensor& view, int peer, int tag) {
  const P2PRequest request{is_send, view, peer, tag};
  if (p2p_batch_) {
    p2p_batch_->push_back(request);
    return [] {};
  }
  const char* name = is_send ? "send" : "recv";
  return [this, request, name] { runP2P({request}, name); };
}

void ShmTransportBackend::startCoalescing() {
  CommStreamBackend::startCoalescing();
  p2p_batch_.emplace();
}

c10::intrusive_ptr<c10d::Work> ShmTransportBackend::endCoalescing() {
  if (p2p_batch_ && !p2p_batch_->empty()) {
    std::vector<P2PRequest> batch = std::move(*p2p_batch_);
    // Launched while the base still coalesces: its Work is the last one,
    // which the coalesced Work completes with.
    launch(c10d::OpType::COALESCED, "batch_isend_irecv",
           defaultDevice(std::nullopt), {}, {},
           [this, batch = std::move(batch)] {
             runP2P(batch, "batch_isend_irecv");
           });
  }
  p2p_batch_.reset();
  return CommStreamBackend::endCoalescing();
}

}  // namespace mydev::distributed
