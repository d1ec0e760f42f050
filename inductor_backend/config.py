"""Settings of mydev's Inductor backend.

Registered with Inductor as mydev's device config, so every value here is part
of the FX graph cache key: graphs compiled with different settings (another
kernel language, another build) never share cache entries.

Change them like Inductor's own config: ``inductor_backend.config.patch(...)``
or the environment variables named below.
"""

import os
import sys

import torch
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

# Nor graphs generated for another vector ISA: a cached graph holds its
# kernels' source, whose loops step by that ISA's vector width, and the
# kernels are rebuilt for the ISA of the process that loads them. Inductor's
# FX graph cache key does not name the ISA (torch 2.13), so a graph cached
# under ATEN_CPU_CAPABILITY=avx2, or on an AVX2 host sharing the cache
# directory, overran its buffers when an AVX-512 process loaded it (heap
# corruption; the CPU's own compiled graphs do the same). ATen's capability
# (the CPU's, lowered by ATEN_CPU_CAPABILITY) is what Inductor picks the ISA
# from, and reading it costs nothing, where Inductor's own pick builds probe
# programs.
vector_isa: str = torch.backends.cpu.get_cpu_capability()

install_config_module(sys.modules[__name__])
