#include "shm_transport.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <random>

namespace mydev::distributed {

namespace {

constexpr const char* kNameKey = "myccl/shm_name";

std::string errnoText() { return std::strerror(errno); }

void relax(uint64_t spins) {
  if (spins < 256) {
    __builtin_ia32_pause();
  } else if (spins < 4096) {
    sched_yield();
  } else {
    // Long waits (a slow peer on a loaded 2-core machine): sleep briefly so
    // the peer's executor thread gets the core.
    const timespec pause{0, 50 * 1000};
    nanosleep(&pause, nullptr);
  }
}

// How long a wait spins before it sleeps: a peer a step behind usually
// arrives within this.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(20);
// A sleeping waiter wakes up at least this often to check for abort and
// timeout.
constexpr long kSleepSliceNs = 2 * 1000 * 1000;

uint32_t* futexWord(std::atomic<uint64_t>& value) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "the futex word is the low half");
  return reinterpret_cast<uint32_t*>(&value);
}

}  // namespace

ShmTransport::ShmTransport(const c10::intrusive_ptr<c10d::Store>& store,
                           int rank, int size,
                           std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  TORCH_CHECK(size >= 1 && size <= kMaxRanks, "myccl: world size ", size,
              " is not supported (1..", kMaxRanks, ")");
  const size_t slots_bytes = static_cast<size_t>(size) * kSlotBytes;
  // Sparse: a channel's pages exist only once a pair of ranks used it.
  bytes_ = sizeof(Header) + slots_bytes +
           static_cast<size_t>(size) * static_cast<size_t>(size) *
               sizeof(P2PChannel);
  int fd = -1;
  if (rank == 0) {
    std::random_device random;
    name_ = "/myccl_" + std::to_string(getpid()) + "_" +
            std::to_string(random()) + std::to_string(random());
    fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    TORCH_CHECK(fd >= 0, "myccl: shm_open(", name_, ") failed: ", errnoText());
    if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      const std::string error = errnoText();
      close(fd);
      shm_unlink(name_.c_str());
      TORCH_CHECK(false, "myccl: sizing the shared segment failed: ", error);
    }
    store->set(kNameKey, std::vector<uint8_t>(name_.begin(), name_.end()));
  } else {
    // Blocks up to the store's timeout; a rank 0 that never comes raises the
    // store's timeout error here.
    const std::vector<uint8_t> name = store->get(kNameKey);
    name_.assign(name.begin(), name.end());
    fd = shm_open(name_.c_str(), O_RDWR, 0600);
    TORCH_CHECK(fd >= 0, "myccl: rank ", rank,
                " cannot open the shared segment ", name_, ": ", errnoText());
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (rank == 0) {
      shm_unlink(name_.c_str());
    }
    TORCH_CHECK(false,
                "myccl: mmap of the shared segment failed: ", errnoText());
  }
  header_ = static_cast<Header*>(base_);
  data_ = static_cast<char*>(base_) + sizeof(Header);
  channels_ =
      reinterpret_cast<P2PChannel*>(static_cast<char*>(data_) + slots_bytes);
  // A fresh segment is zero-filled. Collective 1 starts where "collective 0"
  // ended; a rank that has not attached yet is waited for like a slow one.
  publish(header_->depart[rank], kStepsPerCollective - 1);
  store->set("myccl/attached/" + std::to_string(rank), std::vector<uint8_t>{1});
  if (rank == 0) {
    // Once every rank has mapped it, the name is no longer needed: unlink so
    // that the segment disappears with the last process, even after a crash.
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) {
      keys.push_back("myccl/attached/" + std::to_string(r));
    }
    try {
      store->wait(keys, timeout_);
    } catch (...) {
      shm_unlink(name_.c_str());
      throw;
    }
    shm_unlink(name_.c_str());
  }
}

ShmTransport::~ShmTransport() {
  if (base_ != nullptr) {
    munmap(base_, bytes_);
  }
}

void ShmTransport::abort() {
  uint64_t expected = 0;
  header_->aborted.value.compare_exchange_strong(
      expected, static_cast<uint64_t>(rank_) + 1);
}

void ShmTransport::throwAborted(const char* what, uint64_t aborted,
                                const std::string& waiting_for) {
  C10_THROW_ERROR(
      DistBackendError,
      c10::str("myccl: ", what, " on rank ", rank_, " aborted: rank ",
               aborted - 1, " failed a collective (", waiting_for, ")"));
}

void ShmTransport::publish(Flag& flag, uint64_t value) {
  flag.value.store(value, std::memory_order_seq_cst);
  if (flag.sleepers.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, futexWord(flag.value), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

void ShmTransport::waitFlag(Flag& flag, uint64_t target, const char* what,
                            int peer, uint64_t seq, const char* phase) {
  if (flag.value.load(std::memory_order_acquire) >= target) {
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  for (uint64_t spins = 0;; ++spins) {
    const uint64_t seen = flag.value.load(std::memory_order_acquire);
    if (seen >= target) {
      return;
    }
    const uint64_t aborted =
        header_->aborted.value.load(std::memory_order_acquire);
    // A peer publishes its arrival before it can abort (it aborts when it
    // compares the descriptors it met there): read the flag again, or this
    // rank reports the peer's abort instead of the mismatch it would find
    // itself, naming both sides.
    if (aborted != 0 && flag.value.load(std::memory_order_acquire) < target) {
      throwAborted(what, aborted,
                   c10::str("step ", seq, ", waiting for rank ", peer));
    }
    if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
      abort();
      C10_THROW_ERROR(
          DistBackendError,
          c10::str("myccl: ", what, " timed out after ", timeout_.count(),
                   " ms on rank ", rank_, " waiting for rank ", peer, " to ",
                   phase, " step ", seq,
                   " (the peer did not call the same collective, "
                   "hung or died)"));
    }
    if (std::chrono::steady_clock::now() - start < kSpinBeforeSleep) {
      __builtin_ia32_pause();
      continue;
    }
    // publish() stores, then reads `sleepers`; this increments, then the
    // futex re-reads the value: one of them sees the other.
    flag.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const timespec slice{0, kSleepSliceNs};
    syscall(SYS_futex, futexWord(flag.value), FUTEX_WAIT,
            static_cast<uint32_t>(seen), &slice, nullptr, 0);
    flag.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ShmTransport::waitUntil(const std::function<bool()>& ready,
                             const char* what,
                             const std::function<std::string()>& waiting_for) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (uint64_t spins = 0;; ++spins) {
    if (ready()) {
      return;
    }
    const uint64_t aborted =
        header_->aborted.value.load(std::memory_order_acquire);
    if (aborted != 0 && !ready()) {  // as in waitFlag
      throwAborted(what, aborted, "waiting for " + waiting_for());
    }
    if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
      abort();
      C10_THROW_ERROR(
          DistBackendError,
          c10::str("myccl: ", what, " timed out after ", timeout_.count(),
                   " ms on rank ", rank_, " waiting for ", waiting_for(),
                   " (the peer did not call the matching operation, "
                   "hung or died)"));
    }
    relax(spins);
  }
}

void ShmTransport::step(uint64_t seq, const char* what,
                        const std::function<void()>& fill,
                        const std::function<void()>& consume) {
  for (int r = 0; r < size_; ++r) {
    waitFlag(header_->depart[r], seq - 1, what, r, seq - 1, "finish");
  }
  if (fill) {
    fill();
  }
  publish(header_->arrive[rank_], seq);
  for (int r = 0; r < size_; ++r) {
    waitFlag(header_->arrive[r], seq, what, r, seq, "reach");
  }
  if (consume) {
    consume();
  }
  publish(header_->depart[rank_], seq);
}

void ShmTransport::depart(uint64_t seq, const char* what, bool wait_for_peers) {
  publish(header_->depart[rank_], seq);
  if (wait_for_peers) {
    for (int r = 0; r < size_; ++r) {
      waitFlag(header_->depart[r], seq, what, r, seq, "finish");
    }
  }
}

void ShmTransport::publishPeerProbe(PeerProbe probe) {
  header_->peer_probe[rank_].value.store(static_cast<uint64_t>(probe),
                                         std::memory_order_release);
}

ShmTransport::PeerProbe ShmTransport::peerProbe(int rank) const {
  return static_cast<PeerProbe>(
      header_->peer_probe[rank].value.load(std::memory_order_acquire));
}

// ------------------------------------------------------------ CollectiveSteps

CollectiveSteps::CollectiveSteps(ShmTransport& transport, uint64_t collective,
                                 const char* what, const Descriptor& mine)
    : transport_(transport),
      first_(collective * ShmTransport::kStepsPerCollective),
      next_(first_),
      what_(what),
      mine_(mine) {}

void CollectiveSteps::step(const std::function<void()>& fill,
                           const std::function<void()>& consume) {
  TORCH_INTERNAL_ASSERT(next_ < first_ + ShmTransport::kStepsPerCollective - 1,
                        "myccl: too many steps in one collective");
  const bool first = next_ == first_;
  const int rank = transport_.rank();
  transport_.step(
      next_++, what_,
      [&] {
        if (first) {
          transport_.descriptor(rank) = mine_;
        }
        if (fill) {
          fill();
        }
      },
      [&] {
        if (first) {
          checkDescriptors(&transport_.descriptor(0), rank, transport_.size(),
                           what_);
        }
        if (consume) {
          consume();
        }
      });
}

void CollectiveSteps::finish(bool wait_for_peers) {
  transport_.depart(first_ + ShmTransport::kStepsPerCollective - 1, what_,
                    wait_for_peers);
}

}  // namespace mydev::distributed
