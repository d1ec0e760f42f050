#include "shm_transport.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

ShmTransport::ShmTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                           int size, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  TORCH_CHECK(size >= 1 && size <= kMaxRanks, "myccl: world size ", size,
              " is not supported (1..", kMaxRanks, ")");
  bytes_ = sizeof(Header) + static_cast<size_t>(size) * kSlotBytes;
  int fd = -1;
  if (rank == 0) {
    std::random_device random;
    name_ = "/myccl_" + std::to_string(getpid()) + "_" + std::to_string(random()) +
            std::to_string(random());
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
    TORCH_CHECK(fd >= 0, "myccl: rank ", rank, " cannot open the shared segment ",
                name_, ": ", errnoText());
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (rank == 0) {
      shm_unlink(name_.c_str());
    }
    TORCH_CHECK(false, "myccl: mmap of the shared segment failed: ", errnoText());
  }
  header_ = static_cast<Header*>(base_);
  data_ = static_cast<char*>(base_) + sizeof(Header);
  // A fresh segment is zero-filled: all flags start at step 0.
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
  header_->aborted.value.compare_exchange_strong(expected, static_cast<uint64_t>(rank_) + 1);
}

void ShmTransport::waitFlag(const Flag& flag, uint64_t target, const char* what,
                            int peer, uint64_t seq, const char* phase) {
  if (flag.value.load(std::memory_order_acquire) >= target) {
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (uint64_t spins = 0;; ++spins) {
    if (flag.value.load(std::memory_order_acquire) >= target) {
      return;
    }
    const uint64_t aborted = header_->aborted.value.load(std::memory_order_acquire);
    if (aborted != 0) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("myccl: ", what, " on rank ", rank_,
                               " aborted: rank ", aborted - 1,
                               " failed a collective (step ", seq, ", waiting for rank ",
                               peer, ")"));
    }
    if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
      abort();
      C10_THROW_ERROR(DistBackendError,
                      c10::str("myccl: ", what, " timed out after ", timeout_.count(),
                               " ms on rank ", rank_, " waiting for rank ", peer,
                               " to ", phase, " step ", seq,
                               " (the peer did not call the same collective, "
                               "hung or died)"));
    }
    relax(spins);
  }
}

void ShmTransport::step(uint64_t seq, const char* what, const std::function<void()>& fill,
                        const std::function<void()>& consume) {
  for (int r = 0; r < size_; ++r) {
    waitFlag(header_->depart[r], seq - 1, what, r, seq - 1, "finish");
  }
  if (fill) {
    fill();
  }
  header_->arrive[rank_].value.store(seq, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    waitFlag(header_->arrive[r], seq, what, r, seq, "reach");
  }
  if (consume) {
    consume();
  }
  header_->depart[rank_].value.store(seq, std::memory_order_release);
}

}  // namespace mydev::distributed
