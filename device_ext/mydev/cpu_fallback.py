"""The CPU fallback policy for operators mydev has no kernel for
(``MYDEV_CPU_FALLBACK=off|warn|on``) and its counters.

Every ATen operator runs on the device. Operators from other namespaces (a
user's ``torch.library`` ops, third-party libraries) have host
implementations, not device kernels: with the policy ``off`` (default) they
raise a ``NotImplementedError`` naming the operator; with ``warn`` or ``on``
they run on the CPU with their inputs copied there and results copied back.
"""

from typing import Dict

from .. import _C


def cpu_fallback_policy() -> str:
    """ "off", "warn" or "on"."""
    return _C._cpu_fallback_policy()


def set_cpu_fallback_policy(policy: str) -> None:
    """Overrides MYDEV_CPU_FALLBACK for this process."""
    _C._set_cpu_fallback_policy(policy)


def cpu_fallback_counts() -> Dict[str, int]:
    """How many times each operator ran on the CPU through the fallback."""
    return dict(_C._cpu_fallback_counts())


def reset_cpu_fallback_counts() -> None:
    _C._reset_cpu_fallback_counts()
