// The reducing collectives over shared memory: all_reduce, reduce_scatter
// and reduce, each staged through the slots or (large messages) reading the
// peers' buffers directly.
#include "shm_transport_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "reduction.h"
#include "shm_transport_backend_chunks.h"

namespace mydev::distributed {

using namespace shm_chunks;  // NOLINT(build/namespaces): this file's toolkit

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

}  // namespace mydev::distributed
