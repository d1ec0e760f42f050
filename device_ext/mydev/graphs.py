"""Graphs on mydev, shaped like ``torch.cuda``'s: ``MydevGraph``, the
``graph`` context manager, ``graph_pool_handle`` and ``make_graphed_callables``.

A graph records the work a side stream is given between ``capture_begin`` and
``capture_end`` (the driver's stream capture) and replays it as one
submission. ``MydevGraph`` is ``torch.accelerator.Graph`` with CUDA's
``capture_begin(pool, capture_error_mode)`` signature; both reach the same
C++ implementation (csrc/core/graph_impl.cpp).
"""

from typing import Any, Callable, Optional, Tuple

import torch

from .. import _C
from .streams import Stream, current_stream, synchronize
from .streams import stream as stream_context


def graph_pool_handle() -> Tuple[int, int]:
    """A memory pool id that several graphs can share (``pool=``)."""
    return _C._graph_pool_handle()


class MydevGraph(torch.accelerator.Graph):
    """A mydev graph: ``torch.cuda.CUDAGraph``'s interface."""

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        self.graph_pool = pool
        self.capture_error_mode = capture_error_mode
        super().capture_begin()


class graph:
    """Captures the work of its block into ``mydev_graph`` on a side stream,
    as ``torch.cuda.graph`` does. A refused call inside the block (a
    synchronize, ``.item()``) raises its own error; the capture is ended and
    the stream stays usable."""

    default_capture_stream: Optional[Stream] = None

    def __init__(
        self,
        mydev_graph: MydevGraph,
        pool=None,
        stream: Optional[Stream] = None,
        capture_error_mode: str = "global",
    ):
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = Stream()
            stream = graph.default_capture_stream
        self.mydev_graph = mydev_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.stream_ctx = stream_context(stream)

    def __enter__(self) -> None:
        synchronize()
        torch.mydev.empty_cache()
        self.stream_ctx.__enter__()
        self.mydev_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.mydev_graph.capture_end()
        except RuntimeError:
            # The block's own error says what broke the capture.
            if exc is None:
                raise
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)


def _flatten_tensors(values) -> Tuple[torch.Tensor, ...]:
    return tuple(v for v in torch.utils._pytree.tree_leaves(values) if isinstance(v, torch.Tensor))


def _graph_one(fn: Callable, sample_args: Tuple[torch.Tensor, ...], warmup: int, pool):
    """Captures fn's forward and (if anything requires grad) backward; returns an
    autograd.Function applying them."""
    params = tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ()
    inputs_needing_grad = tuple(a for a in sample_args + params if a.requires_grad)
    side = Stream()
    side.wait_stream(current_stream())
    with stream_context(side):
        for _ in range(warmup):
            outputs = _flatten_tensors(fn(*sample_args))
            grad_outputs = [o for o in outputs if o.requires_grad]
            if grad_outputs and inputs_needing_grad:
                torch.autograd.grad(
                    grad_outputs,
                    inputs_needing_grad,
                    [torch.empty_like(o) for o in grad_outputs],
                    allow_unused=True,
                )
    current_stream().wait_stream(side)
    del outputs
    forward_graph = MydevGraph()
    with graph(forward_graph, pool=pool):
        static_outputs = _flatten_tensors(fn(*sample_args))
    static_grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs)
    backward_graph = None
    static_grad_inputs: Tuple[Optional[torch.Tensor], ...] = ()
    differentiable = [o for o in static_outputs if o.requires_grad]
    if differentiable and inputs_needing_grad:
        backward_graph = MydevGraph()
        with graph(backward_graph, pool=forward_graph.pool()):
            static_grad_inputs = torch.autograd.grad(
                differentiable,
                inputs_needing_grad,
                [g for g in static_grad_outputs if g is not None],
                allow_unused=True,
            )
    needs_grad_index = {id(t): i for i, t in enumerate(inputs_needing_grad)}

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, live in zip(sample_args, inputs[: len(sample_args)]):
                if static.data_ptr() != live.data_ptr():
                    static.copy_(live)
            forward_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            assert backward_graph is not None, "no input of the graphed callable requires grad"
            for static, grad in zip(static_grad_outputs, grads):
                if static is not None and grad is not None:
                    static.copy_(grad)
            backward_graph.replay()
            result = []
            for arg in sample_args + params:
                i = needs_grad_index.get(id(arg))
                grad = static_grad_inputs[i] if i is not None else None
                result.append(grad.detach() if grad is not None else None)
            return tuple(result)

    def functionalized(*user_args):
        outputs = Graphed.apply(*(tuple(user_args) + params))
        return outputs[0] if len(outputs) == 1 else outputs

    return functionalized


def make_graphed_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool=None,
) -> Any:
    """Graphed versions of ``callables`` (modules or functions), forward and
    backward, as ``torch.cuda.make_graphed_callables``. Inputs are copied into
    the graphs' static inputs at each call; outputs are the graphs' static
    outputs (cloned by nothing: keep or copy them before the next call)."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    shared_pool = graph_pool_handle() if pool is None else pool
    graphed = []
    for fn, args in zip(callables, sample_args):
        if isinstance(fn, torch.nn.Module):
            module_forward = fn.forward
            fn.forward = _graph_one(fn, tuple(args), num_warmup_iters, shared_pool)
            fn._mydev_eager_forward = module_forward
            graphed.append(fn)
        else:
            graphed.append(_graph_one(fn, tuple(args), num_warmup_iters, shared_pool))
    return graphed[0] if single else tuple(graphed)
