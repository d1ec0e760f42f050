"""Random state of the per-device Philox generators (16-byte state: seed u64,
offset i64, the layout DTensor's random ops expect)."""

from typing import Iterable, List, Union

import torch

from .. import _C
from ..device_name import DEVICE_NAME
from ._device import _get_device_index, device_count

_DeviceLike = Union[torch.device, str, int, None]


class _DefaultGenerators:
    """``torch.mydev.default_generators[i]``: created on first access so that
    importing torch never starts the device."""

    def __getitem__(self, index: int) -> torch.Generator:
        count = device_count()
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"mydev device index {index} out of range (device count {count})")
        return _C._default_generator(index)

    def __len__(self) -> int:
        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device: _DeviceLike) -> torch.Generator:
    return default_generators[_get_device_index(device)]


def get_rng_state(device: _DeviceLike = DEVICE_NAME) -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> List[torch.Tensor]:
    return [gen.get_state() for gen in default_generators]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = DEVICE_NAME) -> None:
    # As on cuda, only a uint8 state is accepted (the generator checks); the
    # state may live on any device.
    state = new_state.detach().to("cpu").contiguous()
    _generator(device).set_state(state)


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for gen in default_generators:
        gen.manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    first = None
    for gen in default_generators:
        if first is None:
            first = gen.seed()
        else:
            gen.manual_seed(first)


def initial_seed() -> int:
    return _generator(None).initial_seed()
