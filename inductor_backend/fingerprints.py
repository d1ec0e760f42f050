"""What identifies a build of torch-mydev to Inductor's caches.

Inductor keys its on-disk kernel cache on the source text and compiler
command only, and its FX graph cache on torch's and the device's configs; a
new torch-mydev at the same path changes none of them. These fingerprints
are written into the keys (config.build_fingerprint) and into generated
source (kernel_modules.headers_comment), so an upgrade never loads what an
older build cached.
"""

import functools
import glob
import hashlib
import os
from typing import Iterable


def _digest(paths: Iterable[str]) -> "hashlib._Hash":
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(path, "rb") as source:
            digest.update(source.read())
    return digest


@functools.lru_cache(maxsize=None)
def headers_fingerprint(include_dir: str) -> str:
    """The headers generated code includes: the launch contract and its ABI
    version, the C shims, the AOTInductor model header."""
    return _digest(glob.glob(os.path.join(include_dir, "*.h"))).hexdigest()[:16]


def build_fingerprint(extension_module: str, code_generators: str) -> str:
    """The extension module and the libraries next to it (their kernels
    decide how graphs are traced, e.g. which attention op
    scaled_dot_product_attention becomes), the code generators' sources, the
    package's changes to torch (torch_patches: some steer Inductor's lowering
    and scheduling) and the headers."""
    package_dir = os.path.dirname(extension_module)
    digest = _digest(
        glob.glob(os.path.join(code_generators, "*.py")) + glob.glob(os.path.join(package_dir, "torch_patches", "*.py"))
    )
    for library in [extension_module, *sorted(glob.glob(os.path.join(package_dir, "lib", "*.so")))]:
        stat = os.stat(library)
        digest.update(f"{stat.st_size}-{stat.st_mtime_ns}".encode())
    digest.update(headers_fingerprint(os.path.join(package_dir, "include")).encode())
    return digest.hexdigest()[:16]
