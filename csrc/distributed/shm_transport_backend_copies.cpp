// The copying collectives over shared memory: broadcast, all_gather (list
// and into-tensor forms), gather and scatter.
#include "shm_transport_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "shm_transport_backend_chunks.h"

namespace mydev::distributed {

using namespace shm_chunks;  // NOLINT(build/namespaces): this file's toolkit

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

}  // namespace mydev::distributed
