#include "host_allocator.h"

#include <cstring>

#include "mydev_event.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

// The host cache waits on these before reusing a pinned block that an async
// copy may still read or write.
MydevEvent recordedOn(const MydevStream& stream) {
  MydevEvent event;
  event.record(stream);
  return event;
}

struct PinnedCacheImpl final
    : public at::CachingHostAllocatorImpl<c10::Stream, MydevEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    MYDEV_CHECK(mydevHostAlloc(ptr, size));
  }

  void free_block(at::HostBlock<c10::Stream>* block) override {
    MYDEV_CHECK(mydevHostFree(block->ptr_));
  }

  void record_stream(std::optional<std::vector<MydevEvent>>& events,
                     c10::Stream stream) override {
    events->push_back(recordedOn(MydevStream(stream)));
  }

  bool query_event(MydevEvent& event) override { return event.query(); }

  c10::Stream get_current_stream() const override {
    return getCurrentStream().unwrap();
  }

  bool stream_is_capturing(c10::Stream) const override { return false; }

 public:
  void copy_data(void* dest, const void* src,
                 std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

DECLARE_HOST_ALLOCATOR(MydevHostAllocator, PinnedCacheImpl, freePinnedBlock,
                       pinned_allocator)

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned_allocator)

}  // namespace

at::HostAllocator& hostAllocator() { return pinned_allocator; }

bool isPinnedPointer(const void* ptr) {
  mydevPointerAttributes attributes{};
  if (mydevPointerGetAttributes(&attributes, ptr) != mydevSuccess) {
    return false;
  }
  return attributes.type == mydevMemoryTypeHost;
}

}  // namespace mydev
