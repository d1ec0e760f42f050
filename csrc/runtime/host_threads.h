// The host threads a simulated kernel leaves behind on its executor.
//
// In the simulator a kernel is host code, and ATen's CPU kernels (and
// Inductor's) parallelise with OpenMP: the first parallel kernel an
// executor runs gives that thread an OpenMP team of its own, beside the
// team of every host thread that runs parallel CPU code. libgomp stops
// spinning between parallel regions in *every* team of the process once its
// teams hold more threads than the host has cores, which that second team
// makes true: each region then pays a futex wake-up. Measured on a 2-core
// host: an eager CPU training step of a small MLP took 0.43 ms before any
// mydev kernel and 1.50 ms after one mydev matmul, for the rest of the
// process. benchmarks/device_basics.py measures it ("CPU code beside an
// idle device"); tests/test_host_threads.py checks that the teams go.
//
// Both sides give their team back when it is idle, since the two mostly
// take turns (a phase of CPU work, then of device work):
//  * an executor that has been idle for kReleaseKernelTeamAfter releases
//    its team, so an idle device leaves the host's CPU code as it found it;
//  * a host thread that submits device work releases its own team, at most
//    once per kReleaseHostThreadsAfter, so the device's kernels do not pay
//    for a team the host used before (measured: conv2d 3x3 on mydev went
//    from 1.0x to 1.28x the CPU's time once the CPU's turns no longer
//    slowed down, because the CPU's team was still there).
// The next parallel region on either side starts a team again. That is not
// cheap: libgomp starts the new thread, then spins at the region's barrier
// while the scheduler has the new thread wait for a core, often the very
// core the spinning thread holds, until its time slice ends. On a 2-core VM
// a 256x256 matmul that takes 0.2 ms took 3-15 ms when its team had to be
// started again (benchmarks/device_basics.py, "First kernel after a host
// pause"). So the executor keeps its team across the pauses of a working
// program (a data-loading step, a .item() and some Python) and gives it
// back only after an idle long against that cost.
//
// Kept, the team must not spin: libgomp's threads spin for milliseconds
// after a region (300000 pause instructions by default), and a thread
// spinning after the device went idle holds a core that the host thread
// and the executor need when the next launch wakes it (the launch then
// waited a time slice, ~3 ms, one time in several). So an executor asleep
// for kParkKernelTeamAfter parks its team: the team's other threads wait on
// a condition variable inside a region the executor holds while it sleeps
// (park_host_threads_while), and leave it, warm, when work comes.
// Only a team that a kernel may have left spinning is parked: leaving the
// parked region ends a region too, after which the threads spin for those
// milliseconds again, beside the kernels that woke the executor. Parked at
// every pause, a team that no kernel used (small kernels run no parallel
// region; parking started it) spun through each burst of small kernels
// after a pause, on the executor's core: chains of one-element ops
// alternating with 8 ms of CPU work took 1.3-2.1x the CPU's time, and
// 0.9-1.2x once only such a team was parked. Whether a kernel may have used the
// team, the executor tells by its duration (kKernelMayUseTeamAfter), which a
// preempted kernel stretches: so not from kernels during which it was preempted
// (TeamSpin). A host can stretch a kernel without preempting it, so before it
// parks, the executor also looks whether a thread of its team is running at
// all (team_threads). On a 2-core VM the first run of a kernel's code
// after a pause took 50-120 us of the executor's own CPU time, against a few
// microseconds warm (the caches the idle core or another guest left behind),
// so every burst of small kernels had a kernel that looked parallel: the first
// park started a team that no kernel had, and every later pause woke it (24-40
// of 40 bursts in tests/test_host_threads.py). While both run parallel work at
// once, both teams exist: the host is oversubscribed, as with any two parallel
// programs.
//
// Other processes take cores too. libgomp's threads spin between parallel
// regions (torch loads libgomp before the extension, so OMP_WAIT_POLICY is
// the user's to set, not ours), and beside a busy process a team as large
// as the host spins on the core the kernels need: with one busy process on
// a 2-core host an mlp training step took 4x its idle time, 2x once nothing
// spun. So an executor sizes its kernels' team to the cores other processes
// leave free (KernelTeam), as OMP_DYNAMIC does from the 15-minute load
// average, but from the last tenth of a second (for an executor's first
// kernels, from the time since the library was loaded): a team of one on a
// 2-core host beside one busy process has no thread left to spin.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "mydev_runtime.h"

namespace mydev_sim {

// Long against the gaps between launches of a busy host (microseconds),
// short against a phase of CPU work between device work.
constexpr std::chrono::milliseconds kReleaseHostThreadsAfter{2};

// How long an executor sleeps with its team left alone before it parks the
// team. Parking is a parallel region, so it wakes the team's threads, and
// when work comes they leave the region and spin on in libgomp for
// milliseconds: an executor that parked at every short sleep (a host thread
// preempted for a moment between launches) had its own team spin beside it
// and on the host thread's core, which preempted the host thread again. On a
// chain of one-element ops that loop held for seconds at 2x the chain's
// time (260 parks per 2000 chains). Long against such gaps, short against
// libgomp's own spin, which a team left alone stops by itself.
constexpr std::chrono::milliseconds kParkKernelTeamAfter{1};

// A kernel that ran this long may have run a parallel region (ATen
// parallelises a loop only beyond 32768 elements, Inductor and MKL beyond
// similar sizes). Shorter kernels (a chain of small ops) are taken to leave
// the team as it was; one that did use it leaves it spinning for at most
// kTeamSpinsAfterRegion, unparked, as libgomp would anyway.
constexpr std::chrono::microseconds kKernelMayUseTeamAfter{50};

// How long a team's threads may spin after a region: libgomp's 300000
// pauses, measured at 7.9-8.5 ms on a 2-core AMD VM; longer on CPUs whose
// pause instruction is slower. After that they sleep by themselves, and
// parking them would only wake them.
constexpr std::chrono::milliseconds kTeamSpinsAfterRegion{20};

// Long against the pauses of a program that keeps the device working (a
// few milliseconds) and against starting a team again (up to 15 ms, see
// above), short against a phase of CPU work beside an idle device.
constexpr std::chrono::milliseconds kReleaseKernelTeamAfter{50};

// Runs `sleep` on the calling thread (an executor falling asleep) while the
// other threads of its OpenMP team wait on a condition variable instead of
// spinning, and returns what `sleep` returned once they have all left the
// region. Without OpenMP in the process, or with a team of one, just runs
// `sleep`. Starts the team if the thread has none: call it only on an
// executor whose kernels ran since its team was released.
bool park_host_threads_while(const std::function<bool()>& sleep);

// Whether an executor's team may still be spinning after the kernels that
// used it, so that parking it is worth waking it. Executor-thread state.
class TeamSpin {
 public:
  using Clock = std::chrono::steady_clock;

  // After each kernel. A kernel short of kKernelMayUseTeamAfter costs a
  // comparison; a longer one a look at the thread's context switches (a
  // system call): one preempted since the previous look may only seem long,
  // and is not counted.
  void note_kernel(Clock::time_point began, Clock::time_point ended);

  // After the executor slept (a system call was paid already): switches
  // before the sleep, such as the host's CPU work preempting the executor's
  // spin for work, say nothing of the kernels after it.
  void note_woken();

  bool may_spin(Clock::time_point now) const { return now < may_spin_until_; }

 private:
  Clock::time_point may_spin_until_{};
  long involuntary_switches_ = 0;  // at the previous look
};

// The calling thread's OpenMP team: the other threads that bear the
// caller's name, which Linux threads inherit from the thread that starts
// them, read from /proc/self/task (one file per thread of the process, tens
// of microseconds).
struct TeamThreads {
  std::vector<pid_t> ids;
  // Whether one of them is running or waiting for a core (spinning, since
  // the caller runs no region). True when the threads cannot be read, as the
  // caller must then assume they may spin.
  bool any_running = false;
};
TeamThreads team_threads();

// Where an executor's team wakes after the executor slept. A thread woken
// by a thread that runs is queued on a core, and when every core was busy
// at that moment (the executor, and the host thread that launched and has
// yet to block in its synchronize) it is queued behind the executor: the
// executor then spins at its region's barrier for a thread that waits for
// the executor's core, while the host's core falls idle, and the scheduler
// does not move a thread that just ran where it is. On a 2-core VM a
// 256x256 matmul issued 3-10 ms after the previous one took 1-2 ms, and
// 10-20 ms one time in ten: 4 ms time slices, the two threads taking turns
// on one core while the other idled (perf sched timehist). So before it
// wakes its team (ending a park, or starting its first kernel's region), an
// executor that slept takes its own core from the team threads' CPUs, and
// gives the CPUs back once the kernels it woke for are done: woken, a
// thread stays on the core it was given. Executor-thread state.
class TeamPlacement {
 public:
  // Each of `threads` may run on its CPUs except the caller's current one
  // (a thread with no other CPU keeps its own).
  void steer_away(const std::vector<pid_t>& threads);
  // Gives each steered thread the CPUs it had.
  void restore();

 private:
  std::vector<std::pair<pid_t, cpu_set_t>> steered_;
};

// Releases the calling thread's OpenMP team, if it has one and OpenMP is in
// the process (the driver's own test program runs without it). Inside a
// parallel region it does nothing.
void release_host_threads();

// Called by a host thread (not an executor) each time it submits device
// work: releases its team at most once per kReleaseHostThreadsAfter.
void release_host_threads_of_submitter();

// How often an executor measures the other processes' load: long against
// the 10 ms resolution of the host's CPU times (/proc/stat), short against
// a benchmark or a training phase.
constexpr std::chrono::milliseconds kHostLoadInterval{100};

// The team for kernels when other processes used `others_cpus` cores (on
// average) of the `online_cpus` over the last interval and the team would
// otherwise have `full_team` threads. A quarter of a core is noise (the
// measure's resolution, the system's own threads); beyond it, each core
// begun is a core the team gives up, down to one thread.
int kernel_team_size(double others_cpus, int online_cpus, int full_team);

// omp_get_max_threads of the calling thread; 1 without OpenMP in the
// process.
int omp_max_threads();

// mydevSetFixedKernelTeamQuery.
void set_fixed_kernel_team_query(mydevFixedKernelTeamFn_t fixed);

// The host's and this process's CPU times at one moment, from which the
// load between two moments follows.
struct LoadSample {
  int64_t wall_ns;
  int64_t busy_ns;     // all CPUs' busy time (/proc/stat)
  int64_t process_ns;  // this process's CPU time
};

// Keeps the calling executor's OpenMP team (omp_set_num_threads of that
// thread: ATen's, oneDNN's and Inductor's parallel regions follow it; and
// MKL's count for the thread, which MKL keeps apart) at
// kernel_team_size, or at the full team while the fixed-team query says so.
// Executor-thread state; MYDEV_DYNAMIC_THREADS=0 turns it off.
class KernelTeam {
 public:
  using Clock = std::chrono::steady_clock;

  explicit KernelTeam(bool enabled) : enabled_(enabled) {}

  // Before each kernel, and when the idle executor wakes at next_measure():
  // a clock read, and once per kHostLoadInterval a look at the host's CPU
  // times and this process's (tens of microseconds). Returns when it is
  // done: `now`, or the time after that look.
  Clock::time_point keep_current(Clock::time_point now) {
    if (!enabled_ || now < next_sample_) return now;
    resize(now);
    return Clock::now();
  }

  // After each kernel. ATen sizes a thread's team at its first parallel
  // region (from torch.set_num_threads), undoing a size chosen before it:
  // the first kernels after a load measured since the library was loaded
  // ran with the full team. Seen here, that size is the full team, and the
  // team is sized again (an OpenMP call, a few nanoseconds, when nothing
  // changed).
  void keep_after_kernel() {
    if (chosen_ != 0 && omp_max_threads() != chosen_) apply();
  }

  // When an idle executor must wake to measure again; none when the team
  // is not resized or no kernel has run yet. Measured only at kernels, the
  // first kernel after an idle second would size its team from that second's
  // average load (the worker processes of a torch.compile, busy while the
  // device waited for the compiled code, gave its first kernels a team of one
  // for 100 ms, half speed on 2 cores), not from the last interval's.
  std::optional<Clock::time_point> next_measure() const {
    if (!enabled_ || !last_.has_value()) return std::nullopt;
    return next_sample_;
  }

 private:
  void resize(Clock::time_point now);
  // Sizes the team from the last measure (others_cpus_).
  void apply();

  const bool enabled_;
  Clock::time_point next_sample_{};
  // The previous measure's counters, which the next measure subtracts;
  // none before the first measure.
  std::optional<LoadSample> last_;
  double others_cpus_ = 0;  // the last measure: cores other processes took
  // The size this class last chose (0: none yet), and the size the thread
  // had otherwise: ATen sets it at the thread's first parallel region from
  // torch.set_num_threads, and a size other than ours is taken as the new
  // full team.
  int chosen_ = 0;
  int full_team_ = 0;
  // MKL's count for the thread apart from this class, given back with the
  // full team, and the count this class last set (-1: none).
  int mkl_full_ = 0;
  int mkl_set_ = -1;
};

}  // namespace mydev_sim
