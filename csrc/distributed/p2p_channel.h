// Point-to-point messages (send/recv) between two ranks of a group: one
// channel per ordered pair of ranks in the shared segment, independent of
// the collectives' steps. A channel is a ring of kEntries chunks; the sender
// writes chunks while the ring has room and the receiver copies them out in
// order. A message of up to kEntries * kEntryBytes is therefore sent eagerly:
// the send completes before the receiver arrives, so two ranks that send to
// each other and then receive, in that order on one stream, do not deadlock.
// Larger messages need the receiver to make progress; the operations of one
// batch (batch_isend_irecv) are progressed together, so any order inside a
// batch works.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mydev::distributed {

struct P2PEntry {
  int64_t tag;
  int64_t numel;  // of the whole message
  int32_t dtype;  // at::ScalarType
  int32_t chunk;  // index of this chunk in the message
  int64_t bytes;  // in this chunk
};

struct alignas(64) P2PChannel {
  static constexpr int kEntries = 8;
  static constexpr size_t kEntryBytes = size_t{32} << 10;

  alignas(64) std::atomic<uint64_t> posted;    // chunks written by the sender
  alignas(64) std::atomic<uint64_t> consumed;  // chunks read by the receiver
  alignas(64) P2PEntry entries[kEntries];
  alignas(64) char data[kEntries][kEntryBytes];
};

// One send or receive, progressed without blocking.
class P2POperation {
 public:
  // `data`: the host view of the tensor (read for a send, written for a
  // receive); `peer`: the other rank.
  P2POperation(P2PChannel& channel, bool is_send, char* data, int64_t numel,
               int32_t dtype, size_t bytes, int64_t tag, int rank, int peer);

  // Moves as many chunks as the ring allows; true once the whole message
  // went through. Throws if the message received is not the one expected.
  bool progress();
  bool done() const { return chunks_done_ == chunk_count_; }
  const P2PChannel& channel() const { return channel_; }
  // For timeout errors: "rank 1 to send tag 3", "rank 0 to receive tag 3".
  std::string waitingFor() const;

 private:
  bool sendChunk();
  bool receiveChunk();

  P2PChannel& channel_;
  bool is_send_;
  char* data_;
  int64_t numel_;
  int32_t dtype_;
  size_t bytes_;
  int64_t tag_;
  int rank_;
  int peer_;
  int64_t chunk_count_;
  int64_t chunks_done_ = 0;
};

}  // namespace mydev::distributed
