// all_to_all over shared memory, with per-peer sizes: direct reads of the
// peers' published pieces, or slots holding one segment per destination.
#include "shm_transport_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "../aten/host_view.h"
#include "shm_transport_backend_chunks.h"

namespace mydev::distributed {

using namespace shm_chunks;  // NOLINT(build/namespaces): this file's toolkit

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

}  // namespace mydev::distributed
