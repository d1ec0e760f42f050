#include "p2p_channel.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "collective_checks.h"

namespace mydev::distributed {

P2POperation::P2POperation(P2PChannel& channel, bool is_send, char* data,
                           int64_t numel, int32_t dtype, size_t bytes,
                           int64_t tag, int rank, int peer)
    : channel_(channel),
      is_send_(is_send),
      data_(data),
      numel_(numel),
      dtype_(dtype),
      bytes_(bytes),
      tag_(tag),
      rank_(rank),
      peer_(peer),
      // An empty message is still one (empty) chunk, so that it is matched.
      chunk_count_(std::max<int64_t>(
          1, static_cast<int64_t>((bytes + P2PChannel::kEntryBytes - 1) /
                                  P2PChannel::kEntryBytes))) {}

bool P2POperation::progress() {
  while (!done() && (is_send_ ? sendChunk() : receiveChunk())) {
    ++chunks_done_;
  }
  return done();
}

bool P2POperation::sendChunk() {
  const uint64_t posted = channel_.posted.load(std::memory_order_relaxed);
  if (posted - channel_.consumed.load(std::memory_order_acquire) >=
      P2PChannel::kEntries) {
    return false;  // the ring is full
  }
  const size_t index = posted % P2PChannel::kEntries;
  const size_t offset =
      static_cast<size_t>(chunks_done_) * P2PChannel::kEntryBytes;
  const size_t bytes =
      std::min(P2PChannel::kEntryBytes, bytes_ - std::min(bytes_, offset));
  channel_.entries[index] =
      P2PEntry{tag_, numel_, dtype_, static_cast<int32_t>(chunks_done_),
               static_cast<int64_t>(bytes)};
  if (bytes > 0) {
    std::memcpy(channel_.data[index], data_ + offset, bytes);
  }
  channel_.posted.store(posted + 1, std::memory_order_release);
  return true;
}

bool P2POperation::receiveChunk() {
  const uint64_t consumed = channel_.consumed.load(std::memory_order_relaxed);
  if (channel_.posted.load(std::memory_order_acquire) == consumed) {
    return false;  // nothing sent yet
  }
  const size_t index = consumed % P2PChannel::kEntries;
  const P2PEntry entry = channel_.entries[index];
  if (entry.tag != tag_ || entry.numel != numel_ || entry.dtype != dtype_ ||
      entry.chunk != chunks_done_) {
    const auto dtype = [](int32_t d) {
      return c10::toString(static_cast<at::ScalarType>(d));
    };
    throwDistError(c10::str("myccl: recv on rank ", rank_, " from rank ", peer_,
                            " expected tag ", tag_, " with ", numel_, " ",
                            dtype(dtype_), " elements, rank ", peer_,
                            " sent tag ", entry.tag, " with ", entry.numel, " ",
                            dtype(entry.dtype), " elements"));
  }
  if (entry.bytes > 0) {
    std::memcpy(
        data_ + static_cast<size_t>(chunks_done_) * P2PChannel::kEntryBytes,
        channel_.data[index], static_cast<size_t>(entry.bytes));
  }
  channel_.consumed.store(consumed + 1, std::memory_order_release);
  return true;
}

std::string P2POperation::waitingFor() const {
  return is_send_ ? c10::str("rank ", peer_, " to receive (tag ", tag_, ")")
                  : c10::str("rank ", peer_, " to send (tag ", tag_, ")");
}

}  // namespace mydev::distributed
