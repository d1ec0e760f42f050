"""Snippets Inductor's wrappers emit for device and stream handling on mydev."""

from torch._inductor.codegen.common import DeviceOpOverrides


class MydevDeviceOpOverrides(DeviceOpOverrides):
    # ---- Python wrapper
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from device_ext._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.mydev.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.mydev.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        # Imported by the wrapper's header (python_wrapper.py).
        return f"DeviceGuard({device_idx})"

    def current_stream(self) -> str:
        return "torch.mydev.current_stream()"

    # ---- C++ wrapper (types from device_ext/include/mydev_compiled_kernel.h)
    def kernel_header(self) -> str:
        return "#include <mydev_compiled_kernel.h>"

    def cpp_device_guard(self) -> str:
        return "mydev_compiled::DeviceGuard"

    def cpp_aoti_device_guard(self) -> str:
        return "mydev_compiled::DeviceGuard"

    def cpp_aoti_stream_guard(self) -> str:
        return "mydev_compiled::AotiStreamGuard"

    def cpp_stream_type(self) -> str:
        return "void*"

    def cpp_kernel_type(self) -> str:
        return "void*"

    def cpp_device_ptr(self) -> str:
        return "void*"
