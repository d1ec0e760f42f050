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
//  * an executor that has been idle for kReleaseHostThreadsAfter releases
//    its team, so an idle device leaves the host's CPU code as it found it;
//  * a host thread that submits device work releases its own team, at most
//    once per kReleaseHostThreadsAfter, so the device's kernels do not pay
//    for a team the host used before (measured: conv2d 3x3 on mydev went
//    from 1.0x to 1.28x the CPU's time once the CPU's turns no longer
//    slowed down, because the CPU's team was still there).
// The next parallel region on either side starts a team again (tens of
// microseconds). While both run parallel work at once, both teams exist:
// the host is oversubscribed, as with any two parallel programs.
#pragma once

#include <chrono>

namespace mydev_sim {

// Long against the gaps between launches of a busy host (microseconds) and
// against starting a team again (tens of microseconds), short against a
// phase of CPU work beside an idle device.
constexpr std::chrono::milliseconds kReleaseHostThreadsAfter{2};

// Releases the calling thread's OpenMP team, if it has one and OpenMP is in
// the process (the driver's own test program runs without it). Inside a
// parallel region it does nothing.
void release_host_threads();

// Called by a host thread (not an executor) each time it submits device
// work: releases its team at most once per kReleaseHostThreadsAfter.
void release_host_threads_of_submitter();

}  // namespace mydev_sim
