"""An idle device gives the host threads of its kernels back, and a host
thread submitting device work gives back its own idle ones
(csrc/runtime/host_threads.h). Between kernels, within the idle that the
release waits for, the executor keeps its team, parked after kernels that
used it: no thread of it spins, and bursts of small kernels leave it
asleep.

A kernel's parallel loops run on an OpenMP team of its stream's executor;
while that team exists beside the host's own, libgomp stops spinning in
every team of the process and CPU code slows down (3.5x for a small
training step on a 2-core host; benchmarks/device_basics.py measures it).
The team's threads are named after the executor (Linux threads inherit the
name of the thread that starts them), so a plain script can watch them
come and go.

Beside busy processes the executor's team shrinks to the cores they leave
free (MYDEV_DYNAMIC_THREADS, on by default, off in the suite: conftest.py).
The tests of the release run with it off, so that a host loaded by other
tests keeps their team of two; the tests of the shrinking turn it on."""

from typing import Dict, Tuple

from mydev_testing import run_python

# Counts of this process's threads by name, without importing torch (a
# script may need to start other processes first).
_THREAD_COUNTS = """
import os
import time

def tasks_named(prefix):
    tasks = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith(prefix):
                    tasks.append(task)
        except OSError:  # the thread ended while listed
            pass
    return tasks

def threads_named(prefix):
    return len(tasks_named(prefix))

def executor_threads():
    return threads_named("mydev0-s")

def executor_total(proc_file, value_of):
    # Summed over the executor and its team's threads, which bear its name:
    # value_of reads a number from each one's /proc/self/task/<id>/<proc_file>.
    total = 0
    for task in tasks_named("mydev0-s"):
        try:
            with open(f"/proc/self/task/{task}/{proc_file}") as text:
                total += value_of(text.read())
        except OSError:  # the thread ended since it was listed
            pass
    return total

def voluntary_switches(status):
    # From a thread's /proc/self/task/<id>/status text.
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches"):
            return int(line.split()[1])
    return 0

def team_tasks():
    # The executor's own thread started first; the others are its team.
    return sorted(tasks_named("mydev0-s"), key=int)[1:]

def team_wakeups():
    total = 0
    for task in team_tasks():
        with open(f"/proc/self/task/{task}/status") as status:
            total += voluntary_switches(status.read())
    return total
"""

# What the scripts below start with (but the last, which starts other
# processes before torch): the thread counts, and torch with a team of two
# on any host.
_PRELUDE = (
    _THREAD_COUNTS
    + """
import torch

torch.set_num_threads(2)  # a team of two on any host
"""
)

_SCRIPT = (
    _PRELUDE
    + """
def threads_after_idle():
    # Polls until the team is gone: the executor releases it once idle for
    # a few milliseconds. The bound only ends a failing run.
    deadline = time.monotonic() + 30
    while executor_threads() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return executor_threads()

a = torch.randn(384, 384, device="mydev")
for round in range(2):
    product = a @ a  # ATen's matmul parallelises over the team
    done = torch.mydev.Event()
    done.record()
    torch.mydev._sleep(2000)  # the executor stays busy while this counts
    done.synchronize()
    print("busy", executor_threads())
    torch.mydev.synchronize()
    print("idle", threads_after_idle())
    # A parallel kernel after the release starts a team again and computes.
    torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
print("ok")
"""
)


_HOST_SCRIPT = (
    _PRELUDE
    + """
def submit_after_the_interval(kernel):
    # A host thread releases its team at most every few milliseconds.
    time.sleep(0.05)
    return kernel()

a = torch.randn(384, 384)
on_device = a.to("mydev")
submit_after_the_interval(lambda: torch.mydev._sleep(0))
torch.mydev.synchronize()
host = threads_named("python")  # the host thread without a team
expected = a @ a  # parallel CPU work: the host thread gets a team
print("after CPU work", threads_named("python") - host)
product = submit_after_the_interval(lambda: on_device @ on_device)  # a kernel launch releases it
print("after submitting", threads_named("python") - host)
torch.testing.assert_close(product.cpu(), expected, rtol=1e-4, atol=1e-4)
torch.testing.assert_close(a @ a, expected)  # the next CPU region starts a team again
print("after CPU work", threads_named("python") - host)
"""
)


# The team between kernels: kept (starting it again costs milliseconds) but
# parked, so that it holds no core while the device is idle.
_PARKED_SCRIPT = (
    _PRELUDE
    + """
def executor_cpu_ms():
    return executor_total("schedstat", lambda stat: int(stat.split()[0])) / 1e6

a = torch.randn(384, 384, device="mydev")
for round in range(3):
    product = a @ a  # ATen's matmul parallelises over the team
    torch.mydev.synchronize()
    time.sleep(0.005)  # past the executor's own spin for work
    before = executor_cpu_ms()
    time.sleep(0.02)  # idle for less than the team's release
    print("idle", executor_threads(), executor_cpu_ms() - before)
    torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
print("ok")
"""
)

# Short sleeps between launches (a host thread busy elsewhere for a moment)
# leave the team alone: parking it is a parallel region that wakes its
# threads, which then spin on in libgomp beside the executor. Parked at
# every such sleep, the team woke at every gap, and on a chain of small ops
# its spinning preempted the host thread into the next gap.
_SHORT_GAPS_SCRIPT = (
    _PRELUDE
    + """
a = torch.randn(384, 384, device="mydev")
product = a @ a  # ATen's matmul parallelises over the team
torch.mydev.synchronize()
time.sleep(0.01)  # parked (after 1 ms asleep), short of the release (50 ms)
x = torch.ones(1, device="mydev")
before = team_wakeups()
for _ in range(200):
    x = x + 1
    time.sleep(0.0003)  # past the executor's spin for work, short of the park
print("gaps 200 team wakeups", team_wakeups() - before, "threads", executor_threads())
torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
torch.testing.assert_close(x.cpu(), torch.full((1,), 201.0))
"""
)

# Bursts of small kernels with pauses between them (a program's CPU work)
# leave the team asleep: no kernel of theirs runs a parallel region, so
# none leaves the team spinning. Parked at each pause, the team (started
# by the first park) woke at each one and spun through the next burst. On a
# VM whose cores wake cold, the first run of a kernel's code after a pause
# took 50-120 us and looked parallel: the executor parks only a team with a
# thread running (team_threads in host_threads.h), which these bursts never start.
_SMALL_KERNEL_BURSTS_SCRIPT = (
    _PRELUDE
    + """
x = torch.ones(4, device="mydev")
index = torch.zeros(1, dtype=torch.long, device="mydev")
def burst():
    for _ in range(50):
        y = x.index_select(0, index) + x.sum()
    return y
for _ in range(3):  # first calls, whatever they cost
    burst()
torch.mydev.synchronize()
time.sleep(0.2)  # past the release of any team they started
before = team_wakeups()
for _ in range(40):
    y = burst()
    torch.mydev.synchronize()
    time.sleep(0.003)  # past the executor's sleep before a park, short of the release
print("bursts 40 team wakeups", team_wakeups() - before)
torch.testing.assert_close(y.cpu(), torch.full((1,), 5.0))
"""
)

# An executor that slept wakes its team onto the other cores (TeamPlacement
# in host_threads.h): woken beside it, a team thread waited for the
# executor's core while the host's idled, and a matmul after a 10 ms pause
# took 10-20 ms one time in ten on 2 cores. The team keeps the other cores
# while the kernels it woke for run, and gets every core back once they are
# done: no thread stays pinned. The script prints how many rounds found the
# team steered, and the threads left with fewer CPUs than the process.
_PLACEMENT_SCRIPT = (
    _PRELUDE
    + """
cpus = os.sched_getaffinity(0)

def team_cpu_counts():
    return [len(os.sched_getaffinity(int(task))) for task in team_tasks()]

a = torch.randn(384, 384, device="mydev")
product = a @ a  # ATen's matmul parallelises over the team
torch.mydev.synchronize()
steered = 0
for round in range(5):
    time.sleep(0.01)  # the executor asleep past its park, short of the release
    product = a @ a  # wakes the team
    done = torch.mydev.Event()
    done.record()
    torch.mydev._sleep(100)  # the kernels it woke for are not all done
    done.synchronize()
    counts = team_cpu_counts()
    steered += bool(counts) and all(count == len(cpus) - 1 for count in counts)
    torch.mydev.synchronize()
time.sleep(0.01)  # the executor, idle, past giving the CPUs back
pinned = sum(len(os.sched_getaffinity(int(task))) != len(cpus) for task in os.listdir("/proc/self/task"))
print("steered", steered, "pinned", pinned, "cpus", len(cpus))
torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
"""
)


def placement(env: Dict[str, str], pin_to_one_cpu: bool) -> Tuple[int, int, int]:
    """(rounds steered of 5, threads left pinned, the process's CPUs) from
    _PLACEMENT_SCRIPT, run with its process on every CPU or on one."""
    script = _PLACEMENT_SCRIPT
    if pin_to_one_cpu:
        # As `taskset` would, before torch starts a thread.
        script = "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n" + script
    result = run_python(script, env, timeout=180)
    assert result.returncode == 0, result.stderr
    _, steered, _, pinned, _, cpus = result.stdout.split()
    return int(steered), int(pinned), int(cpus)


def test_an_executor_wakes_its_team_onto_other_cores_and_leaves_no_thread_pinned():
    steered, pinned, cpus = placement(_FIXED_TEAM, pin_to_one_cpu=False)
    assert pinned == 0
    if cpus > 1:
        # A loaded host may delay the park past a round's pause, or wake the
        # executor early; most rounds find the team steered.
        assert steered >= 3


def test_a_process_pinned_to_one_cpu_keeps_its_threads_there():
    steered, pinned, cpus = placement(_FIXED_TEAM, pin_to_one_cpu=True)
    assert (steered, pinned, cpus) == (0, 0, 1)


_FIXED_TEAM = {"MYDEV_DYNAMIC_THREADS": "0"}
_DYNAMIC_TEAM = {"MYDEV_DYNAMIC_THREADS": "1"}  # the default outside the suite


def test_a_host_thread_submitting_device_work_releases_its_idle_team():
    result = run_python(_HOST_SCRIPT, _FIXED_TEAM, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["after CPU work 1", "after submitting 0", "after CPU work 1"], (
        result.stdout
    )


def test_an_idle_executor_releases_its_kernels_host_threads_and_starts_them_again():
    result = run_python(_SCRIPT, _FIXED_TEAM, timeout=180)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    # Each round: the executor plus its team while busy, the executor alone
    # once idle.
    assert [line for line in lines if line.startswith(("busy", "idle"))] == ["busy 2", "idle 1"] * 2, result.stdout
    assert lines[-2] == "ok"


def test_an_executor_between_kernels_keeps_its_team_without_spinning():
    result = run_python(_PARKED_SCRIPT, _FIXED_TEAM, timeout=180)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[3] == "ok", result.stdout
    rounds = [line.split() for line in lines[:3]]
    # The executor and its team of two in every round: kept, not released.
    assert [threads for _, threads, _ in rounds] == ["2"] * 3, result.stdout
    # libgomp's threads would spin for milliseconds after the kernel (about
    # 4 of the 20 ms on the 2-core host); parked, they take next to no CPU
    # time. The least of three rounds, as a loaded host may delay the park.
    assert min(float(cpu_ms) for _, _, cpu_ms in rounds) < 2.0, result.stdout


def test_short_sleeps_between_launches_leave_the_executors_team_asleep():
    result = run_python(_SHORT_GAPS_SCRIPT, _FIXED_TEAM, timeout=180)
    assert result.returncode == 0, result.stderr
    fields = result.stdout.split()
    assert fields[-1] == "2", result.stdout  # the team is kept throughout
    # Parked at every sleep, the team woke at each of the 200 gaps (at
    # least once each). A loaded host may stretch a few sleeps past the park.
    assert int(fields[4]) < 50, result.stdout


def test_bursts_of_small_kernels_between_pauses_leave_the_executors_team_asleep():
    result = run_python(_SMALL_KERNEL_BURSTS_SCRIPT, _FIXED_TEAM, timeout=180)
    assert result.returncode == 0, result.stderr
    # Parked at each pause, the team woke at least once per pause (40). A
    # small kernel stretched by an interrupt may still have it parked once.
    assert int(result.stdout.split()[-1]) < 10, result.stdout


_BUSY_HOST_SCRIPT = (
    _PRELUDE
    + """
import subprocess
import sys

torch.use_deterministic_algorithms(os.environ["TEST_ALGORITHMS"] == "deterministic")

# One busy process per core: whatever this test's own threads take, the
# others hold at least one core.
spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count())]
try:
    a = torch.randn(384, 384, device="mydev")
    # Parallel kernels over several of the executor's load intervals (100 ms).
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        a @ a
        torch.mydev.synchronize()
    product = a @ a
    done = torch.mydev.Event()
    done.record()
    torch.mydev._sleep(2000)  # the executor stays busy while this counts
    done.synchronize()
    print("busy host", executor_threads())
finally:
    for spinner in spinners:
        spinner.kill()
        spinner.wait()
torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
print("ok")
"""
)


def run_beside_busy_processes(algorithms: str, env: Dict[str, str]) -> str:
    result = run_python(_BUSY_HOST_SCRIPT, {"TEST_ALGORITHMS": algorithms, **env}, timeout=180)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[1] == "ok", result.stdout
    return lines[0]


def test_beside_busy_processes_the_executor_runs_its_kernels_without_a_team():
    # The executor alone: no team thread left to spin on the core the
    # kernels need. The same script with the setting off keeps the team,
    # so the count comes from the setting, not from the host.
    assert run_beside_busy_processes("default", _DYNAMIC_TEAM) == "busy host 1"
    assert run_beside_busy_processes("default", _FIXED_TEAM) == "busy host 2"


def test_deterministic_algorithms_keep_the_team_whatever_the_load():
    # A reduction's last bits depend on the team's size: results must not
    # depend on what else the host runs.
    assert run_beside_busy_processes("deterministic", _DYNAMIC_TEAM) == "busy host 2"


# An idle executor wakes once per load interval (100 ms) to measure the
# host's load, so that its next kernel's team is sized from the last
# interval, not from the average over the whole idle time (other processes
# busy while the device waited, then done, left the first kernels after a
# team of one: 21 ms instead of 11 for a 1024x1024 matmul on 2 cores). Which
# size the team takes depends on what else runs beside the suite; what the
# test can hold is the wake-ups themselves, and none with the setting off.
_IDLE_SCRIPT = (
    _PRELUDE
    + """
def executor_wakeups():
    return executor_total("status", voluntary_switches)

a = torch.randn(384, 384, device="mydev")
product = a @ a
torch.mydev.synchronize()
time.sleep(0.3)  # past the parked team's release: the executor alone, asleep
before = executor_wakeups()
time.sleep(1.0)
print("wakeups", executor_wakeups() - before, "threads", executor_threads())
torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
"""
)


def idle_executor_wakeups(env: Dict[str, str]) -> int:
    result = run_python(_IDLE_SCRIPT, env, timeout=180)
    assert result.returncode == 0, result.stderr
    _, wakeups, _, threads = result.stdout.split()
    assert threads == "1", result.stdout  # the released team stays released
    return int(wakeups)


def test_an_idle_executor_measures_the_hosts_load_once_per_interval():
    # About ten in the second; a loaded host may delay some.
    assert idle_executor_wakeups(_DYNAMIC_TEAM) >= 5
    # Without resizing there is nothing to measure: it sleeps through.
    assert idle_executor_wakeups(_FIXED_TEAM) <= 1


# An executor's first measure spans the time since the library was loaded
# (as torch was imported), so that its first kernels beside busy processes
# already run without a team. Measured only from its first kernel, it came
# 100 ms later: the first forward and backward of a small model took 90-120
# ms there on 2 cores, against 4-7 ms with a team of one. The busy processes
# start before torch is imported, as a user's program starts beside them.
_FIRST_KERNELS_SCRIPT = (
    _THREAD_COUNTS
    + """
import subprocess
import sys

spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count())]
try:
    time.sleep(0.3)  # the spinners running
    import torch

    torch.set_num_threads(2)  # a team of two on any host
    time.sleep(0.1)  # long enough for the host's times (10 ms ticks) to tell
    a = torch.randn(384, 384, device="mydev")  # the executor's first kernel
    product = a @ a  # ATen's matmul parallelises over the team
    done = torch.mydev.Event()
    done.record()
    torch.mydev._sleep(2000)  # the executor stays busy while this counts
    done.synchronize()
    print("first kernels", executor_threads())
finally:
    for spinner in spinners:
        spinner.kill()
        spinner.wait()
torch.testing.assert_close(product.cpu(), a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-4)
"""
)


def first_kernels_threads_beside_busy_processes(env: Dict[str, str]) -> str:
    result = run_python(_FIRST_KERNELS_SCRIPT, env, timeout=180)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_first_kernels_beside_busy_processes_run_without_a_team():
    assert first_kernels_threads_beside_busy_processes(_DYNAMIC_TEAM) == "first kernels 1"
    # The setting off keeps the team: the count comes from the measure.
    assert first_kernels_threads_beside_busy_processes(_FIXED_TEAM) == "first kernels 2"
