"""Fixtures for the mydev test suite (shared helpers live in mydev_testing)."""

import pytest
import torch

from mydev_testing import run_python


@pytest.fixture
def python_subprocess():
    return run_python


@pytest.fixture(autouse=True)
def device_left_clean():
    """Every test leaves the devices idle and with no unreported kernel
    failure, so one test's asynchronous error cannot fail the next."""
    yield
    for index in range(torch.mydev.device_count()):
        torch.mydev.synchronize(index)
