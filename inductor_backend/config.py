"""Settings of mydev's Inductor backend.

Registered with Inductor as mydev's device config, so every value here is part
of the FX graph cache key: graphs compiled with different settings (another
kernel language, another launch ABI) never share cache entries.

Change them like Inductor's own config: ``inductor_backend.config.patch(...)``
or the environment variables named below.
"""

import glob
import hashlib
import os
import sys

from torch.utils._config_module import install_config_module

from device_ext import _C

# The language mydev kernels are generated in, read at each compile (see
# kernel_languages.py). "cpp": Inductor's C++ kernel generator (vectorized
# loop nests), compiled by the device compiler. "triton": Inductor's Triton
# kernel generator, compiled and run by Triton's mydev backend (needs the
# triton package). MYDEV_INDUCTOR_KERNEL_LANGUAGE sets the default.
kernel_language: str = os.environ.get("MYDEV_INDUCTOR_KERNEL_LANGUAGE", "cpp")

# Version of the contract between kernel modules and device_ext._C
# (device_ext/include/mydev_compiled_kernel.h); keyed so that a cached graph
# never loads kernels built against another version.
compiled_kernel_abi: int = 2


def _build_fingerprint() -> str:
    """device_ext._C (its kernels decide how graphs are traced, e.g. which
    attention op scaled_dot_product_attention becomes), the code generators
    in this package and the headers generated code includes."""
    digest = hashlib.sha256()
    stat = os.stat(_C.__file__)
    digest.update(f"{stat.st_size}-{stat.st_mtime_ns}".encode())
    include_dir = os.path.join(os.path.dirname(_C.__file__), "include")
    sources = glob.glob(os.path.join(os.path.dirname(__file__), "*.py"))
    sources += glob.glob(os.path.join(include_dir, "*.h"))
    for path in sorted(sources):
        with open(path, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:16]


# Graphs cached by another build of torch-mydev are not reused.
build_fingerprint: str = _build_fingerprint()

install_config_module(sys.modules[__name__])
