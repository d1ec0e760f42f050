"""The Triton backend plugin for mydev.

Triton finds it through the ``triton.backends`` entry point ``mydev`` and
imports ``compiler`` (``MydevBackend``: compiles for ``GPUTarget("mydev", ...)``)
and ``driver`` (``MydevDriver``: devices, streams, the launcher). Nothing in
``import torch`` imports this package or Triton.

In the simulator a kernel is executed, in stream order, by Triton's own
interpreter semantics driven over the kernel's arguments in place (device
memory is host-addressable inside a kernel); ``libdevice`` is implemented by
:mod:`.libdevice`. See docs/user_guide.md, "Triton".
"""
