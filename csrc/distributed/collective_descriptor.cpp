#include "collective_descriptor.h"

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>

#include <cctype>
#include <string>

#include "collective_checks.h"

namespace mydev::distributed {

namespace {

std::string dtypeName(int32_t dtype) {
  std::string name = c10::toString(static_cast<at::ScalarType>(dtype));
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return name;
}

std::string opName(int32_t kind) {
  return c10d::opTypeToString(static_cast<c10d::OpType>(kind));
}

}  // namespace

void checkDescriptors(const Descriptor* all, int rank, int size,
                      const char* what) {
  const Descriptor& mine = all[rank];
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) {
      continue;
    }
    const Descriptor& theirs = all[peer];
    const std::string me = c10::str("myccl: ", what, " on rank ", rank);
    if (theirs.kind != mine.kind || theirs.collective != mine.collective) {
      throwDistError(c10::str(
          "myccl: rank ", rank, " called ", opName(mine.kind), " (collective #",
          mine.collective, " of its group), rank ", peer, " called ",
          opName(theirs.kind), " (collective #", theirs.collective,
          "): every rank must call the same "
          "collectives in the same order"));
    }
    if (theirs.dtype != mine.dtype) {
      throwDistError(c10::str(me, " has ", dtypeName(mine.dtype),
                              " tensors, rank ", peer, " has ",
                              dtypeName(theirs.dtype)));
    }
    if (!mine.has_counts && theirs.numel != mine.numel) {
      throwDistError(c10::str(me, " has ", mine.numel, " ",
                              dtypeName(mine.dtype), " elements, rank ", peer,
                              " has ", theirs.numel));
    }
    if (mine.has_counts && mine.recv_counts[peer] != theirs.send_counts[rank]) {
      throwDistError(c10::str(me, " expects ", mine.recv_counts[peer], " ",
                              dtypeName(mine.dtype), " elements from rank ",
                              peer, ", which sends ",
                              theirs.send_counts[rank]));
    }
    if (mine.has_counts && mine.send_counts[peer] != theirs.recv_counts[rank]) {
      throwDistError(c10::str(me, " sends ", mine.send_counts[peer], " ",
                              dtypeName(mine.dtype), " elements to rank ", peer,
                              ", which expects ", theirs.recv_counts[rank]));
    }
    if (theirs.root != mine.root) {
      throwDistError(c10::str(me, " has root ", mine.root, ", rank ", peer,
                              " has root ", theirs.root));
    }
    if (theirs.reduce_op != mine.reduce_op) {
      throwDistError(c10::str(me, " reduces with op ", mine.reduce_op,
                              ", rank ", peer, " with op ", theirs.reduce_op));
    }
    if (theirs.algorithm != mine.algorithm) {
      throwDistError(c10::str(me, " chose algorithm ", mine.algorithm,
                              ", rank ", peer, " chose ", theirs.algorithm,
                              " (set MYCCL_ALGO alike on every rank)"));
    }
  }
}

}  // namespace mydev::distributed
