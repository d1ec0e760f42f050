"""torch.multiprocessing: mydev tensors are pickled through device IPC.

What it changes: the reducers ``torch.multiprocessing`` registers with
``multiprocessing.reduction.ForkingPickler`` for ``torch.Tensor``,
``torch.nn.Parameter``, the legacy tensor classes and
``torch.UntypedStorage``. Each is replaced by one that sends mydev tensors
through ``device_ext._storage_sharing`` (a handle to the device memory) and
hands everything else to torch's own reducer, unchanged.

Why: torch 2.13's ``reductions.reduce_tensor`` special-cases only cuda (and
meta) storages; any other device falls through to the CPU path, which fails
with "_share_fd_: only available on CPU" (printed by a Queue's feeder thread
while the consumer waits forever). torch has no hook for a PrivateUse1
device here.

Torch versions: 2.13. Test that fails without it:
tests/test_multiprocessing.py (every sharing test). Remove when
``torch.multiprocessing.reductions`` dispatches to the device module (or a
registered PrivateUse1 reducer) for non-cuda accelerators.
"""

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions  # torch's reducers are registered first

from .. import _storage_sharing


def _reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type == "mydev":
        return _storage_sharing.reduce_mydev_tensor(tensor)
    return reductions.reduce_tensor(tensor)


def _reduce_storage(storage: torch.UntypedStorage):
    if storage.device.type == "mydev":
        _storage_sharing.refuse_mydev_storage(storage)
    return reductions.reduce_storage(storage)


def apply() -> None:
    tensor_classes = {torch.Tensor, torch.nn.Parameter, *torch._tensor_classes}
    for cls in tensor_classes:
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
