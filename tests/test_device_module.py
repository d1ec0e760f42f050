"""torch.mydev, the generated helpers, torch.accelerator, generators and
serialization, checked against CPU or against documented values."""

import io
import json
import struct
from typing import Any, Callable, Dict, Iterator, List, Union

import pytest
import torch

from mydev_testing import (
    COMMON_DTYPES,
    assert_device_still_usable,
    hold_stream,
    release_from_another_thread,
    run_python,
)

MiB = 1 << 20
# Default-seed of every fresh generator (c10::default_rng_seed_val), as on cuda.
DEFAULT_SEED = 67280421310721


def state_bytes(seed: int, offset: int) -> List[int]:
    """The documented 16-byte generator state: seed u64, offset i64, little-endian."""
    return list(struct.pack("<Qq", seed, offset))


@pytest.fixture(autouse=True)
def restore_device_and_rng() -> Iterator[None]:
    """Tests here change the current device and the generators; put them back."""
    device = torch.mydev.current_device()
    states = torch.mydev.get_rng_state_all()
    cpu_state = torch.get_rng_state()
    yield
    torch.mydev.set_device(device)
    torch.mydev.set_rng_state_all(states)
    torch.set_rng_state(cpu_state)


# --- the torch.mydev module -----------------------------------------------------


def test_default_configuration_has_two_available_devices() -> None:
    # MYDEV_DEVICE_COUNT empty means "use the default", whatever the outer env says.
    result = run_python(
        """
        import json, torch
        print(json.dumps({"available": torch.mydev.is_available(),
                          "count": torch.mydev.device_count()}))
        """,
        env={"MYDEV_DEVICE_COUNT": ""},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"available": True, "count": 2}


def test_device_count_agrees_with_torch_generic_apis() -> None:
    assert torch.mydev.is_available()
    assert torch.mydev.device_count() == 2
    assert torch.accelerator.device_count() == torch.mydev.device_count()
    assert torch._C._get_privateuse1_backend_name() == "mydev"


def test_is_initialized_only_after_first_real_use() -> None:
    result = run_python(
        """
        import json, torch
        states = [torch.mydev.is_initialized()]
        torch.mydev.device_count(); torch.mydev.is_available()
        states.append(torch.mydev.is_initialized())
        torch.zeros(1, device="mydev")
        states.append(torch.mydev.is_initialized())
        print(json.dumps(states))
        """
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [False, False, True]


@pytest.mark.parametrize("spelling", [1, "mydev:1", torch.device("mydev", 1)])
def test_set_device_changes_where_mydev_tensors_go(spelling: Union[int, str, torch.device]) -> None:
    assert torch.mydev.current_device() == 0
    torch.mydev.set_device(spelling)
    assert torch.mydev.current_device() == 1
    assert torch.empty(2, device="mydev").device == torch.device("mydev", 1)
    assert torch.ones(2).mydev().device == torch.device("mydev", 1)
    torch.mydev.set_device(0)
    assert torch.empty(2, device="mydev").device == torch.device("mydev", 0)


def test_device_context_manager_restores_previous_device() -> None:
    with torch.mydev.device(1):
        assert torch.mydev.current_device() == 1
        assert torch.zeros(1, device="mydev").device == torch.device("mydev", 1)
        with torch.mydev.device(0):
            assert torch.mydev.current_device() == 0
        assert torch.mydev.current_device() == 1
    assert torch.mydev.current_device() == 0


def test_device_context_manager_restores_on_exception() -> None:
    with pytest.raises(KeyError):
        with torch.mydev.device("mydev:1"):
            raise KeyError("inside")
    assert torch.mydev.current_device() == 0


def test_device_of_follows_the_tensor() -> None:
    on_one = torch.ones(1, device="mydev:1")
    with torch.mydev.device_of(on_one):
        assert torch.mydev.current_device() == 1
    assert torch.mydev.current_device() == 0
    with torch.mydev.device_of(torch.ones(1)):  # a CPU tensor: no change
        assert torch.mydev.current_device() == 0


@pytest.mark.parametrize("index", [0, 1])
def test_device_properties(index: int) -> None:
    props = torch.mydev.get_device_properties(index)
    assert isinstance(props.name, str) and props.name
    assert props.name == torch.mydev.get_device_name(index)
    assert props.total_memory > 0
    assert props.total_memory == torch.mydev.mem_get_info(index)[1]
    assert props.multi_processor_count >= 1
    assert (props.major, props.minor) == torch.mydev.get_device_capability(index) == (1, 0)
    # Triton targets and Inductor's Triton heuristics plan programs in warps.
    assert props.warp_size == 32
    assert props.name in repr(props)
    # Same answers for every way of naming the device.
    assert torch.mydev.get_device_name(f"mydev:{index}") == props.name
    assert torch.mydev.get_device_properties(torch.device("mydev", index)).total_memory == props.total_memory


def test_device_properties_default_to_current_device() -> None:
    with torch.mydev.device(1):
        assert torch.mydev.get_device_name() == torch.mydev.get_device_name(1)
        assert torch.mydev.get_device_capability() == torch.mydev.get_device_capability(1)


def test_amp_and_bf16_support() -> None:
    assert torch.mydev.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.mydev.is_bf16_supported() is True


# --- bad device indices -----------------------------------------------------------


BAD_INDEX_CALLS = [
    pytest.param(lambda: torch.empty(3, device="mydev:7"), 7, id="empty-on-mydev:7"),
    pytest.param(lambda: torch.mydev.set_device(9), 9, id="set_device(9)"),
    pytest.param(lambda: torch.mydev.get_device_properties(5), 5, id="get_device_properties(5)"),
    pytest.param(lambda: torch.mydev.get_device_name(4), 4, id="get_device_name(4)"),
    pytest.param(lambda: torch.ones(2).to("mydev:3"), 3, id="cpu-to-mydev:3"),
    pytest.param(lambda: torch.ones(2, device="mydev").to("mydev:2"), 2, id="mydev-to-mydev:2"),
    pytest.param(lambda: torch.ones(2).mydev(6), 6, id="Tensor.mydev(6)"),
    pytest.param(lambda: torch.empty(1, device=torch.device("mydev", 64)), 64, id="empty-on-mydev:64"),
    pytest.param(lambda: torch.mydev.device(4).__enter__(), 4, id="device(4)-context"),
    pytest.param(lambda: torch.mydev.synchronize(8), 8, id="synchronize(8)"),
    pytest.param(lambda: torch.mydev.memory_allocated(6), 6, id="memory_allocated(6)"),
    pytest.param(lambda: torch.Generator("mydev:5"), 5, id="Generator-mydev:5"),
    pytest.param(lambda: torch.accelerator.set_device_index(5), 5, id="accelerator.set_device_index(5)"),
]


@pytest.mark.parametrize("call,index", BAD_INDEX_CALLS)
def test_bad_device_index_names_the_index(call: Callable[[], Any], index: int) -> None:
    with pytest.raises(RuntimeError) as info:
        call()
    message = str(info.value)
    assert f"Invalid device index mydev:{index}" in message
    assert "there are 2 mydev devices (set MYDEV_DEVICE_COUNT" in message
    assert_device_still_usable()


NEGATIVE_INDEX_DEVICES = [
    pytest.param(lambda: torch.device("mydev:-1"), "Invalid device string: 'mydev:-1'", id="string"),
    pytest.param(lambda: torch.device("mydev", -1), "Device index must not be negative", id="type-and-index"),
]


@pytest.mark.parametrize("make,expected", NEGATIVE_INDEX_DEVICES)
def test_negative_device_index_is_rejected(make: Callable[[], torch.device], expected: str) -> None:
    with pytest.raises(RuntimeError) as info:
        make()
    assert expected in str(info.value)
    assert_device_still_usable()


NEGATIVE_INDEX_CALLS = [
    pytest.param(lambda: torch.mydev.set_device(-1), id="set_device"),
    pytest.param(lambda: torch.mydev.device(-1), id="device-context"),
    pytest.param(lambda: torch.mydev.synchronize(-1), id="synchronize"),
    pytest.param(lambda: torch.mydev.current_stream(-1), id="current_stream"),
    pytest.param(lambda: torch.mydev.default_stream(-1), id="default_stream"),
    pytest.param(lambda: torch.mydev.Stream(-1), id="Stream"),
    pytest.param(lambda: torch.mydev.get_device_properties(-1), id="get_device_properties"),
    pytest.param(lambda: torch.mydev.get_device_name(-1), id="get_device_name"),
    pytest.param(lambda: torch.mydev.get_device_capability(-1), id="get_device_capability"),
    pytest.param(lambda: torch.mydev.memory_allocated(-1), id="memory_allocated"),
    pytest.param(lambda: torch.mydev.memory_stats(-1), id="memory_stats"),
    pytest.param(lambda: torch.mydev.mem_get_info(-1), id="mem_get_info"),
    pytest.param(lambda: torch.mydev.reset_peak_memory_stats(-1), id="reset_peak_memory_stats"),
    pytest.param(lambda: torch.mydev.get_rng_state(-1), id="get_rng_state"),
]


@pytest.mark.parametrize("call", NEGATIVE_INDEX_CALLS)
def test_negative_index_is_the_same_error_everywhere(call: Callable[[], Any]) -> None:
    # None means the current device; a negative index is out of range, with
    # the message an index past the last device gets.
    with pytest.raises(RuntimeError) as info:
        call()
    assert "Invalid device index mydev:-1: there are 2 mydev devices (set MYDEV_DEVICE_COUNT" in str(info.value)
    assert_device_still_usable()


def test_default_generators_index_out_of_range() -> None:
    with pytest.raises(IndexError, match=r"mydev device index 3 out of range \(device count 2\)"):
        torch.mydev.default_generators[3]
    assert_device_still_usable()


def test_non_mydev_device_is_rejected_by_set_device() -> None:
    with pytest.raises(ValueError, match="Expected a mydev device, but got: cpu"):
        torch.mydev.set_device("cpu")
    assert_device_still_usable()


# --- generated methods, types, printing ---------------------------------------------


def test_tensor_mydev_methods() -> None:
    cpu = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    on_zero, on_one = cpu.mydev(), cpu.mydev(1)
    assert on_zero.device == torch.device("mydev", 0)
    assert on_one.device == torch.device("mydev", 1)
    assert torch.equal(on_zero.cpu(), cpu) and torch.equal(on_one.cpu(), cpu)
    assert on_zero.is_mydev and on_one.is_mydev and not cpu.is_mydev
    assert on_zero.mydev() is on_zero  # already there: no copy, as .cuda() does
    moved = on_zero.mydev(1)
    assert moved.device == torch.device("mydev", 1) and torch.equal(moved.cpu(), cpu)


@pytest.mark.parametrize("target", ["mydev:1", torch.device("mydev", 1)])
def test_tensor_to_second_device(target: Union[str, torch.device]) -> None:
    cpu = torch.linspace(-1, 1, 7, dtype=torch.float64)
    moved = cpu.to(target)
    assert moved.device == torch.device("mydev", 1) and moved.dtype == torch.float64
    assert torch.equal(moved.cpu(), cpu)
    converted = cpu.to(target, dtype=torch.float32)
    assert torch.equal(converted.cpu(), cpu.float())


@pytest.mark.parametrize("device", [None, 1])
def test_module_mydev_moves_parameters(device: Any) -> None:
    torch.manual_seed(0)
    reference = torch.nn.Linear(5, 3)
    model = torch.nn.Linear(5, 3)
    model.load_state_dict(reference.state_dict())
    assert model.mydev(device) is model
    expected_device = torch.device("mydev", 0 if device is None else device)
    assert [p.device for p in model.parameters()] == [expected_device] * 2
    inputs = torch.randn(4, 5)
    torch.testing.assert_close(model(inputs.to(expected_device)).cpu(), reference(inputs))


def test_untyped_storage_mydev() -> None:
    cpu_storage = torch.arange(5, dtype=torch.int16).untyped_storage()
    assert not cpu_storage.is_mydev
    for index in (None, 1):
        on_device = cpu_storage.mydev(index)
        assert on_device.is_mydev
        assert on_device.device == torch.device("mydev", 0 if index is None else index)
        assert on_device.nbytes() == cpu_storage.nbytes()
        assert on_device.cpu().tolist() == cpu_storage.tolist()
    tensor_storage = torch.ones(3, device="mydev:1").untyped_storage()
    assert tensor_storage.is_mydev and tensor_storage.device == torch.device("mydev", 1)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_typed_storage_mydev() -> None:
    cpu_storage = torch.tensor([1.5, -2.0]).storage()
    on_device = cpu_storage.mydev()
    assert on_device.is_mydev and not cpu_storage.is_mydev
    assert on_device.device == torch.device("mydev", 0)
    assert on_device.cpu().tolist() == [1.5, -2.0]


# The shared list and complex128, which type names and printing cover too.
DTYPES = [*COMMON_DTYPES, torch.complex128]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tensor_type_names(dtype: torch.dtype) -> None:
    cpu = torch.zeros(2, dtype=dtype)
    expected = cpu.type().replace("torch.", "torch.mydev.", 1)  # torch.FloatTensor -> torch.mydev.FloatTensor
    assert cpu.to("mydev").type() == expected
    assert cpu.to("mydev:1").type() == expected


def test_tensor_type_conversion_by_name() -> None:
    cpu = torch.arange(3)
    converted = cpu.type("torch.mydev.DoubleTensor")
    assert converted.device == torch.device("mydev", 0) and converted.dtype == torch.float64
    assert torch.equal(converted.cpu(), cpu.double())
    back = converted.type("torch.LongTensor")
    assert back.device == torch.device("cpu") and torch.equal(back, cpu)


def test_device_object_repr() -> None:
    assert repr(torch.device("mydev:1")) == "device(type='mydev', index=1)"
    assert str(torch.device("mydev", 1)) == "mydev:1"
    assert torch.device("mydev").index is None
    assert torch.device("mydev:0") == torch.ones(1, device="mydev").device


def assert_repr_matches_cpu(cpu: torch.Tensor, device: str) -> None:
    """A mydev tensor prints as the same tensor on CPU, plus its device. Only
    line wrapping may differ (the device suffix makes the last line longer)."""
    on_device = cpu.detach().to(device).requires_grad_(cpu.requires_grad)
    text = repr(on_device)
    assert f"device='{device}'" in text
    squeezed = "".join(text.split())
    assert squeezed.replace(f",device='{device}'", "", 1) == "".join(repr(cpu).split())
    assert str(on_device) == text


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_print_each_common_dtype(dtype: torch.dtype) -> None:
    cpu = torch.tensor([[0.0, 1.5, 2.25], [3.0, 100.0, 7.0]]).to(dtype)
    assert_repr_matches_cpu(cpu, "mydev:0")


PRINT_CASES = {
    "floats": torch.tensor([-1.25, 0.0, 3.5, 1e-4]),
    "0-dim": torch.tensor(3.5),
    "0-dim int": torch.tensor(-7),
    "empty": torch.empty(0),
    "empty 2-d": torch.empty(0, 3),
    "non-finite": torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]),
    "summarized": torch.arange(3000, dtype=torch.float32).reshape(30, 100),
    "large values": torch.tensor([1e10, -2.5e-8, 123.0]),
    "requires grad": torch.tensor([1.0, 2.0], requires_grad=True),
    "non-contiguous": torch.arange(12.0).reshape(3, 4).t(),
}


@pytest.mark.parametrize("cpu", list(PRINT_CASES.values()), ids=list(PRINT_CASES))
@pytest.mark.parametrize("device", ["mydev:0", "mydev:1"])
def test_print_tensor(cpu: torch.Tensor, device: str) -> None:
    assert_repr_matches_cpu(cpu, device)


def test_print_contains_values_and_device() -> None:
    text = repr(torch.tensor([1.0, 2.5, -3.0], device="mydev"))
    assert text == "tensor([ 1.0000,  2.5000, -3.0000], device='mydev:0')"


# --- torch.accelerator -------------------------------------------------------------------


def test_accelerator_is_mydev() -> None:
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("mydev")
    assert torch.accelerator.device_count() == 2


def test_accelerator_device_index() -> None:
    assert torch.accelerator.current_device_index() == torch.mydev.current_device() == 0
    torch.accelerator.set_device_index(1)
    assert torch.mydev.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    assert torch.empty(1, device="mydev").device == torch.device("mydev", 1)
    torch.accelerator.set_device_index(0)
    with torch.accelerator.device_index(1):
        assert torch.mydev.current_device() == 1
    assert torch.mydev.current_device() == 0


@pytest.mark.parametrize("index", [0, 1])
def test_accelerator_synchronize_waits_for_queued_work(index: int) -> None:
    with torch.mydev.device(index):
        latch = hold_stream()
        y = torch.arange(4.0, device="mydev") * 2
    stream = torch.mydev.current_stream(index)
    assert not stream.query()  # the host returned before the kernel ran
    release_from_another_thread(latch)
    torch.accelerator.synchronize(index)
    assert stream.query()
    assert torch.equal(y.cpu(), torch.arange(4.0) * 2)


def test_accelerator_current_stream() -> None:
    default = torch.accelerator.current_stream()
    assert isinstance(default, torch.Stream)
    assert default.device == torch.device("mydev", 0)
    assert default.stream_id == torch.mydev.current_stream().stream_id == torch.mydev.default_stream().stream_id
    side = torch.mydev.Stream(1)
    with torch.mydev.stream(side):
        current = torch.accelerator.current_stream(1)
        assert (current.device_index, current.stream_id) == (1, side.stream_id)
    assert torch.accelerator.current_stream(1).stream_id == torch.mydev.default_stream(1).stream_id


@pytest.mark.parametrize("index", [0, 1])
def test_accelerator_memory_matches_torch_mydev(index: int) -> None:
    before = torch.accelerator.memory_allocated(index)
    assert before == torch.mydev.memory_allocated(index)
    block = torch.empty(MiB, dtype=torch.uint8, device=f"mydev:{index}")
    grown = torch.accelerator.memory_allocated(index) - before
    assert grown >= MiB
    assert grown == torch.mydev.memory_allocated(index) - before
    accelerator_stats, mydev_stats = torch.accelerator.memory_stats(index), torch.mydev.memory_stats(index)
    assert {k: accelerator_stats[k] for k in mydev_stats} == mydev_stats
    assert torch.accelerator.max_memory_allocated(index) >= before + MiB
    assert torch.accelerator.memory_reserved(index) == torch.mydev.memory_reserved(index)
    assert torch.accelerator.get_memory_info(index) == torch.mydev.mem_get_info(index)
    del block
    assert torch.accelerator.memory_allocated(index) == before


def test_memory_stats_has_the_same_keys_as_torch_accelerator() -> None:
    # Both document torch.cuda.memory_stats' keys (inactive_split, oversize_*, max_split_size, ...).
    missing = sorted(set(torch.accelerator.memory_stats(0)) - set(torch.mydev.memory_stats(0)))
    assert missing == [], f"torch.mydev.memory_stats lacks {missing}"


def test_accelerator_empty_cache_releases_cached_blocks() -> None:
    torch.mydev.empty_cache()
    baseline = torch.accelerator.memory_reserved(1)
    block = torch.empty(64 * MiB, dtype=torch.uint8, device="mydev:1")
    del block
    assert torch.accelerator.memory_reserved(1) >= baseline + 64 * MiB  # cached, not freed
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved(1) == baseline


def test_accelerator_device_capability() -> None:
    capability = torch.accelerator.get_device_capability("mydev:1")
    supported = capability["supported_dtypes"]
    for dtype in [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.bool,
        torch.complex64,
    ]:
        assert dtype in supported
    assert torch.accelerator.get_device_capability() == capability


# --- generators and RNG state ------------------------------------------------------------


@pytest.mark.parametrize("spelling,index", [("mydev", 0), ("mydev:1", 1), (torch.device("mydev", 1), 1)])
def test_generator_on_mydev(spelling: Union[str, torch.device], index: int) -> None:
    generator = torch.Generator(spelling)
    assert generator.device == torch.device("mydev", index)
    assert generator.initial_seed() == DEFAULT_SEED
    generator.manual_seed(42)
    assert generator.initial_seed() == 42
    assert generator.get_state().tolist() == state_bytes(42, 0)
    clone = torch.Generator(spelling).set_state(generator.get_state())
    assert clone.initial_seed() == 42


@pytest.mark.parametrize("seed", [0, 1234, 2**32 + 7, 2**64 - 1])
def test_manual_seed_and_state_layout(seed: int) -> None:
    torch.mydev.manual_seed(seed)
    assert torch.mydev.initial_seed() == seed
    state = torch.mydev.get_rng_state()
    assert state.dtype == torch.uint8 and state.device == torch.device("cpu")
    assert state.shape == (16,)
    assert state.tolist() == state_bytes(seed, 0)
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == seed


def test_state_offset_is_second_eight_bytes() -> None:
    torch.mydev.manual_seed(99)
    torch.mydev.default_generators[0].set_offset(40)
    assert torch.mydev.get_rng_state(0).tolist() == state_bytes(99, 40)


def test_manual_seed_seeds_only_current_device() -> None:
    torch.mydev.manual_seed_all(5)
    with torch.mydev.device(1):
        torch.mydev.manual_seed(6)
    assert torch.mydev.get_rng_state(0).tolist() == state_bytes(5, 0)
    assert torch.mydev.get_rng_state(1).tolist() == state_bytes(6, 0)


def test_manual_seed_all() -> None:
    torch.mydev.manual_seed_all(2024)
    assert [s.tolist() for s in torch.mydev.get_rng_state_all()] == [state_bytes(2024, 0)] * 2


def test_default_generators_are_independent_per_device() -> None:
    torch.mydev.manual_seed_all(1)
    torch.mydev.default_generators[0].manual_seed(777)
    assert torch.mydev.default_generators[0].initial_seed() == 777
    assert torch.mydev.default_generators[1].initial_seed() == 1
    assert torch.mydev.get_rng_state(1).tolist() == state_bytes(1, 0)
    assert torch.mydev.default_generators[-1].device == torch.device("mydev", 1)
    assert len(torch.mydev.default_generators) == 2
    assert [g.device.index for g in torch.mydev.default_generators] == [0, 1]


def test_seed_draws_a_fresh_seed() -> None:
    torch.mydev.manual_seed_all(3)
    torch.mydev.seed()
    drawn = torch.mydev.initial_seed()
    assert torch.mydev.get_rng_state(0).tolist() == state_bytes(drawn, 0)
    assert torch.mydev.get_rng_state(1).tolist() == state_bytes(3, 0)  # only the current device
    torch.mydev.seed()
    assert torch.mydev.initial_seed() != drawn  # 64 random bits: a repeat means no randomness


def test_seed_all_gives_every_device_the_same_fresh_seed() -> None:
    torch.mydev.manual_seed_all(3)
    torch.mydev.seed_all()
    seeds = [g.initial_seed() for g in torch.mydev.default_generators]
    assert seeds[0] == seeds[1] != 3


def test_torch_manual_seed_seeds_mydev() -> None:
    torch.manual_seed(31337)
    assert [s.tolist() for s in torch.mydev.get_rng_state_all()] == [state_bytes(31337, 0)] * 2
    assert torch.initial_seed() == 31337


@pytest.mark.parametrize("device", [0, 1])
def test_set_rng_state_round_trips(device: int) -> None:
    wanted = torch.tensor(state_bytes(0x0123456789ABCDEF, 1024), dtype=torch.uint8)
    torch.mydev.set_rng_state(wanted, device)
    assert torch.equal(torch.mydev.get_rng_state(device), wanted)
    assert torch.mydev.default_generators[device].initial_seed() == 0x0123456789ABCDEF
    assert torch.mydev.default_generators[device].get_offset() == 1024
    other = 1 - device
    assert torch.mydev.get_rng_state(other).tolist() != wanted.tolist()


@pytest.mark.parametrize("size", [0, 8, 15, 17, 32])
def test_set_rng_state_rejects_wrong_size(size: int) -> None:
    torch.mydev.manual_seed(11)
    with pytest.raises(RuntimeError, match=f"mydev RNG state must be 16 bytes .*got {size}"):
        torch.mydev.set_rng_state(torch.zeros(size, dtype=torch.uint8))
    assert torch.mydev.get_rng_state().tolist() == state_bytes(11, 0)  # unchanged
    assert_device_still_usable()


@pytest.mark.parametrize("offset", [3, -4])
def test_set_rng_state_rejects_invalid_offset(offset: int) -> None:
    torch.mydev.manual_seed(11)
    with pytest.raises(RuntimeError, match=f"invalid offset {offset}"):
        torch.mydev.set_rng_state(torch.tensor(state_bytes(1, offset), dtype=torch.uint8))
    assert torch.mydev.get_rng_state().tolist() == state_bytes(11, 0)
    assert_device_still_usable()


@pytest.mark.filterwarnings("ignore:.*fork_rng without explicitly specifying")
@pytest.mark.parametrize("devices", [None, [0, 1]])
def test_fork_rng_restores_mydev_state(devices: Any) -> None:
    torch.mydev.manual_seed_all(8)
    torch.mydev.default_generators[1].set_offset(16)
    before = [s.tolist() for s in torch.mydev.get_rng_state_all()]
    kwargs = {} if devices is None else {"devices": devices}
    with torch.random.fork_rng(device_type="mydev", **kwargs):
        torch.mydev.manual_seed_all(9)
        assert torch.mydev.initial_seed() == 9
    assert [s.tolist() for s in torch.mydev.get_rng_state_all()] == before


# --- serialization ---------------------------------------------------------------------------


def saved(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def load(data: bytes, **kwargs: Any) -> Any:
    return torch.load(io.BytesIO(data), **kwargs)


def saved_tensors() -> Dict[str, torch.Tensor]:
    """a on mydev:0; base on mydev:1 with a view of its second row."""
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("mydev:1")
    return {"a": torch.tensor([1.5, -2.5], device="mydev:0"), "base": base, "view": base[1]}


MAP_LOCATIONS = [
    # (map_location, expected device of "a", expected device of "base"/"view")
    pytest.param(None, "mydev:0", "mydev:1", id="none-keeps-devices"),
    pytest.param("cpu", "cpu", "cpu", id="cpu"),
    pytest.param("mydev", "mydev:0", "mydev:0", id="mydev"),
    pytest.param("mydev:1", "mydev:1", "mydev:1", id="mydev:1"),
    pytest.param(torch.device("mydev", 1), "mydev:1", "mydev:1", id="torch.device"),
    pytest.param(torch.device("cpu"), "cpu", "cpu", id="torch.device-cpu"),
    pytest.param({"mydev:1": "mydev:0"}, "mydev:0", "mydev:0", id="dict-1-to-0"),
    pytest.param({"mydev:0": "mydev:1", "mydev:1": "cpu"}, "mydev:1", "cpu", id="dict-swap"),
]


@pytest.mark.parametrize("map_location,device_a,device_base", MAP_LOCATIONS)
def test_load_with_map_location(map_location: Any, device_a: str, device_base: str) -> None:
    original = saved_tensors()
    loaded = load(saved(original), map_location=map_location)
    assert loaded["a"].device == torch.device(device_a)
    assert loaded["base"].device == loaded["view"].device == torch.device(device_base)
    for key in original:
        assert torch.equal(loaded[key].cpu(), original[key].cpu())


@pytest.mark.parametrize("map_location", [None, "cpu", "mydev:0", "mydev:1"])
def test_load_keeps_views_sharing_storage(map_location: Any) -> None:
    loaded = load(saved(saved_tensors()), map_location=map_location)
    base, view = loaded["base"], loaded["view"]
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert view.storage_offset() == 4
    base.add_(100)
    assert torch.equal(view.cpu(), torch.arange(4, 8, dtype=torch.float32) + 100)


@pytest.mark.parametrize("map_location,device", [(None, "mydev:1"), ("cpu", "cpu"), ("mydev:0", "mydev:0")])
def test_state_dict_round_trip(map_location: Any, device: str) -> None:
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    on_device = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    on_device.load_state_dict(reference.state_dict())
    on_device.mydev(1)
    state = load(saved(on_device.state_dict()), map_location=map_location)
    assert {t.device for t in state.values()} == {torch.device(device)}
    restored = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    restored.load_state_dict(state)
    for key, value in reference.state_dict().items():
        assert torch.equal(state[key].cpu(), value)
    inputs = torch.randn(3, 4)
    torch.testing.assert_close(restored(inputs), reference(inputs))


def test_load_onto_missing_device_fails_clearly() -> None:
    data = saved(saved_tensors())
    with pytest.raises(RuntimeError, match=r"MYDEV device 5 but torch.mydev.device_count\(\) is 2"):
        load(data, map_location="mydev:5")
    assert torch.equal(load(data, map_location="mydev:0")["a"].cpu(), torch.tensor([1.5, -2.5]))
    assert_device_still_usable()
