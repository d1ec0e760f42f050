"""torch.compile(mode="reduce-overhead") on mydev: how a compiled graph is
captured and replayed (Inductor's ``CUDAGraphPolicy`` hook, installed by
device_ext/torch_patches/cudagraphs.py).

Per input signature (shapes, strides, dtypes), the first call runs the
compiled graph without capture (the warm-up, as cudagraph trees do); the
second captures it into a torch.mydev graph and replays it. Every call runs
the graph exactly once.

Where inputs are read. Parameters and buffers are read where they are. The
other inputs (a batch, a token) are copied into the graph's own static
copies before each replay, as cudagraph trees copy them; except that the
first instance recorded for a signature reads the caller's tensors in place
(it keeps a reference to them): a later call that passes the same tensors
copies nothing, and one that passes new tensors while nothing else holds
the recorded ones copies into those, which are then the graph's own. Only
while the caller still holds them (a list of batches already on the device)
does a call take an instance with its own static copies, recording one if
needed. Copying a CNN's input batch before every replay was a tenth of its
max-autotune inference time (1.1x Inductor-CPU's, which replays nothing).

Where outputs live. A graph's outputs are written into its pool, at the same
addresses on every replay:
  * a training forward hands out its outputs in place (and an output that
    aliases a parameter or buffer as that tensor), as cudagraph trees do:
    they are mostly the activations its backward reads, and the backward
    graph, recorded with them as static inputs (Inductor marks them so),
    reads them where they are. Cloning them out and copying them back in
    was two full copies of every activation per step (max-autotune training
    ran at 1.16-1.24x Inductor-CPU's time);
  * an inference graph hands out its outputs in place too, from two
    instances in turn while the caller keeps the last output during the
    next call (``y = model(x)`` in a loop); once a call finds both held
    (predictions collected in a list), it clones them out of the pool from
    then on, so that a caller may keep them across calls (cudagraph trees'
    "overwritten by a subsequent run" rule does not apply here);
  * a backward graph clones its outputs (gradients, which ``.grad`` holds
    across steps unless zeroed to None).
Before a replay overwrites outputs it handed out in place, the graph checks
that nothing holds them any more (the use count of their storages, as
cudagraph trees check liveness); if something does (two forwards before one
backward, an output kept across steps), the call takes another recorded
instance of the graph, records one, or past ``MAX_INSTANCES_IN_USE`` runs
without capture. No output is ever overwritten while alive.

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
    # An integer input is a size under dynamic shapes: the captured kernels
    # were launched with its value.
    return tuple(
        (tuple(x.shape), x.stride(), x.dtype, x.device)
        if isinstance(x, torch.Tensor)
        else int(x)
        if isinstance(x, (int, torch.SymInt))
        else type(x)
        for x in inputs
    )


def _static_copy(x: torch.Tensor) -> torch.Tensor:
    copy = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    copy.copy_(x)
    return copy


# Instances of an inference graph that hand out their outputs in place: two
# serve a loop that keeps the last output while it makes the next one
# (``y = model(x)``), one replay into each in turn; a caller who keeps more
# gets clones.
IN_PLACE_INFERENCE_INSTANCES = 2

# Recorded instances of one graph whose outputs are all still held before
# the next call runs it without capture: each instance keeps a copy of every
# activation in its pool, and a caller holding outputs of every call (a list
# of them kept across steps) would otherwise record without end.
MAX_INSTANCES_IN_USE = 4


def _storage_use_count(storage: torch.UntypedStorage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)


# The storages every recorded graph may hand out in place (its pool memory),
# by address.
_in_place_output_storages: set = set()


def _idle_use_count(tensors: List[torch.Tensor]) -> int:
    """The use count of these tensors' one storage while nothing but them
    holds it (the storage object that reads the count holds it too)."""
    probe = torch.empty(0)
    return _storage_use_count(probe.untyped_storage()) - 1 + len(tensors)


class _Recorded:
    """One captured instance of a compiled graph for one input signature and
    one set of static-input addresses. Capturing records the kernels without
    running them (as on cuda): the first replay is the one execution of the
    call that records it."""

    def __init__(
        self,
        model: Callable,
        inputs: List[Any],
        static_tensor_idxs: List[int],
        pool,
        borrow_inputs: bool,
    ) -> None:
        # What a replay checks and copies, found once: a decode step has a
        # few inputs to copy among dozens of parameters and buffers.
        self.static_idxs = static_tensor_idxs
        static = frozenset(static_tensor_idxs)
        self.copied_idxs = [i for i, x in enumerate(inputs) if i not in static and isinstance(x, torch.Tensor)]
        self.static_data_ptrs = [inputs[i].data_ptr() for i in self.static_idxs]
        # The tensors the captured kernels read for the copied inputs: the
        # caller's own (borrowed: aliases of them, so that their memory stays
        # the graph's to read) or static copies. Static inputs are read where
        # the caller holds them (each call checks their addresses); holding
        # them here too would keep a training forward's outputs, which its
        # backward reads, in use.
        self.inputs = {i: inputs[i].detach() if borrow_inputs else _static_copy(inputs[i]) for i in self.copied_idxs}
        # Per borrowed storage: the inputs read from it and the use count it
        # has while nothing but this graph holds it.
        self.borrowed_storages: List[Tuple[torch.UntypedStorage, int, List[int]]] = []
        if borrow_inputs:
            by_storage: Dict[int, List[int]] = {}
            for i, x in self.inputs.items():
                by_storage.setdefault(x.untyped_storage().data_ptr(), []).append(i)
            for idxs in by_storage.values():
                aliases = [self.inputs[i] for i in idxs]
                self.borrowed_storages.append((aliases[0].untyped_storage(), _idle_use_count(aliases), idxs))
        recording_inputs = [self.inputs.get(i, x) for i, x in enumerate(inputs)]
        side = torch.mydev.Stream()
        side.wait_stream(torch.mydev.current_stream())
        self.graph = torch.mydev.MydevGraph()
        with torch.mydev.graph(self.graph, pool=pool, stream=side):
            outputs = model(recording_inputs)
        torch.mydev.current_stream().wait_stream(side)
        self._plan_outputs(outputs, inputs)

    def _plan_outputs(self, outputs: List[Any], inputs: List[Any]) -> None:
        """How a replay hands out each output in place (``self.hand_out``,
        which keeps the graph's own output tensors, none of the caller's),
        and the storages it hands out so with the use count they have while
        nobody else holds them (``self.in_place_storages``)."""
        static_storages = {inputs[i].untyped_storage().data_ptr(): i for i in self.static_idxs}
        self.outputs = outputs
        self.hand_out: List[Tuple[str, Any]] = []
        in_place = {}
        for o in outputs:
            if not isinstance(o, torch.Tensor):
                self.hand_out.append(("value", o))
            elif o.untyped_storage().data_ptr() in static_storages:
                # An output aliasing a parameter or buffer (a weight saved for
                # the backward) is that tensor, as Inductor's code without
                # capture returns it: a copy would move it, and the backward
                # graph, which reads it as a static input, would record again.
                i = static_storages[o.untyped_storage().data_ptr()]
                same = o.shape == inputs[i].shape and o.stride() == inputs[i].stride()
                same = same and o.storage_offset() == inputs[i].storage_offset()
                self.hand_out.append(
                    ("input", i) if same else ("input view", (i, o.shape, o.stride(), o.storage_offset()))
                )
            else:
                self.hand_out.append(("in place", o))
                in_place.setdefault(o.untyped_storage().data_ptr(), o.untyped_storage())
        self.in_place_storages = [(s, _storage_use_count(s)) for s in in_place.values()]
        _in_place_output_storages.update(in_place)

    def static_inputs_unmoved(self, inputs: List[Any]) -> bool:
        # A static input that moved (a reassigned parameter) needs another
        # graph: the captured kernels read the old address.
        return [inputs[i].data_ptr() for i in self.static_idxs] == self.static_data_ptrs

    def outputs_in_use(self) -> bool:
        """Whether an output a replay handed out in place is still held
        (by the caller, autograd's saved tensors or a view)."""
        return any(_storage_use_count(s) > idle for s, idle in self.in_place_storages)

    def _passes_what_it_reads(self, inputs: List[Any], idxs: List[int]) -> bool:
        return all(inputs[i].data_ptr() == self.inputs[i].data_ptr() for i in idxs)

    def reads_in_place(self, inputs: List[Any]) -> bool:
        """Whether the call passes the very tensors the kernels read: a
        replay copies nothing."""
        return self._passes_what_it_reads(inputs, self.copied_idxs)

    def can_take(self, inputs: List[Any]) -> bool:
        """Whether the call's inputs may be copied where the kernels read
        them: static copies are the graph's own; a borrowed tensor is once
        the caller holds it no more (and needs no copy while it is the one
        passed)."""
        for storage, idle, idxs in self.borrowed_storages:
            if not self._passes_what_it_reads(inputs, idxs) and _storage_use_count(storage) != idle:
                return False
        return True

    def run(self, inputs: List[Any], clone_outputs: bool) -> List[Any]:
        for i in self.copied_idxs:
            static, live = self.inputs[i], inputs[i]
            if live.data_ptr() != static.data_ptr():
                static.copy_(live)
        self.graph.replay()
        if clone_outputs:
            return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.outputs]
        outputs = []
        for how, what in self.hand_out:
            if how == "in place":
                outputs.append(what.detach())
            elif how == "input":
                outputs.append(inputs[what])
            elif how == "input view":
                i, size, stride, offset = what
                outputs.append(inputs[i].as_strided(size, stride, offset))
            else:
                outputs.append(what)
        return outputs


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
        static_idxs = frozenset(static_input_idxs)
        # A training forward's outputs are handed out in place, a backward's
        # cloned, an inference graph's in place until the caller keeps one.
        clone_outputs = bool(kwargs.get("is_backward"))
        is_inference = bool(kwargs.get("is_inference"))
        pool = torch.mydev.graph_pool_handle()
        # Graphs by the signature of the inputs that are copied (parameters
        # and buffers keep theirs: Dynamo guards their metadata) and of the
        # integer ones (Inductor lists a backward's sizes among its static
        # inputs under dynamic shapes), each with the addresses of the static
        # inputs it read. Which inputs those are is read off the first call
        # (example_inputs need not line up with the runtime inputs).
        signature_idxs: List[int] = []
        static_tensor_idxs: List[int] = []
        recorded: Dict[Tuple[Any, ...], List[_Recorded]] = {}
        uncaptured_logged = False

        def run(inputs: List[Any]) -> List[Any]:
            nonlocal uncaptured_logged, clone_outputs
            if not recorded:
                for i, x in enumerate(inputs):
                    static_tensor = i in static_idxs and isinstance(x, torch.Tensor)
                    (static_tensor_idxs if static_tensor else signature_idxs).append(i)
            key = _signature([inputs[i] for i in signature_idxs])
            graphs = recorded.get(key)
            if graphs is None:
                # The first call of a signature runs without capture: lazy
                # initialisation stays out of the graph, and the call runs the
                # graph once, as every call does (a warm-up run followed by
                # the first replay would run it twice: BatchNorm's running
                # statistics updated twice, a backward's donated activations
                # overwritten before the replay read them).
                recorded[key] = []
                return model(inputs)
            candidates = [g for g in graphs if g.static_inputs_unmoved(inputs)]
            free = [g for g in candidates if not g.outputs_in_use()]
            entry = next((g for g in free if g.reads_in_place(inputs)), None)
            if entry is None:
                entry = next((g for g in free if g.can_take(inputs)), None)
            held = len(candidates) - len(free)
            if entry is None and is_inference and not clone_outputs and held >= IN_PLACE_INFERENCE_INSTANCES:
                # The caller keeps outputs for longer than the next call
                # (predictions collected in a list): clone them out from now
                # on; an instance whose outputs are cloned is never held.
                clone_outputs = True
            if entry is None and len(candidates) >= MAX_INSTANCES_IN_USE:
                if not uncaptured_logged:
                    uncaptured_logged = True
                    log.warning(
                        "running a %s graph without capture: the outputs of its %d recorded instances are all "
                        "still held (drop or clone outputs kept across calls)",
                        DEVICE_NAME,
                        len(candidates),
                    )
                return model(inputs)
            if entry is None:
                log.info("recording a %s graph for input signature %s", DEVICE_NAME, key)
                # The first instance of a signature reads the caller's inputs
                # where they are, unless one is another graph's output (its
                # pool memory would stay held by this graph).
                borrow = not graphs and not any(
                    inputs[i].untyped_storage().data_ptr() in _in_place_output_storages
                    for i in signature_idxs
                    if isinstance(inputs[i], torch.Tensor)
                )
                with torch.mydev.device(device_index):
                    entry = _Recorded(model, list(inputs), static_tensor_idxs, pool, borrow)
                graphs.append(entry)
            outputs = entry.run(inputs, clone_outputs)
            inputs.clear()
            return outputs

        return run
