"""Settings of mydev's Inductor backend.

Registered with Inductor as mydev's device config, so every value here is part
of the FX graph cache key: graphs compiled with different settings (another
kernel language, another build) never share cache entries.

Change them like Inductor's own config: ``inductor_backend.config.patch(...)``
or the environment variables named below.
"""

import os
import sys

from torch.utils._config_module import install_config_module

from device_ext import _C

from . import fingerprints as _fingerprints

# The language mydev kernels are generated in, read at each compile (see
# kernel_languages.py). "cpp": Inductor's C++ kernel generator (vectorized
# loop nests), compiled by the device compiler. "triton": Inductor's Triton
# kernel generator, compiled and run by Triton's mydev backend (needs the
# triton package). MYDEV_INDUCTOR_KERNEL_LANGUAGE sets the default.
kernel_language: str = os.environ.get("MYDEV_INDUCTOR_KERNEL_LANGUAGE", "cpp")


# Graphs cached by another build of torch-mydev are not reused.
build_fingerprint: str = _fingerprints.build_fingerprint(_C.__file__, os.path.dirname(__file__))

install_config_module(sys.modules[__name__])
