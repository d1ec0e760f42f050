#include "host_threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

// OpenMP, bound weakly: the driver carries no OpenMP of its own. In the
// device library (linked with -fopenmp) these are torch's libgomp; in a
// program without OpenMP they are null and there is no team to size or
// release.
extern "C" int omp_pause_resource_all(int kind) __attribute__((weak));
extern "C" int omp_get_max_threads() __attribute__((weak));
extern "C" void omp_set_num_threads(int count) __attribute__((weak));
extern "C" int omp_get_thread_num() __attribute__((weak));
// What `#pragma omp parallel num_threads(n)` compiles to, in libgomp's ABI:
// the driver is compiled without OpenMP, so it starts a region through it.
extern "C" void GOMP_parallel(void (*body)(void*), void* data,
                              unsigned num_threads, unsigned flags)
    __attribute__((weak));
// MKL, torch's BLAS on x86, keeps a per-thread count of its own (0: MKL's
// global one), which ATen sets with torch.set_num_threads; it returns the
// count it replaces. Null where torch has no MKL. (MKL's lower-case
// mkl_set_num_threads_local is the Fortran binding, taking a pointer.)
extern "C" int MKL_Set_Num_Threads_Local(int count) __attribute__((weak));

namespace mydev_sim {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;
// Less than this many cores taken by others is noise (host_threads.h).
constexpr double kOthersNoiseCpus = 0.25;

std::atomic<mydevFixedKernelTeamFn_t> g_fixed_kernel_team{nullptr};

int64_t to_ns(const timespec& time) {
  return int64_t(time.tv_sec) * kNsPerSecond + time.tv_nsec;
}

// The start of a /proc file's text, NUL-terminated in `text` (at most
// `capacity` - 1 bytes: the fields read here all come first), in one read.
// False if the file is gone (a thread that ended since it was listed) or
// empty.
bool read_proc_text(const char* path, char* text, size_t capacity) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t length = ::read(fd, text, capacity - 1);
  ::close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  return true;
}

// The unit of /proc/stat's times; -1 if unknown. Fixed for the boot, so
// asked once, not at each of the two uses per measure.
int64_t tick_ns() {
  static const int64_t tick = [] {
    const long ticks_per_second = sysconf(_SC_CLK_TCK);
    return ticks_per_second > 0 ? kNsPerSecond / ticks_per_second : -1;
  }();
  return tick;
}

// The time all CPUs spent running code since boot: user, nice, system, irq
// and softirq of /proc/stat's first line ("cpu  user nice system idle iowait
// irq softirq steal ...", in clock ticks). Not idle or iowait, and not steal:
// a hypervisor's other guests are not this host's processes, and counting
// them shrank the team on an idle VM (steal came in bursts of up to 0.9 of
// a core per 100 ms). -1 if unreadable.
int64_t host_busy_ns() {
  char text[256];
  if (!read_proc_text("/proc/stat", text, sizeof text)) return -1;
  if (std::strncmp(text, "cpu ", 4) != 0) return -1;
  constexpr int kFields = 7;  // user nice system idle iowait irq softirq
  long long ticks[kFields] = {};
  char* cursor = text + 4;
  for (long long& field : ticks) {
    char* end = nullptr;
    field = std::strtoll(cursor, &end, 10);
    if (end == cursor) return -1;
    cursor = end;
  }
  const long long busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6];
  const int64_t tick = tick_ns();
  return tick > 0 ? busy * tick : -1;
}

std::optional<LoadSample> take_load_sample(
    std::chrono::steady_clock::time_point now) {
  timespec process{};
  const int64_t busy_ns = host_busy_ns();
  if (busy_ns < 0 || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &process) != 0) {
    return std::nullopt;
  }
  const int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              now.time_since_epoch())
                              .count();
  return LoadSample{wall_ns, busy_ns, to_ns(process)};
}

// An executor's first measure would otherwise come an interval after its
// first kernel, and its kernels kept the full team until then, beside a busy
// process too: on 2 cores beside one, the first forward and backward of a
// small language model in a fresh process took 90-120 ms, against 4-7 ms
// with a team of one (benchmarks/first_op.py). So the first measure spans
// the time since the library was loaded, as torch was imported (30 ms before
// that model's first kernel), when that is long enough to measure (the
// host's times count in 10 ms ticks) and recent enough to tell the load now.
const std::optional<LoadSample> g_load_at_start =
    take_load_sample(std::chrono::steady_clock::now());
constexpr int64_t kStartWindowMinNs = 20'000'000;
constexpr int64_t kStartWindowMaxNs = 5'000'000'000;

std::optional<LoadSample> start_sample_before(int64_t wall_ns) {
  if (!g_load_at_start.has_value()) return std::nullopt;
  const int64_t age = wall_ns - g_load_at_start->wall_ns;
  if (age < kStartWindowMinNs || age > kStartWindowMaxNs) return std::nullopt;
  return g_load_at_start;
}

// A parked team: the region's thread 0 sleeps, the others wait for it.
struct ParkedTeam {
  const std::function<bool()>& sleep;
  bool slept_until_work = false;
  std::mutex mutex;
  std::condition_variable woken;
  bool awake = false;
};

void parked_region(void* data) {
  ParkedTeam& team = *static_cast<ParkedTeam*>(data);
  if (omp_get_thread_num() == 0) {
    team.slept_until_work = team.sleep();
    {
      std::lock_guard<std::mutex> lock(team.mutex);
      team.awake = true;
    }
    team.woken.notify_all();
    return;
  }
  std::unique_lock<std::mutex> lock(team.mutex);
  team.woken.wait(lock, [&] { return team.awake; });
}

}  // namespace

int omp_max_threads() {
  return omp_get_max_threads != nullptr ? omp_get_max_threads() : 1;
}

bool park_host_threads_while(const std::function<bool()>& sleep) {
  const int size = omp_max_threads();
  if (GOMP_parallel == nullptr || omp_get_thread_num == nullptr || size <= 1) {
    return sleep();
  }
  ParkedTeam team{sleep};
  GOMP_parallel(&parked_region, &team, unsigned(size), /*flags=*/0);
  return team.slept_until_work;
}

void TeamSpin::note_kernel(Clock::time_point began, Clock::time_point ended) {
  if (ended - began < kKernelMayUseTeamAfter) return;
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return;
  const bool preempted = usage.ru_nivcsw != involuntary_switches_;
  involuntary_switches_ = usage.ru_nivcsw;
  if (!preempted) may_spin_until_ = ended + kTeamSpinsAfterRegion;
}

void TeamSpin::note_woken() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) {
    involuntary_switches_ = usage.ru_nivcsw;
  }
}

TeamThreads team_threads() {
  TeamThreads team;
  char name[16] = {};
  if (prctl(PR_GET_NAME, name) != 0) {
    team.any_running = true;
    return team;
  }
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    team.any_running = true;
    return team;
  }
  const std::string self = std::to_string(syscall(SYS_gettid));
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.' || self == task->d_name) continue;
    const std::string path =
        std::string("/proc/self/task/") + task->d_name + "/stat";
    // "tid (name) state ...": a name may hold spaces and parentheses, so it
    // ends at the last ')'.
    char stat[128];
    if (!read_proc_text(path.c_str(), stat, sizeof stat)) continue;
    const char* open_paren = std::strchr(stat, '(');
    const char* close_paren = std::strrchr(stat, ')');
    if (open_paren == nullptr || close_paren == nullptr ||
        close_paren[1] == '\0' || close_paren[2] == '\0') {
      continue;
    }
    if (std::string(open_paren + 1, close_paren) != name) continue;
    team.ids.push_back(pid_t(std::atoi(task->d_name)));
    if (close_paren[2] == 'R') team.any_running = true;
  }
  closedir(tasks);
  return team;
}

void TeamPlacement::steer_away(const std::vector<pid_t>& threads) {
  const int own_cpu = sched_getcpu();
  if (own_cpu < 0) return;
  for (const pid_t thread : threads) {
    cpu_set_t cpus;
    if (sched_getaffinity(thread, sizeof cpus, &cpus) != 0) continue;
    cpu_set_t others = cpus;
    CPU_CLR(own_cpu, &others);
    if (CPU_COUNT(&others) == 0 || CPU_EQUAL(&others, &cpus)) continue;
    if (sched_setaffinity(thread, sizeof others, &others) == 0) {
      steered_.emplace_back(thread, cpus);
    }
  }
}

void TeamPlacement::restore() {
  // A thread that ended since (a released team) fails harmlessly.
  for (const auto& [thread, cpus] : steered_) {
    sched_setaffinity(thread, sizeof cpus, &cpus);
  }
  steered_.clear();
}

void release_host_threads() {
  // omp_pause_soft: the team's threads end; libgomp starts new ones at the
  // next parallel region. libgomp frees only the calling thread's team.
  constexpr int kOmpPauseSoft = 1;
  if (omp_pause_resource_all != nullptr) omp_pause_resource_all(kOmpPauseSoft);
}

void release_host_threads_of_submitter() {
  using Clock = std::chrono::steady_clock;
  // A clock read per submission (tens of nanoseconds next to a launch's
  // microseconds); the release itself at most once per interval.
  thread_local Clock::time_point next_release{};
  const Clock::time_point now = Clock::now();
  if (now < next_release) return;
  next_release = now + kReleaseHostThreadsAfter;
  release_host_threads();
}

void set_fixed_kernel_team_query(mydevFixedKernelTeamFn_t fixed) {
  g_fixed_kernel_team.store(fixed, std::memory_order_release);
}

int kernel_team_size(double others_cpus, int online_cpus, int full_team) {
  const int taken = int(std::ceil(others_cpus - kOthersNoiseCpus));
  if (taken <= 0) return full_team;
  return std::clamp(online_cpus - taken, 1, std::max(full_team, 1));
}

void KernelTeam::resize(Clock::time_point now) {
  next_sample_ = now + kHostLoadInterval;
  if (omp_get_max_threads == nullptr || omp_set_num_threads == nullptr) return;
  const std::optional<LoadSample> sample = take_load_sample(now);
  if (!sample.has_value()) return;  // no measure: the team stays as it is
  const std::optional<LoadSample> previous =
      last_.has_value() ? last_ : start_sample_before(sample->wall_ns);
  last_ = sample;
  if (!previous.has_value()) return;
  const int64_t wall = sample->wall_ns - previous->wall_ns;
  const int64_t busy = sample->busy_ns - previous->busy_ns;
  const int64_t ours = sample->process_ns - previous->process_ns;
  if (wall <= 0) return;
  // Busy time of all CPUs that was not this process's: other processes and
  // the kernel's own threads, less one tick, which may be the counters'
  // rounding rather than load (a third of a core over a first window of
  // 30 ms).
  others_cpus_ = std::max(0.0, double(busy - ours - tick_ns()) / double(wall));
  apply();
}

void KernelTeam::apply() {
  const int current = omp_get_max_threads();
  // Sized by someone else: ATen, at the thread's first parallel region.
  if (current != chosen_) full_team_ = current;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int cpus = online > 0 ? int(online) : 1;
  const mydevFixedKernelTeamFn_t fixed =
      g_fixed_kernel_team.load(std::memory_order_acquire);
  chosen_ = fixed != nullptr && fixed() != 0
                ? full_team_
                : kernel_team_size(others_cpus_, cpus, full_team_);
  if (chosen_ == current) return;
  omp_set_num_threads(chosen_);
  if (MKL_Set_Num_Threads_Local != nullptr) {
    const int mkl_count = chosen_ == full_team_ ? mkl_full_ : chosen_;
    const int replaced = MKL_Set_Num_Threads_Local(mkl_count);
    // A count this class did not set is the thread's own (ATen's).
    if (replaced != mkl_set_) mkl_full_ = replaced;
    mkl_set_ = mkl_count;
  }
  // A smaller team: the threads beyond it would only spin, then sleep.
  if (chosen_ < current) release_host_threads();
}

}  // namespace mydev_sim
