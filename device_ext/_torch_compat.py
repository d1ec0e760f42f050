"""Refuse, with one clear message, to load against a torch the binary was not
built for: C++ ABI differences would otherwise surface as undefined symbols
or crashes."""

import torch


def _series(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def check_torch_version() -> None:
    try:
        from ._build_info import TORCH_VERSION as built_for
    except ImportError as err:
        raise ImportError(
            "torch-mydev is not built: run `pip install --no-build-isolation -e .` in the source tree"
        ) from err
    if _series(torch.__version__) != _series(built_for):
        raise ImportError(
            f"torch-mydev was built for torch {built_for} but torch "
            f"{torch.__version__} is installed. Install torch=={built_for} or "
            "rebuild torch-mydev against the installed torch "
            "(pip install --no-build-isolation -e .). Set "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 to import torch without mydev."
        )
