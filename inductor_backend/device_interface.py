"""mydev as Dynamo and Inductor see a device: properties, streams, events,
synchronisation (``torch._dynamo.device_interface``)."""

from typing import Any, Dict, List

import torch
from torch._dynamo import device_interface as dynamo_devices

from device_ext import _C
from device_ext.device_name import DEVICE_NAME as DEVICE


class MydevInterface(dynamo_devices.DeviceInterface):
    device = torch.mydev.device
    Event = torch.mydev.Event
    Stream = torch.mydev.Stream

    class Worker:
        """Answers in compile workers from properties recorded before they
        started, without touching the device (as CUDA's does)."""

        _current: Dict[str, int] = {}
        _properties: Dict[str, List[Any]] = {}

        @staticmethod
        def set_device(device: int) -> None:
            MydevInterface.Worker._current[DEVICE] = device

        @staticmethod
        def current_device() -> int:
            current = MydevInterface.Worker._current.get(DEVICE)
            return torch.mydev.current_device() if current is None else current

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            if isinstance(device, str):
                device = torch.device(device)
            if isinstance(device, torch.device):
                if device.type != DEVICE:
                    raise ValueError(f"expected a {DEVICE} device, got {device}")
                device = device.index
            if device is None:
                device = MydevInterface.Worker.current_device()
            cache = MydevInterface.Worker._properties
            if DEVICE not in cache:
                cache[DEVICE] = [torch.mydev.get_device_properties(i) for i in range(torch.mydev.device_count())]
            return cache[DEVICE][device]

    current_device = staticmethod(torch.mydev.current_device)
    set_device = staticmethod(torch.mydev.set_device)
    exchange_device = staticmethod(torch.mydev._exchange_device)
    maybe_exchange_device = staticmethod(torch.mydev._maybe_exchange_device)
    device_count = staticmethod(torch.mydev.device_count)
    stream = staticmethod(torch.mydev.stream)
    current_stream = staticmethod(torch.mydev.current_stream)
    set_stream = staticmethod(torch.mydev.set_stream)
    _set_stream_by_id = staticmethod(torch.mydev._set_stream_by_id)
    synchronize = staticmethod(torch.mydev.synchronize)
    get_device_properties = staticmethod(torch.mydev.get_device_properties)
    memory_allocated = staticmethod(torch.mydev.memory_allocated)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return _C._current_raw_stream(device_idx)

    @staticmethod
    def is_available() -> bool:
        return torch.mydev.is_available()

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        major, minor = torch.mydev.get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.mydev.is_bf16_supported()


def register_device_interface() -> None:
    dynamo_devices.register_interface_for_device(DEVICE, MydevInterface)
    for index in range(torch.mydev.device_count()):
        dynamo_devices.register_interface_for_device(f"{DEVICE}:{index}", MydevInterface)
