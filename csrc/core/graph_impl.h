// Graphs on mydev (graph_impl.cpp registers the GraphImplInterface behind
// torch.accelerator.Graph and torch.mydev.MydevGraph).
#pragma once

#include <c10/core/Allocator.h>

namespace mydev {

// A fresh pool id that graphs can share (torch.mydev.graph_pool_handle()).
c10::MempoolId_t graphPoolHandle();

}  // namespace mydev
