"""Vendor conformance suite: PyTorch's OpInfo database on mydev, against the CPU.

`python -m device_ext.conformance --help` for the command line. Modules:

- cli: options, the run, the reports, the exit status
- opdb: which ops and dtypes a run checks
- pool / worker: worker processes with a time limit per op
- runner: checking one op at one dtype (call forms, synchronizing, verdicts)
- samples: which sample inputs, and which of their tensors go to the device
- transfer: copying sample inputs to the device with their layout
- compare: device result against CPU result
- policy: tolerances and nondeterminism, as the OpInfo declares them
- classify: statuses from exceptions and samples
- summary: pass rates; report_json / report_markdown: the reports
- progress: the progress bar

Importing this package does not import torch's test database; `runner` and
`opdb` do. CI: tests/test_conformance.py. The current report:
docs/conformance_float32.md.
"""

from .results import Cause, Status, TaskResult

__all__ = ["Cause", "Status", "TaskResult"]
