"""What torch.serialization looks up on a device module
(``torch.mydev._utils._get_device_index(location, True)``)."""

from ._device import _get_device_index

__all__ = ["_get_device_index"]
