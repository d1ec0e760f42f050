"""torch.compile(mode="reduce-overhead") on mydev: how a compiled graph is
captured and replayed (Inductor's ``CUDAGraphPolicy`` hook, installed by
device_ext/torch_patches/cudagraphs.py).

Per input signature (shapes, strides, dtypes), the first call runs the
compiled graph once on a side stream (warm-up) and captures it into a
torch.mydev graph with its own static copies of the inputs that are not
static (parameters and buffers are used in place); later calls copy the
inputs into those copies and replay. A new signature records a new graph.
Outputs are cloned out of the graph's pool, so they are not overwritten by
the next replay (cudagraph trees' "overwritten by a subsequent run" rule
does not apply here). Graphs of other devices go to torch's default.

A graph that mutates an input other than a parameter or buffer runs without
capture (a replay would mutate the static copy), with torch's "skipping
cudagraphs due to mutated inputs" warning, as cudagraph trees do. A mydev
graph Inductor itself will not capture (a CPU node, ...) gets torch's usual
"skipping cudagraphs due to ..." warning from ``should_wrap``: torch 2.13
writes it only for graphs with a cuda device.
"""

import logging
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch
from torch._inductor import config as inductor_config
from torch._inductor.cudagraph_utils import (
    CUDAGraphPolicy,
    cudagraphs_log,
    format_default_skip_message,
    get_mutation_stack_trace,
    log_cudagraph_skip_and_bump_counter,
)

from device_ext.device_name import DEVICE_NAME

log = logging.getLogger(__name__)


def _signature(inputs: Sequence[Any]) -> Tuple[Any, ...]:
    return tuple(
        (tuple(x.shape), x.stride(), x.dtype, x.device) if isinstance(x, torch.Tensor) else type(x) for x in inputs
    )


def _static_copy(x: Any) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    copy = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    copy.copy_(x)
    return copy


class _Recorded:
    def __init__(self, model: Callable, inputs: List[Any], static_idxs: frozenset, pool):
        self.inputs = [x if i in static_idxs else _static_copy(x) for i, x in enumerate(inputs)]
        # What a replay checks and copies, found once: a decode step has a
        # few inputs to copy among dozens of parameters and buffers.
        self.copied_idxs = [i for i, x in enumerate(inputs) if i not in static_idxs and isinstance(x, torch.Tensor)]
        self.static_idxs = sorted(static_idxs)
        self.static_data_ptrs = [inputs[i].data_ptr() for i in self.static_idxs]
        side = torch.mydev.Stream()
        side.wait_stream(torch.mydev.current_stream())
        with torch.mydev.stream(side):
            model(list(self.inputs))  # warm-up: lazy initialisation stays out of the graph
        torch.mydev.current_stream().wait_stream(side)
        self.graph = torch.mydev.MydevGraph()
        with torch.mydev.graph(self.graph, pool=pool, stream=side):
            self.outputs = model(list(self.inputs))

    def static_inputs_unmoved(self, inputs: List[Any]) -> bool:
        # A static input that moved (a reassigned parameter) needs another
        # graph: the captured kernels read the old address.
        return [inputs[i].data_ptr() for i in self.static_idxs] == self.static_data_ptrs

    def run(self, inputs: List[Any]) -> List[Any]:
        for i in self.copied_idxs:
            static, live = self.inputs[i], inputs[i]
            if live.data_ptr() != static.data_ptr():
                static.copy_(live)
        self.graph.replay()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.outputs]


def _skip_message(reason: str) -> str:
    return reason if reason.startswith("skipping cudagraphs") else format_default_skip_message(reason)


class MydevGraphPolicy(CUDAGraphPolicy):
    """Captures mydev graphs with torch.mydev graphs; others go to torch."""

    def should_wrap(self, compiled_graph: Any) -> bool:
        # Called for every compiled graph before Inductor decides whether to
        # capture it; the decision stays torch's (this returns torch's default).
        if inductor_config.triton.cudagraphs and DEVICE_NAME in compiled_graph.device_types:
            info = compiled_graph.cudagraph_info
            if compiled_graph.disabled_cudagraphs_reason:
                # Inductor counted this skip in cudagraph_skips already.
                cudagraphs_log.warning(_skip_message(compiled_graph.disabled_cudagraphs_reason))
            elif info is not None and info.cudagraph_fail_reasons:
                # Neither counted nor written by Inductor off cuda.
                log_cudagraph_skip_and_bump_counter(format_default_skip_message(str(info.cudagraph_fail_reasons)))
        return True

    def cudagraphify(self, model, example_inputs, static_input_idxs, *, device_index, **kwargs):
        devices = {x.device.type for x in example_inputs if isinstance(x, torch.Tensor)}
        if devices != {DEVICE_NAME}:
            return super().cudagraphify(model, example_inputs, static_input_idxs, device_index=device_index, **kwargs)
        # A replay would mutate the static copy, not the caller's tensor:
        # such a graph runs without capture, as cudagraph trees run it.
        mutated = [i for i in kwargs.get("mutated_input_idxs", ()) if i not in set(static_input_idxs)]
        if mutated:
            log_cudagraph_skip_and_bump_counter(get_mutation_stack_trace(kwargs["placeholders"], mutated))
            return model
        # Inductor marks a backward's saved activations static because
        # cudagraph trees keep forward outputs in the graph's pool; this
        # policy clones outputs out of it, so a backward copies every input.
        static_idxs = frozenset() if kwargs.get("is_backward") else frozenset(static_input_idxs)
        pool = torch.mydev.graph_pool_handle()
        # Graphs by the signature of the inputs that are copied (parameters
        # and buffers keep theirs: Dynamo guards their metadata), each with
        # the addresses of the static inputs it read.
        copied_idxs = [i for i in range(len(example_inputs)) if i not in static_idxs]
        recorded: Dict[Tuple[Any, ...], List[_Recorded]] = {}

        def run(inputs: List[Any]) -> List[Any]:
            key = _signature([inputs[i] for i in copied_idxs])
            graphs = recorded.setdefault(key, [])
            entry = next((g for g in graphs if g.static_inputs_unmoved(inputs)), None)
            if entry is None:
                log.info("recording a %s graph for input signature %s", DEVICE_NAME, key)
                with torch.mydev.device(device_index):
                    entry = _Recorded(model, list(inputs), static_idxs, pool)
                graphs.append(entry)
            outputs = entry.run(inputs)
            inputs.clear()
            return outputs

        return run
