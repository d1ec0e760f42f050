"""The name of the device type: PyTorch's PrivateUse1 renamed. Python code
that names the device type uses this constant (the C++ side's is
``mydev::kDeviceName`` in csrc/core/device.h; both must agree)."""

DEVICE_NAME = "mydev"
