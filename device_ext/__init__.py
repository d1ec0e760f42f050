"""torch-mydev: the ``mydev`` device for PyTorch.

``import torch`` loads this package through the ``torch.backends`` entry point
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off); ``import device_ext``
works too. After either, ``torch.randn(2, device="mydev")`` and
``torch.mydev.*`` are available. ``torch.compile`` for mydev is the separate
package ``inductor_backend``, which depends on this one (never the reverse)
and is loaded by an entry point of its own.
"""


def _autoload() -> None:
    """Entry point called at the end of ``import torch``. Importing this
    package is what registers the device, so there is nothing left to do.

    Defined before anything imports torch: when ``device_ext`` is imported
    first, torch's autoload finds this package half-initialised and looks
    this function up."""


from ._torch_compat import check_torch_version  # noqa: E402

check_torch_version()

from . import _C  # noqa: E402  (only after the version check: a mismatched

# binary would fail with an undefined-symbol trace instead of a clear message)
# MYDEV_CPU_FALLBACK is read now: a bad value fails the import, not the first
# operator that would fall back, possibly hours into a run.
_C._cpu_fallback_policy()

from ._registration import register  # noqa: E402

register()

from .torch_patches import multiprocessing as _multiprocessing_patch  # noqa: E402

_multiprocessing_patch.apply()

from .torch_patches import autograd_exit  # noqa: E402

autograd_exit.apply()

from . import _kernel_failures_at_exit  # noqa: E402

_kernel_failures_at_exit.install()

from . import distributed, import_hooks  # noqa: E402

# The myccl c10d backend, once torch.distributed's c10d module exists.
import_hooks.run_after_import("torch.distributed.distributed_c10d", distributed.register)

from . import ops  # noqa: E402,F401  (defines the fused custom ops torch.ops.mydev.*)

__all__ = ["check_torch_version"]
