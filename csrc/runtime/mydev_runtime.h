// The mydev driver API: the boundary between torch-mydev and the device.
//
// Everything above this header (csrc/core, csrc/aten, csrc/distributed, the
// Python package) talks to the device only through these functions. Nothing
// below it knows about torch. A vendor porting torch-mydev to real silicon
// reimplements this header and keeps the rest of the package.
//
// The API is C-style, in the spirit of a GPU runtime: opaque handles, an error
// code per call, a thread-local current device. Every call is thread-safe.
//
// Semantics every implementation must keep (torch-mydev relies on them):
//  * Streams are in-order queues. Work enqueued on a stream runs after all work
//    enqueued on it before, asynchronously with respect to the host: an
//    enqueueing call returns before the work ran (unless launch blocking is
//    on).
//  * A failure inside enqueued work is recorded for its device and reported by
//    the next synchronizing call on that device (stream/event/device
//    synchronize, synchronous memcpy) as mydevErrorLaunchFailure, with a
//    message naming the kernel; reporting clears it, the device stays usable.
//  * Device pointers are opaque to the host. They live in the device's own
//    address space; only enqueued work (kernels, memcpys) reaches the memory
//    behind them, and a kernel does so through mydevKernelPointer. The
//    simulator enforces it: device addresses are reserved without access
//    rights, so a host dereference of a device pointer faults at once (with a
//    message naming the address, the device and the offset), and a kernel
//    touching a device address that nothing maps fails with
//    mydevErrorIllegalAddress at the next synchronizing call.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef enum mydevError {
  mydevSuccess = 0,
  mydevErrorInvalidValue = 1,
  mydevErrorInvalidDevice = 2,
  mydevErrorMemoryAllocation = 3,  // out of device (or pinned host) memory
  mydevErrorNotReady = 4,          // query: the work has not completed yet
  mydevErrorLaunchFailure = 5,     // enqueued work failed; see message
  mydevErrorInvalidHandle = 6,     // a stream/event handle that is not valid
  mydevErrorNotPermitted = 7,      // e.g. use after fork
  mydevErrorInitialization = 8,    // bad configuration (env vars)
  mydevErrorPeerAccessUnsupported = 9,  // cannot map a peer process's memory
  mydevErrorIllegalAddress = 10,        // enqueued work touched an address that
                                        // no device memory maps; sticky: the
                                        // device stays failed until exit
  mydevErrorStreamCaptureUnsupported = 11,  // not permitted while a stream
                                            // is capturing (the capture is
                                            // invalidated)
  mydevErrorStreamCaptureInvalidated = 12,  // the capture was invalidated by
                                            // an earlier refused call
  mydevErrorStreamCaptureUnjoined = 13,     // a stream that joined the capture
                                            // was not joined back at its end
} mydevError_t;

// Short, static description of an error code.
const char* mydevGetErrorString(mydevError_t error);
// The detailed message of the last error returned on this thread (includes
// kernel names and sizes); empty if the last call succeeded.
const char* mydevGetLastErrorMessage(void);

// ---------------------------------------------------------------- devices --
// Configuration is read once, at the first call into the runtime:
//   MYDEV_DEVICE_COUNT    number of devices (default 2, 0..64)
//   MYDEV_MEMORY_MB       capacity of each device's memory in MiB
//                         (default: a quarter of host RAM divided by the
//                         device count, at least 256)
//   MYDEV_LAUNCH_BLOCKING 1: every enqueue waits for the work to finish and
//                         reports its failure at once
//   MYDEV_PEER_MEMORY     0: refuse to map other processes' device memory
//                         (canMapPeerMemory 0; default 1)
mydevError_t mydevGetDeviceCount(int* count);
// Current device of the calling thread (default 0).
mydevError_t mydevGetDevice(int* device);
mydevError_t mydevSetDevice(int device);

#define MYDEV_DEVICE_NAME_LEN 64
typedef struct mydevDeviceProp {
  char name[MYDEV_DEVICE_NAME_LEN];  // "mydev simulated device"
  size_t totalGlobalMem;             // memory capacity in bytes
  int multiProcessorCount;           // compute units (host hardware threads)
  int major;                         // capability version
  int minor;
  int simdWidthBytes;       // widest vector unit the kernels use
  int warpSize;             // lanes Triton and Inductor plan a
                            //    program's threads in
  int maxStreamsPerDevice;  // 0 = no fixed limit
  int canMapPeerMemory;     // 1: peers in other processes can map
                            //    this device's memory (IPC handles)
} mydevDeviceProp;
mydevError_t mydevGetDeviceProperties(mydevDeviceProp* prop, int device);

// Free and total bytes of a device's memory.
mydevError_t mydevMemGetInfo(int device, size_t* free_bytes,
                             size_t* total_bytes);

// Waits for all work on all streams of the device; reports pending failures.
mydevError_t mydevDeviceSynchronize(int device);
// Reports, without waiting, a failure of enqueued work that already happened
// and was not reported yet (mydevErrorLaunchFailure, as the next
// synchronizing call would; reporting clears it), as cudaGetLastError does
// for asynchronous errors. mydevSuccess if there is none.
mydevError_t mydevDeviceGetPendingFailure(int device);

// 1 if launch blocking is on (MYDEV_LAUNCH_BLOCKING=1), else 0.
int mydevLaunchBlocking(void);

// ----------------------------------------------------------------- memory --
// Device memory: a fresh range of device addresses backed by free pages of
// the device's memory (which need not be contiguous, so any free memory is
// usable), aligned to the granularity (mydevMemGetGranularity). size 0 gives
// *ptr == nullptr and success. Out of memory: mydevErrorMemoryAllocation and
// the message gives requested/free/capacity.
mydevError_t mydevMalloc(void** ptr, size_t size, int device);
// Returns device memory to the device. The caller guarantees no enqueued
// work still uses it (synchronize first). nullptr is a no-op.
mydevError_t mydevFree(void* ptr);

// The address at which enqueued work (a kernel, the driver's copies) reaches
// the memory behind device pointer `devPtr`: the one way to read or write
// device memory, and only from inside a kernel. O(1) and cheap (an add), so
// translate where the pointer is used. Every device address translates,
// mapped or not, and so does any other pointer (nullptr included) to an
// address that nothing maps: touching the memory behind a device address
// that no allocation maps is mydevErrorIllegalAddress, never another
// allocation's data. Pointers from mydevIpcOpenMemHandle translate too.
void* mydevKernelPointer(const void* devPtr);

// ---------------------------------------------- device virtual memory --
// CUDA's virtual memory management (cuMemAddressReserve / cuMemMap), with
// the physical allocation folded into the mapping: reserve a range of a
// device's addresses, then map and unmap pages of device memory inside it.
// What lets an allocator grow a segment in place (expandable segments) and
// what mydevMalloc is built on. Addresses and sizes are multiples of the
// granularity.
mydevError_t mydevMemGetGranularity(size_t* granularity);
// `size` device addresses of `device`, nothing mapped yet.
mydevError_t mydevMemAddressReserve(void** ptr, size_t size, int device);
// Releases a whole reservation, which must have no mapped pages left.
mydevError_t mydevMemAddressFree(void* ptr, size_t size);
// Backs [ptr, ptr + size), inside one reservation and not mapped yet, with
// free pages of the device's memory. mydevErrorMemoryAllocation when the
// device has fewer free pages than that.
mydevError_t mydevMemMap(void* ptr, size_t size);
// Gives the pages behind [ptr, ptr + size) (inside one reservation) back to
// the device. The caller guarantees no enqueued work still uses them.
mydevError_t mydevMemUnmap(void* ptr, size_t size);

// Page-locked ("pinned") host memory: copies between it and the device can
// run asynchronously. Plain host memory makes async copies synchronous.
mydevError_t mydevHostAlloc(void** ptr, size_t size);
mydevError_t mydevHostFree(void* ptr);

typedef enum mydevMemoryType {
  mydevMemoryTypeUnregistered = 0,  // ordinary host memory
  mydevMemoryTypeHost = 1,          // from mydevHostAlloc
  mydevMemoryTypeDevice = 2,        // a device address
} mydevMemoryType;
typedef struct mydevPointerAttributes {
  mydevMemoryType type;
  int device;         // owning device for device memory, else -1
  void* basePointer;  // start of the allocation (or reservation) containing
                      // the pointer, for device and pinned memory; else
                      // nullptr
  size_t size;        // size of that allocation
} mydevPointerAttributes;
mydevError_t mydevPointerGetAttributes(mydevPointerAttributes* attributes,
                                       const void* ptr);

// ------------------------------------------------- peer memory (IPC) --
// Device memory shared with other processes on the same host, as CUDA IPC
// does: the owner makes a handle for an allocation, sends its bytes to a
// peer by any means, and the peer opens it to get a device pointer to the
// same memory in its own address space. Kernels and memcpys of the peer may
// then read and write it. Ordering between the processes is the caller's
// business (the handle carries no synchronization).
#define MYDEV_IPC_HANDLE_SIZE 64
typedef struct mydevIpcMemHandle {
  char reserved[MYDEV_IPC_HANDLE_SIZE];
} mydevIpcMemHandle_t;
// A handle for the live allocation containing `devPtr` (any interior
// pointer). It stays valid while the allocation is live in its owner.
mydevError_t mydevIpcGetMemHandle(mydevIpcMemHandle_t* handle, void* devPtr);
// The start of the handle's allocation, mapped at device addresses of this
// process (translate them with mydevKernelPointer like any device pointer).
// Opening a handle of this process gives back its own pointer. Mappings of a
// peer's allocation are kept after closing and reused by later opens while
// the allocation keeps its pages. mydevErrorPeerAccessUnsupported (with
// the reason in the message) if the peer's memory cannot be mapped: the
// peer exited, the OS refuses access to it, or MYDEV_PEER_MEMORY=0; callers
// then fall back to staging through memory they share otherwise.
mydevError_t mydevIpcOpenMemHandle(void** devPtr, mydevIpcMemHandle_t handle);
// Releases a pointer from mydevIpcOpenMemHandle.
mydevError_t mydevIpcCloseMemHandle(void* devPtr);

// ---------------------------------------------------------------- streams --
typedef struct mydevStream* mydevStream_t;

// Lower number = higher priority, as on CUDA. Priorities order the device's
// work when several streams have kernels ready at once.
mydevError_t mydevDeviceGetStreamPriorityRange(int* least_priority,
                                               int* greatest_priority);
// The device's default stream: always exists, never destroyed.
mydevError_t mydevStreamGetDefault(int device, mydevStream_t* stream);
mydevError_t mydevStreamCreate(mydevStream_t* stream, int device, int priority);
// Waits for the stream's work, then releases it. The default stream cannot
// be destroyed (mydevErrorInvalidHandle).
mydevError_t mydevStreamDestroy(mydevStream_t stream);
mydevError_t mydevStreamGetDevice(mydevStream_t stream, int* device);
mydevError_t mydevStreamGetPriority(mydevStream_t stream, int* priority);
// mydevSuccess if all enqueued work completed, mydevErrorNotReady otherwise.
mydevError_t mydevStreamQuery(mydevStream_t stream);
mydevError_t mydevStreamSynchronize(mydevStream_t stream);

// ----------------------------------------------------------------- events --
typedef struct mydevEvent* mydevEvent_t;
enum {
  mydevEventDefault = 0,
  mydevEventDisableTiming = 1,
  mydevEventBlockingSync = 2,  // synchronize sleeps instead of spinning
};
mydevError_t mydevEventCreate(mydevEvent_t* event, unsigned flags);
mydevError_t mydevEventDestroy(mydevEvent_t event);
// Captures the work enqueued on `stream` so far; re-recording replaces it.
mydevError_t mydevEventRecord(mydevEvent_t event, mydevStream_t stream);
// mydevSuccess if the captured work completed (or never recorded).
mydevError_t mydevEventQuery(mydevEvent_t event);
mydevError_t mydevEventSynchronize(mydevEvent_t event);
// Work enqueued on `stream` after this call waits for the event's captured
// work (any device). Does not block the host.
mydevError_t mydevStreamWaitEvent(mydevStream_t stream, mydevEvent_t event);
// Milliseconds between two completed, timing-enabled events.
mydevError_t mydevEventElapsedTime(float* ms, mydevEvent_t start,
                                   mydevEvent_t end);

// ------------------------------------------------------- copies and kernels --
typedef enum mydevMemcpyKind {
  mydevMemcpyHostToHost = 0,
  mydevMemcpyHostToDevice = 1,
  mydevMemcpyDeviceToHost = 2,
  mydevMemcpyDeviceToDevice = 3,  // same or different devices
  mydevMemcpyDefault = 4,         // inferred from the pointers
} mydevMemcpyKind;
// Stream-ordered copy. With ordinary (not pinned) host memory on either side,
// it first waits for the stream and copies before returning, as CUDA does
// with pageable memory, so the caller may reuse its buffer at once.
mydevError_t mydevMemcpyAsync(void* dst, const void* src, size_t count,
                              mydevMemcpyKind kind, mydevStream_t stream);
// Copy that completes before returning, ordered after the stream's work.
mydevError_t mydevMemcpy(void* dst, const void* src, size_t count,
                         mydevMemcpyKind kind, mydevStream_t stream);
mydevError_t mydevMemsetAsync(void* dst, int value, size_t count,
                              mydevStream_t stream);

// A kernel. In the simulator a kernel is host code run by the stream's
// executor, which reaches device memory through mydevKernelPointer; a C++
// exception escaping `fn` is the kernel failing (its what() becomes part of
// the reported error).
// `name` must outlive the kernel (a string literal or interned string).
typedef void (*mydevKernelFn_t)(void* user_data);
// Enqueues fn(user_data) on the stream. If the launch itself fails, fn is not
// called and the caller still owns user_data.
mydevError_t mydevLaunchKernel(mydevStream_t stream, const char* name,
                               mydevKernelFn_t fn, void* user_data);
// The same kernel with its data owned by the driver: fn(user_data) does not
// free it; the driver calls release(user_data) once nothing can run the
// kernel any more (after it ran, or when the graph that captured it is
// destroyed). A kernel launched this way can be captured and replayed any
// number of times; one launched with mydevLaunchKernel (whose fn consumes
// its data) cannot. If the launch itself fails, neither is called and the
// caller still owns user_data.
mydevError_t mydevLaunchKernelEx(mydevStream_t stream, const char* name,
                                 mydevKernelFn_t fn, mydevKernelFn_t release,
                                 void* user_data);

// ---------------------------------------------------------- stream capture --
// CUDA's stream capture. Between mydevStreamBeginCapture and
// mydevStreamEndCapture, work submitted to the capturing stream (kernels
// from mydevLaunchKernelEx, copies and fills between device or pinned
// memory, event records and waits) is recorded into a graph instead of
// running. A stream that waits on an event recorded during the capture joins
// it (fork/join across streams, as on CUDA) until the capture ends. An
// instantiated graph is replayed by mydevGraphLaunch as ONE submission: the
// stream's worker runs the recorded work in submission order (every
// dependency the streams expressed is from earlier to later submitted work,
// so that order keeps them all), and the host cost of a launch does not grow
// with the number of nodes.
//
// Refused during capture (mydevErrorStreamCaptureUnsupported; the capture is
// invalidated, the end call reports it, and the stream is usable again
// afterwards): synchronizing or querying a capturing stream, a synchronous or
// pageable-memory copy on it (e.g. torch's .item()), synchronizing or
// querying an event recorded during the capture, capture on the default
// stream, a mydevLaunchKernel kernel. "Unsafe" calls (device synchronize,
// synchronizing or querying other streams and events) are refused by mode:
//   Global      if this thread has a non-relaxed capture in progress or any
//               thread has a global one (the default)
//   ThreadLocal only if this thread has a non-relaxed capture in progress
//   Relaxed     never because of this capture
typedef enum mydevStreamCaptureMode {
  mydevStreamCaptureModeGlobal = 0,
  mydevStreamCaptureModeThreadLocal = 1,
  mydevStreamCaptureModeRelaxed = 2,
} mydevStreamCaptureMode;
typedef enum mydevStreamCaptureStatus {
  mydevStreamCaptureStatusNone = 0,
  mydevStreamCaptureStatusActive = 1,
  mydevStreamCaptureStatusInvalidated = 2,
} mydevStreamCaptureStatus;
typedef struct mydevGraph* mydevGraph_t;          // a captured graph
typedef struct mydevGraphExec* mydevGraphExec_t;  // an instantiated one

mydevError_t mydevStreamBeginCapture(mydevStream_t stream,
                                     mydevStreamCaptureMode mode);
// Ends the capture begun on `stream` (not a joined stream). *graph receives
// the graph, or nullptr with mydevErrorStreamCaptureInvalidated (message:
// the refused call) if the capture was invalidated, or nullptr with
// mydevErrorStreamCaptureUnjoined (message: the streams) if a stream that
// joined recorded work the origin stream does not wait for (as on CUDA,
// every fork must be joined back: record an event on the joined stream and
// make `stream` wait on it). Either way the stream and every stream that
// joined are out of capture.
mydevError_t mydevStreamEndCapture(mydevStream_t stream, mydevGraph_t* graph);
// *status of the stream; *id (if not null) the capture's id (unique in the
// process, 0 if none).
mydevError_t mydevStreamGetCaptureInfo(mydevStream_t stream,
                                       mydevStreamCaptureStatus* status,
                                       uint64_t* id);
mydevError_t mydevGraphGetNodeCount(mydevGraph_t graph, size_t* count);
// Writes the graph in Graphviz dot form (one node per recorded submission,
// with its kind, name, stream and size) to `path`.
mydevError_t mydevGraphDebugDotPrint(mydevGraph_t graph, const char* path);
// The executable graph shares the recorded work with `graph`, which may be
// destroyed afterwards.
mydevError_t mydevGraphInstantiate(mydevGraphExec_t* exec, mydevGraph_t graph);
// Enqueues one replay of `exec` on `stream` (any non-capturing stream of the
// device it was captured on). Activity recording sees it as one kernel named
// "mydevGraphLaunch".
mydevError_t mydevGraphLaunch(mydevGraphExec_t exec, mydevStream_t stream);
// Destroying an executable graph or a graph is safe while launches are in
// flight: they keep the recorded work alive until they ran.
mydevError_t mydevGraphExecDestroy(mydevGraphExec_t exec);
mydevError_t mydevGraphDestroy(mydevGraph_t graph);

// ---------------------------------------------------- activity recording --
// What a profiler needs from the device, in the manner of CUPTI's activity
// API. While recording is enabled, every kernel, copy and fill leaves one
// record: the host call that enqueued it (its thread and times) and the work
// itself (device, stream, and the times the stream really started and ended
// it). Records are stamped with the innermost external id the enqueueing
// thread pushed, which is how a profiler links device work to the host
// operation that launched it. Disabled (the default), an enqueue costs one
// relaxed atomic load more. All times are nanoseconds of the driver's clock
// (mydevActivityGetTimestamp), the clock event timings use too.
typedef enum mydevActivityKind {
  mydevActivityKindKernel = 0,
  mydevActivityKindMemcpy = 1,
  mydevActivityKindMemset = 2,
} mydevActivityKind;

typedef struct mydevActivityRecord {
  mydevActivityKind kind;
  mydevMemcpyKind copyKind;  // Memcpy: the resolved direction (never Default)
  int device;                // the device whose stream ran the work
  mydevStream_t stream;
  const char* name;         // Kernel: the launch's name; else the API's
  const char* api;          // the enqueueing call, e.g. "mydevLaunchKernel"
  uint64_t correlationId;   // unique per record within the process (from 1)
  uint64_t externalId;      // innermost pushed Operation id, 0 if none
  uint64_t userExternalId;  // innermost pushed User id, 0 if none
  uint64_t hostThread;      // OS thread id (gettid) of the enqueueing thread
  int64_t apiStart;         // the enqueueing call on the host
  int64_t apiEnd;
  int64_t start;  // the work on the device
  int64_t end;
  size_t bytes;  // Memcpy / Memset: bytes copied or filled
} mydevActivityRecord;

// Turns recording on (nonzero) or off. Work enqueued while it was on still
// leaves its record when it runs later.
mydevError_t mydevActivityEnable(int enable);
// Now, on the clock of the records.
mydevError_t mydevActivityGetTimestamp(int64_t* nanoseconds);
// Stacks of external ids per host thread and kind (CUPTI's external
// correlation): work enqueued by a thread carries the top of each of its
// stacks. Enabling recording forgets what every thread pushed before.
typedef enum mydevActivityExternalIdKind {
  mydevActivityExternalIdOperation = 0,  // the host operation launching work
  mydevActivityExternalIdUser = 1,       // a user-annotated range around it
} mydevActivityExternalIdKind;
mydevError_t mydevActivityPushExternalId(mydevActivityExternalIdKind kind,
                                         uint64_t id);
// Pops the top; *id (if not null) receives it. Empty stack:
// mydevErrorInvalidValue.
mydevError_t mydevActivityPopExternalId(mydevActivityExternalIdKind kind,
                                        uint64_t* id);
// Moves up to `capacity` records of completed work into `records`, oldest
// first per stream; *count receives how many. Call until *count < capacity
// to drain. Synchronize first to include all enqueued work.
mydevError_t mydevActivityFlush(mydevActivityRecord* records, size_t capacity,
                                size_t* count);

// ------------------------------------------------------- host wait hooks --
// Called around every wait of a host thread for device work (stream, event
// and device synchronize, synchronous copies, launch blocking): begin() just
// before the thread blocks, end(its result) once it may go on. The
// simulator runs some kernels in the host's own interpreter (Triton kernels
// replayed from a graph take Python's global lock on the stream's worker),
// so the Python bindings install hooks that let a waiting thread release
// that lock. A driver for real silicon has no such kernels and may ignore
// the hooks. nullptr for both removes them.
typedef void* (*mydevHostWaitBeginFn_t)(void);
typedef void (*mydevHostWaitEndFn_t)(void* token);
mydevError_t mydevSetHostWaitHooks(mydevHostWaitBeginFn_t begin,
                                   mydevHostWaitEndFn_t end);

// ----------------------------------------------------- kernel host threads --
// The simulator runs kernels on the host's cores, and shrinks their OpenMP
// teams to the cores other processes leave free (MYDEV_DYNAMIC_THREADS). A
// team's size can change the last bits of a parallel reduction, so the layer
// above says when results must not depend on the host's load: while
// `fixed()` returns nonzero, kernels keep the full team. The executors ask
// a few times a second, from their own threads. torch-mydev's ATen layer
// passes torch.use_deterministic_algorithms. nullptr removes the query. A
// driver for real silicon runs no kernel on the host and may ignore it.
typedef int (*mydevFixedKernelTeamFn_t)(void);
mydevError_t mydevSetFixedKernelTeamQuery(mydevFixedKernelTeamFn_t fixed);

// ------------------------------------------------------------ process state --
// 1 if this process was forked from a parent in which a device had been put
// to use (see mydevIsInitialized). The parent's worker threads do not exist
// in such a child and its device memory is shared with the parent, so every
// call there (but this one and the error strings) fails with
// mydevErrorNotPermitted, as CUDA refuses to re-initialise after fork;
// only mydevGetDeviceCount and mydevGetDeviceProperties still answer.
// Asking only for device counts or properties before fork() poisons nothing.
int mydevIsForkedChild(void);
// 1 once a device has been put to use in this process: a stream executor or
// device memory exists (CUDA's "primary context").
int mydevIsInitialized(void);

}  // extern "C"
