/* How long a cache line takes to go from one core to another and back: two
 * threads, pinned to the first two usable cores, hand a counter back and
 * forth. Prints nanoseconds per round trip (the median of up to 9 batches
 * of 2000, within about a second), or nothing when fewer than two cores are
 * usable.
 *
 * Every mydev op hands data between the launching thread and the stream's
 * executor (the task, the kernel's arguments, the finished closure), so its
 * host cost follows this figure, and a CPU op's does not. On the 2-core VM
 * the benchmarks ran on, it was about 100 ns at some times and about 500 ns
 * at others (the hypervisor placing the two virtual cores apart), and every
 * chain of small mydev ops took about 1.5x longer in the slow placement. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRoundTrips = 2000, kBatches = 9 };
static const double kBudgetNs = 1e9; /* a loaded host gets fewer batches */

static _Alignas(64) atomic_int ping;
static _Alignas(64) atomic_int pong;

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Answers each ping with a pong of the same number; -1 ends it. */
static void* answer(void* cpu) {
  (void)pin(*(int*)cpu); /* unpinned, it still answers, if slowly */
  int last = 0;
  for (;;) {
    int value;
    while ((value = atomic_load_explicit(&ping, memory_order_acquire)) ==
           last) {
    }
    if (value < 0) return NULL;
    atomic_store_explicit(&pong, value, memory_order_release);
    last = value;
  }
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  cpu_set_t usable;
  if (sched_getaffinity(0, sizeof usable, &usable) != 0) return 1;
  int cpus[2], found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (CPU_ISSET(cpu, &usable)) cpus[found++] = cpu;
  }
  if (found < 2) return 0;
  pthread_t other;
  (void)pin(cpus[0]);
  if (pthread_create(&other, NULL, answer, &cpus[1]) != 0) return 1;
  double batches[kBatches];
  int done = 0, value = 0;
  const double begin = now_ns();
  while (done < kBatches && (done == 0 || now_ns() - begin < kBudgetNs)) {
    const double start = now_ns();
    for (int k = 0; k < kRoundTrips; ++k) {
      atomic_store_explicit(&ping, ++value, memory_order_release);
      while (atomic_load_explicit(&pong, memory_order_acquire) != value) {
      }
    }
    batches[done++] = (now_ns() - start) / kRoundTrips;
  }
  atomic_store_explicit(&ping, -1, memory_order_release);
  pthread_join(other, NULL);
  qsort(batches, done, sizeof batches[0], by_value);
  printf("%.1f\n", batches[done / 2]);
  return 0;
}
