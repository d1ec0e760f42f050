"""Fused custom ops for mydev: ``torch.ops.mydev.*``.

Defined with the high-level ``torch.library.custom_op`` API, each with a
mydev kernel (hand-written C++, vectorized and multi-threaded, enqueued on the
current mydev stream: csrc/custom_ops/), the same kernel for CPU tensors, a
fake kernel (``register_fake``: torch.compile and meta tensors), and autograd
(``register_autograd``) whose backward is itself one fused op:

==============================================================  =====================================
op                                                              backward op
==============================================================  =====================================
``mydev::rms_norm(Tensor x, Tensor weight, float eps) -> Tensor``  ``mydev::rms_norm_backward``
``mydev::swiglu(Tensor gate, Tensor up) -> Tensor``             ``mydev::swiglu_backward``
``mydev::rotary_embedding(Tensor x, Tensor cos, Tensor sin) -> Tensor``  ``mydev::rotary_embedding_backward``
==============================================================  =====================================

Inputs are float32, bfloat16 or float16 (math in float32, outputs in the
activation's dtype), on mydev or the CPU, any strides (non-contiguous inputs
are made contiguous on their device first). Under ``torch.autocast`` the ops
cast nothing: see docs/custom_ops.md. Loaded with ``device_ext`` (so with
``import torch``); call them as ``torch.ops.mydev.rms_norm(x, w, 1e-6)`` or
``device_ext.ops.rms_norm(x, w, 1e-6)``.
"""

from .rms_norm import rms_norm, rms_norm_backward
from .rotary_embedding import rotary_embedding, rotary_embedding_backward
from .swiglu import swiglu, swiglu_backward

__all__ = [
    "rms_norm",
    "rms_norm_backward",
    "rotary_embedding",
    "rotary_embedding_backward",
    "swiglu",
    "swiglu_backward",
]
