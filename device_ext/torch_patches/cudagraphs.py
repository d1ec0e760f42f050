"""Inductor's graph wrapping (torch._inductor.cudagraph_utils / config),
torch 2.13: ``mode="reduce-overhead"`` captures compiled graphs only on cuda.

What it changes:
  * ``cudagraph_utils.check_multiple_devices_or_any_cpu_nodes`` also accepts
    a graph whose nodes all run on one mydev device (torch answers "skipping
    cudagraphs due to multiple devices: device(type='mydev', index=0)" for
    any single device but cuda), and names the CPU node of a graph mixing
    mydev and CPU nodes (torch ignores CPU nodes when graph partitions are
    on, and would name mydev as "multiple devices");
  * ``config.cudagraph_policy`` is set to mydev's policy (when the user set
    none): the pluggable hook torch 2.13 gives for *how* a compiled graph is
    captured, which for mydev graphs captures with torch.mydev graphs and
    delegates everything else to torch's default (cudagraph trees).

Why: without them reduce-overhead on mydev silently runs without graphs.
Test that fails without it: tests/test_graphs.py::
test_reduce_overhead_replays_captured_graph_inference (no capture happens);
test_reduce_overhead_skips_are_logged_and_results_stay_correct (the CPU
node's skip is logged as "multiple devices: device(type='mydev', ...)").
Remove when Inductor asks the device (e.g. its device interface) whether it
supports graphs instead of comparing with "cuda".

Applied by ``inductor_backend`` when it registers.
"""

from typing import Any, Callable

import torch
from torch._inductor import config, cudagraph_utils

from ..device_name import DEVICE_NAME


def _accept_one_mydev_device(check: Callable[..., Any]) -> Callable[..., Any]:
    def check_multiple_devices_or_any_cpu_nodes(device_node_mapping):
        devices = [device for device in device_node_mapping if device.type != "meta"]
        if len(devices) == 1 and devices[0].type == DEVICE_NAME:
            return None
        cpu_node = device_node_mapping.get(torch.device("cpu"))
        if cpu_node is not None and any(device.type == DEVICE_NAME for device in devices):
            # torch's check drops CPU nodes when graph partitions are on
            # (cudagraph trees capture around them); mydev's policy captures
            # whole graphs, so a CPU node is the reason it skips.
            return cudagraph_utils.format_default_skip_message(f"cpu device ({cpu_node.name})")
        return check(device_node_mapping)

    check_multiple_devices_or_any_cpu_nodes.__wrapped__ = check
    return check_multiple_devices_or_any_cpu_nodes


def apply(policy: "cudagraph_utils.CUDAGraphPolicy") -> None:
    """Installs both changes (idempotent)."""
    current = cudagraph_utils.check_multiple_devices_or_any_cpu_nodes
    if getattr(current, "__module__", None) != __name__:
        cudagraph_utils.check_multiple_devices_or_any_cpu_nodes = _accept_one_mydev_device(current)
    if config.cudagraph_policy is None:
        config.cudagraph_policy = policy
