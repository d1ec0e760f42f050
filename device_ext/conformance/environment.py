"""What a report records about where it ran: the numbers are only
comparable between runs that say what build, device and settings they had."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Dict

import torch

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # device_ext/


def _git_revision() -> str:
    """The source revision, marked "+dirty" with uncommitted changes: a
    report from a working tree is not a report of the commit."""
    try:

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", *args], cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()

        revision = git("rev-parse", "--short", "HEAD")
        return revision + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def extension_build() -> str:
    """When the loaded binary was built: the C++ changes between builds,
    independently of the Python sources. Ask in the process that runs the
    ops, right after it loaded the binary: a new build can replace the file
    while a run is under way."""
    import device_ext._C as extension

    built = datetime.datetime.fromtimestamp(os.path.getmtime(extension.__file__), tz=datetime.timezone.utc)
    return f"{Path(extension.__file__).name}, built {built.isoformat(timespec='seconds')}"


def device_description(device: str) -> Dict[str, Any]:
    """The device module's view of the device, and the binary behind it
    (initialises the device: call this where the ops run)."""
    module = torch.get_device_module(device)
    properties = module.get_device_properties(torch.device(device))
    fields = {
        name: getattr(properties, name)
        for name in ("name", "total_memory", "multi_processor_count", "major", "minor")
        if hasattr(properties, name)
    }
    return {
        "device": device,
        "device_count": module.device_count(),
        "properties": fields,
        "extension_build": extension_build(),
    }


def run_description() -> Dict[str, Any]:
    """Everything but the device and the binary: versions, host, date."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        extension_version = version("torch-mydev")
    except PackageNotFoundError:
        extension_version = "not installed"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "torch_mydev": extension_version,
        "source_revision": _git_revision(),
        "python": platform.python_version(),
        "host": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
    }
