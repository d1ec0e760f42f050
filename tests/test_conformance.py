"""The vendor conformance suite (`python -m device_ext.conformance`).

Fast on purpose (CI): the CLI on a few ops, the classifier on fake ops that
fail in known ways, and a broad subset of common ops that must all pass.
The full OpInfo run is not a unit test; its report is
docs/conformance_float32.md."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest
import torch

import device_ext  # noqa: F401  (registers mydev even with autoload off)
from device_ext.conformance import opdb
from device_ext.conformance.results import ALL_STATUSES, Status, TaskResult
from device_ext.conformance.runner import RunOptions, run_op

REPO = Path(__file__).resolve().parent.parent
STATUS_VALUES = {status.value for status in ALL_STATUSES}

# OpInfos that behave in known ways on the device. A file, not this module,
# because the CLI's worker processes import it (--extra-ops).
FAKE_OPS_SOURCE = textwrap.dedent(
    """
    import torch
    from torch.testing import make_tensor
    from torch.testing._internal.common_dtype import floating_types
    from torch.testing._internal.opinfo.core import OpInfo, SampleInput


    def sample_inputs(op_info, device, dtype, requires_grad, **kwargs):
        yield SampleInput(make_tensor((4, 3), device=device, dtype=dtype))
        yield SampleInput(make_tensor((2, 5), device=device, dtype=dtype, noncontiguous=True))


    def on_device(x):
        return x.device.type != "cpu"


    def correct(x):
        return x.sin()


    def mismatching(x):  # a wrong kernel: cos instead of sin
        return x.cos() if on_device(x) else x.sin()


    def raising(x):
        if on_device(x):
            raise RuntimeError("deliberate failure on the device")
        return x.sin()


    def missing_kernel(x):
        if on_device(x):
            raise NotImplementedError("mydev has no kernel for conformance_fake::missing_kernel")
        return x.sin()


    def copy_instead_of_view(x):  # view on the CPU, a copy on the device
        return x.reshape(-1).clone() if on_device(x) else x.view(-1)


    def invalid_input(x):  # the CPU rejects the input too: not a finding
        raise ValueError("no valid input")


    def random(x):
        return torch.bernoulli(torch.full_like(x, 0.5))


    def failing_asynchronously(x):  # the kernel fails after the call returned
        if on_device(x):
            return x.index_select(0, torch.full((x.shape[0],), 100, device=x.device))
        return x.clone()


    def column_major(x):  # the right values in another layout on the device
        return x.sin().t().contiguous().t() if on_device(x) else x.sin()


    def hanging(x):  # the device's stream stays held: synchronizing hangs
        if on_device(x):
            torch.mydev._debug.hold_stream(timeout_s=600)
        return x.sin()


    def fake(name, function, **kwargs):
        return OpInfo(
            "conformance_fake_" + name,
            op=function,
            dtypes=floating_types(),
            sample_inputs_func=sample_inputs,
            supports_out=False,
            supports_autograd=False,
            **kwargs,
        )


    op_db = [
        fake("correct", correct),
        fake("mismatching", mismatching),
        fake("raising", raising),
        fake("missing_kernel", missing_kernel),
        fake("copy_instead_of_view", copy_instead_of_view),
        fake("invalid_input", invalid_input),
        fake("random", random),
        fake("failing_asynchronously", failing_asynchronously),
        fake("hanging", hanging),
        fake("column_major", column_major),
    ]
    """
)

# Common ops that pass today; a regression in any is a product bug.
COMMON_OPS = [
    "add", "sub", "mul", "div.no_rounding_mode", "matmul", "mm", "bmm", "addmm", "sum", "mean",
    "amax", "argmax", "softmax", "log_softmax", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh",
    "abs", "neg", "clamp", "where", "cat", "stack", "reshape", "transpose", "permute", "index_select",
    "gather", "scatter", "masked_fill", "cumsum", "sort", "topk", "nn.functional.linear", "nn.functional.gelu",
    "nn.functional.silu", "nn.functional.relu", "nn.functional.embedding", "nn.functional.cross_entropy",
    "pow", "eq", "var", "std", "linalg.vector_norm", "nn.functional.scaled_dot_product_attention",
]  # fmt: skip


@pytest.fixture(scope="module")
def fake_ops_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("conformance") / "fake_ops.py"
    path.write_text(FAKE_OPS_SOURCE)
    return path


@pytest.fixture(scope="module")
def fake_ops(fake_ops_file: Path) -> Dict[str, object]:
    return {op.name.replace("conformance_fake_", ""): op for op in opdb.load_extra_ops(str(fake_ops_file))}


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "device_ext.conformance", "--no-progress", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def check_fake(fake_ops: Dict[str, object], name: str) -> TaskResult:
    return run_op(fake_ops[name], torch.float32, RunOptions(variants=()))


def test_cli_small_subset_writes_json_and_markdown(tmp_path: Path) -> None:
    json_path, markdown_path = tmp_path / "report.json", tmp_path / "report.md"
    # Strided inputs only: the sparse section has its own test.
    run = run_cli(
        "--ops",
        "^(add|mul|sum|mm|softmax)$",
        "--layouts",
        "strided",
        "--jobs",
        "0",  # in this interpreter: the whole-db test runs the workers
        "--json",
        str(json_path),
        "--markdown",
        str(markdown_path),
    )
    assert run.returncode == 0, run.stderr
    assert "op pass rate at float32" in run.stdout

    report = json.loads(json_path.read_text())
    assert report["format"] == "mydev-conformance/1"
    assert report["environment"]["torch"] == torch.__version__
    assert report["environment"]["cpu_fallback"] == "off"
    assert report["environment"]["device"]["properties"]["name"]
    assert report["settings"]["dtypes"] == "float32"
    results: List[dict] = report["results"]
    assert sorted(r["op"] for r in results) == ["add", "mm", "mul", "softmax", "sum"]
    for result in results:
        assert result["dtype"] == "float32"
        assert result["status"] in STATUS_VALUES
        assert result["samples"] > 0 and sum(result["counts"].values()) >= result["samples"]
        TaskResult.from_dict(result)  # round-trips
    summary = report["summary"]
    assert summary["ops"] == summary["pairs"] == 5
    assert set(summary["pair_status_counts"]) == STATUS_VALUES
    for rate in ("float32_op_pass_rate", "pair_pass_rate", "op_pass_rate"):
        assert set(summary[rate]) == {"passed", "failed", "skipped", "rate"}
    assert summary["float32_op_pass_rate"]["passed"] + summary["float32_op_pass_rate"]["failed"] == 5

    markdown = markdown_path.read_text()
    for heading in (
        "# mydev OpInfo conformance report: float32",
        "## Summary",
        "## Environment",
        "## Failures",
        "## Skipped",
        "## All results",
    ):
        assert heading in markdown
    for op in ("add", "mm", "mul", "softmax", "sum"):
        assert f"\n| {op} | " in markdown


def test_cli_timeout_failures_and_min_pass_rate(tmp_path: Path, fake_ops_file: Path) -> None:
    """One run over the fake ops: the hanging one is cut off and reported
    without stopping the run, failures get their status, and the pass rate
    below --min-pass-rate makes the exit status non-zero."""
    json_path = tmp_path / "report.json"
    run = run_cli(
        "--extra-ops", str(fake_ops_file),
        "--ops", "^conformance_fake_(hanging|correct|mismatching|missing_kernel)$",
        "--timeout-per-op", "5", "--jobs", "1", "--min-pass-rate", "0.9", "--json", str(json_path),
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "below the required 90.0%" in run.stderr
    statuses = {r["op"]: r for r in json.loads(json_path.read_text())["results"]}
    hanging = statuses["conformance_fake_hanging"]
    assert hanging["status"] == Status.ERROR.value
    assert hanging["causes"][0]["message"].startswith("Timeout:")
    assert statuses["conformance_fake_correct"]["status"] == Status.PASS.value  # after the hang
    assert statuses["conformance_fake_mismatching"]["status"] == Status.MISMATCH.value
    assert statuses["conformance_fake_missing_kernel"]["status"] == Status.MISSING_KERNEL.value


def test_cli_passes_min_pass_rate_when_met(fake_ops_file: Path) -> None:
    run = run_cli(
        "--extra-ops",
        str(fake_ops_file),
        "--ops",
        "^conformance_fake_correct$",
        "--min-pass-rate",
        "100%",
        "--jobs",
        "0",
    )
    assert run.returncode == 0, run.stderr


def test_mismatching_op_is_a_mismatch(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "mismatching")
    assert result.status == Status.MISMATCH
    assert result.counts == {"mismatch": 2}
    assert "values differ" in result.causes[0].message
    assert "Greatest absolute difference" in result.causes[0].message


def test_metadata_check_finds_other_strides_with_samples_made_on_the_device(fake_ops: Dict[str, object]) -> None:
    """--samples-on-device: samples generated on the device, strides compared
    (the default check compares values, shapes and dtypes, not strides)."""
    assert check_fake(fake_ops, "column_major").status == Status.PASS
    result = run_op(fake_ops["column_major"], torch.float32, RunOptions(variants=(), samples_on_device=True))
    assert result.status == Status.MISMATCH
    assert result.causes[0].message == "output: strides (1, 4), CPU gives (3, 1)"
    assert 'device="mydev:0"' in result.causes[0].sample
    assert check_fake(fake_ops, "correct").status == Status.PASS


def test_cli_metadata_check_over_ops_and_modules(tmp_path: Path) -> None:
    """The two outputs whose metadata the device once got wrong: a 1-D
    MultiLabelMarginLoss without reduction (0-dim on the CPU) and
    nonzero_static (row-major on the CPU); modules are reported as ops."""
    json_path = tmp_path / "report.json"
    run = run_cli(
        "--samples-on-device",
        "--modules",
        "--jobs",
        "0",
        "--variants",
        "function",
        "--ops",
        "^(nonzero_static|module:nn.MultiLabelMarginLoss|module:nn.LSTM)$",
        "--json",
        str(json_path),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(json_path.read_text())
    assert report["settings"]["samples_on_device"] and report["settings"]["modules"]
    statuses = {r["op"]: r["status"] for r in report["results"]}
    assert statuses == {"nonzero_static": "pass", "module:nn.MultiLabelMarginLoss": "pass", "module:nn.LSTM": "pass"}


def test_cli_error_inputs_are_reported_as_ops(tmp_path: Path) -> None:
    """--error-inputs: each op's error inputs, one result per op at dtype
    "any"; a fake op whose error input raises only from the stream (as
    overlapping out= arguments once did) is a mismatch that says so."""
    extra = tmp_path / "late_error_ops.py"
    extra.write_text(
        textwrap.dedent(
            """
            import torch
            from torch.testing._internal.opinfo.core import ErrorInput, OpInfo, SampleInput

            def late(x):
                # Launches a kernel that fails; nothing raises at the call.
                return x.index_select(0, torch.tensor([x.numel()], device=x.device))

            def error_inputs(op, device, **kwargs):
                x = torch.ones(3, device=device)
                yield ErrorInput(SampleInput(x), error_type=IndexError, error_regex="index out of range")

            op_db = [
                OpInfo(
                    "late_error",
                    op=late,
                    dtypes=(torch.float32,),
                    sample_inputs_func=lambda *a, **k: [],
                    error_inputs_func=error_inputs,
                )
            ]
            """
        )
    )
    json_path, markdown_path = tmp_path / "report.json", tmp_path / "report.md"
    run = run_cli(
        "--markdown",
        str(markdown_path),
        "--error-inputs",
        "--jobs",
        "0",
        "--extra-ops",
        str(extra),
        "--ops",
        "^error_inputs:(index_select|masked_fill|late_error)$",
        "--json",
        str(json_path),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(json_path.read_text())
    assert report["settings"]["error_inputs"]
    results = {r["op"]: r for r in report["results"]}
    assert {op: (r["dtype"], r["status"]) for op, r in results.items()} == {
        "error_inputs:index_select": ("any", "pass"),
        "error_inputs:masked_fill": ("any", "pass"),
        "error_inputs:late_error": ("any", "mismatch"),
    }
    assert results["error_inputs:late_error"]["causes"][0]["message"].startswith(
        "expected IndexError matching 'index out of range' at the call; raised from the stream: IndexError"
    )
    # The report says what an error-input pair checks, not what a value check does.
    markdown = markdown_path.read_text()
    assert markdown.startswith("# mydev OpInfo conformance report: error inputs\n")
    assert "each must raise at the call" in markdown and "gave the CPU's result" not in markdown


def test_raising_op_is_an_error(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "raising")
    assert result.status == Status.ERROR
    assert result.causes[0].message == "RuntimeError: deliberate failure on the device"


def test_not_implemented_is_a_missing_kernel(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "missing_kernel")
    assert result.status == Status.MISSING_KERNEL
    assert result.causes[0].message.startswith("NotImplementedError: mydev has no kernel")


def test_asynchronous_kernel_error_is_attributed_to_its_op(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "failing_asynchronously")
    assert result.status == Status.ERROR
    assert result.causes[0].message.startswith("IndexError: index out of range")
    assert result.counts == {"error": 2}  # each sample's own failure, none left over
    assert check_fake(fake_ops, "correct").status == Status.PASS  # the next op starts clean


def test_copy_where_the_cpu_returns_a_view_is_a_mismatch(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "copy_instead_of_view")
    assert result.status == Status.MISMATCH
    assert result.causes[0].message.startswith("aliasing differs")


def test_input_the_cpu_rejects_is_skipped(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "invalid_input")
    assert result.status == Status.SKIPPED
    assert result.skip_reasons == {"the CPU raises ValueError for the sample": 2}


def test_random_op_is_skipped_with_the_reason(fake_ops: Dict[str, object]) -> None:
    result = check_fake(fake_ops, "random")
    assert result.status == Status.SKIPPED
    (reason,) = result.skip_reasons
    assert "random values" in reason and "aten.bernoulli" in reason


def test_uninitialised_output_is_skipped_but_checked_for_shape() -> None:
    ops = opdb.load_ops()
    result = run_op(ops["empty_like"], torch.float32)
    assert result.status == Status.SKIPPED
    assert "uninitialised" in result.reason


def test_dtype_selection_follows_cudas_dtypes() -> None:
    ops = opdb.load_ops()
    selection = opdb.select(ops, "all", include=["^add$"], layouts=[opdb.STRIDED])
    expected = set(ops["add"].supported_dtypes("cuda")) | set(ops["add"].supported_dtypes("cpu"))
    assert {task.dtype for task in selection.tasks} == {str(d).replace("torch.", "") for d in expected}
    # histc: cuda (and so mydev) has integer dtypes the CPU lacks.
    histc = {task.dtype for task in opdb.select(ops, "all", include=["^histc$"], layouts=[opdb.STRIDED]).tasks}
    assert "int32" in histc and torch.int32 not in ops["histc"].supported_dtypes("cpu")
    assert opdb.select(ops, "float32", include=["^add$"], exclude=["add"]).tasks == []
    # An op without the requested dtype is listed as not applicable.
    assert opdb.select(ops, "float32", include=["^bitwise_and$"]).not_applicable == ["bitwise_and"]


def test_sparse_section_checks_the_opinfos_sparse_samples() -> None:
    ops = opdb.load_ops()
    names = [task.op for task in opdb.select(ops, "float32", include=["^abs$"]).tasks]
    assert names == [
        "abs",
        "abs[sparse_coo]",
        "abs[sparse_csr]",
        "abs[sparse_csc]",
        "abs[sparse_bsr]",
        "abs[sparse_bsc]",
    ]
    for name in names[1:]:
        op, layout = opdb.resolve(ops, name)
        result = run_op(op, torch.float32, RunOptions(max_samples=3), layout)
        assert result.op == name and result.status == Status.PASS, (name, result.status, result.reason)


def test_reference_at_a_dtype_the_cpu_lacks_is_computed_wider() -> None:
    ops = opdb.load_ops()
    result = run_op(ops["exp"], torch.complex32, RunOptions(max_samples=3))
    assert result.status == Status.PASS, result.reason


@pytest.mark.slow
def test_whole_op_db_at_float32_meets_the_target(tmp_path: Path) -> None:
    """The issue's target, checked on every run: at least 97% of OpInfo ops
    pass at float32 (about 2 minutes on a 2-CPU host, one worker per CPU),
    and every one of COMMON_OPS passes. The JSON report is kept for the
    failure message."""
    report = tmp_path / "float32.json"
    result = run_cli("--json", str(report), "--min-pass-rate", "0.97", timeout=1200)
    assert report.exists(), result.stderr[-2000:]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "op pass rate at float32" in result.stdout
    results = {r["op"]: r for r in json.loads(report.read_text())["results"] if r["dtype"] == "float32"}
    failures = [
        f"{name}: {results[name]['status']}: {results[name].get('causes')}"
        for name in COMMON_OPS
        if results[name]["status"] != Status.PASS.value
    ]
    assert not failures, "\n".join(failures)
