"""Sparse COO and compressed (CSR, ...) tensors on mydev, against the CPU."""

import io
from pathlib import Path

import pytest
import torch
import yaml

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, run_python

DEV = "mydev"

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def _dense(rows=5, cols=4, seed=0, device="cpu"):
    """A dense matrix with about half its entries zero, made on `device`."""
    g = torch.Generator(device=device).manual_seed(seed)
    values = torch.randn(rows, cols, generator=g, device=device)
    keep = torch.rand(rows, cols, generator=g, device=device) > 0.5
    return values * keep


def _uncoalesced_cpu():
    indices = torch.tensor([[0, 1, 0, 2, 1], [1, 0, 1, 3, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    return torch.sparse_coo_tensor(indices, values, (3, 4))


def _assert_sparse_equal(actual, expected):
    """Same layout, device mydev, and the same dense values (and nnz)."""
    assert actual.layout == expected.layout, (actual.layout, expected.layout)
    assert actual.device.type == DEV
    assert actual._nnz() == expected._nnz()
    assert_close_to_cpu(actual.to_dense(), expected.to_dense())


# --- construction and moving ----------------------------------------------


def test_sparse_coo_tensor_made_on_the_device():
    cpu = _uncoalesced_cpu()
    on_dev = torch.sparse_coo_tensor(cpu._indices().to(DEV), cpu._values().to(DEV), (3, 4))
    by_device_arg = torch.sparse_coo_tensor(cpu._indices(), cpu._values(), (3, 4), device=DEV)
    for t in (on_dev, by_device_arg):
        assert t.is_sparse and t.device.type == DEV and not t.is_coalesced()
        assert_close_to_cpu(t._values(), cpu._values())
        assert_close_to_cpu(t.to_dense(), cpu.to_dense())


def test_sparse_csr_tensor_made_on_the_device():
    crow, col, values = torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1]), torch.tensor([1.0, 2.0, 3.0])
    cpu = torch.sparse_csr_tensor(crow, col, values, (2, 3))
    dev = torch.sparse_csr_tensor(crow.to(DEV), col.to(DEV), values.to(DEV), (2, 3))
    dev_arg = torch.sparse_csr_tensor(crow, col, values, (2, 3), device=DEV)
    for t in (dev, dev_arg):
        assert t.layout == torch.sparse_csr and t.device.type == DEV
        assert_close_to_cpu(t.crow_indices(), crow)
        assert_close_to_cpu(t.to_dense(), cpu.to_dense())


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr"])
def test_to_sparse_and_back(layout):
    dense_cpu = _dense(4, 6, seed=1)
    dense = dense_cpu.to(DEV)
    convert = {
        "coo": lambda t: t.to_sparse(),
        "csr": lambda t: t.to_sparse_csr(),
        "csc": lambda t: t.to_sparse_csc(),
        "bsr": lambda t: t.to_sparse_bsr((2, 2)),
    }[layout]
    _assert_sparse_equal(convert(dense), convert(dense_cpu))


def test_dense_made_on_the_device_to_sparse():
    dense = _dense(6, 3, seed=2, device=DEV)
    sparse = dense.to_sparse()
    assert sparse.is_coalesced()
    _assert_sparse_equal(sparse, dense.cpu().to_sparse())


def test_moving_between_cpu_and_mydev_keeps_the_tensor():
    cpu = _uncoalesced_cpu()
    dev = cpu.to(DEV)
    assert dev.is_sparse and dev.device.type == DEV and not dev.is_coalesced()
    back = dev.cpu()
    assert back.device.type == "cpu" and torch.equal(back._indices(), cpu._indices())
    assert torch.equal(back._values(), cpu._values())
    csr = _dense(seed=3).to_sparse_csr()
    assert torch.equal(csr.to(DEV).cpu().to_dense(), csr.to_dense())


def test_coalesce_sums_duplicates():
    cpu = _uncoalesced_cpu()
    dev = cpu.to(DEV).coalesce()
    expected = cpu.coalesce()
    assert dev.is_coalesced() and dev.device.type == DEV
    assert_close_to_cpu(dev._indices(), expected._indices())
    assert_close_to_cpu(dev._values(), expected._values())
    # Coalescing a coalesced tensor is the same tensor, as on the CPU.
    assert dev.coalesce() is dev


# --- compute -----------------------------------------------------------------


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_times_dense(layout):
    a_cpu, b_cpu = _dense(5, 4, seed=4), torch.randn(4, 3)
    a_sparse = a_cpu.to_sparse() if layout == "coo" else a_cpu.to_sparse_csr()
    a, b = a_sparse.to(DEV), b_cpu.to(DEV)
    assert_close_to_cpu(torch.sparse.mm(a, b), torch.sparse.mm(a_sparse, b_cpu))
    assert_close_to_cpu(a @ b, a_sparse @ b_cpu)
    bias_cpu = torch.randn(5, 3)
    assert_close_to_cpu(
        torch.addmm(bias_cpu.to(DEV), a, b, beta=0.5, alpha=2.0),
        torch.addmm(bias_cpu, a_sparse, b_cpu, beta=0.5, alpha=2.0),
    )
    out = torch.empty(5, 3, device=DEV)
    torch.addmm(bias_cpu.to(DEV), a, b, out=out)
    assert_close_to_cpu(out, torch.addmm(bias_cpu, a_sparse, b_cpu))


def test_sampled_addmm_and_mm_reduce():
    mask_cpu = _dense(4, 4, seed=5).to_sparse_csr()
    m1, m2 = torch.randn(4, 3), torch.randn(3, 4)
    expected = torch.sparse.sampled_addmm(mask_cpu, m1, m2, beta=0.5, alpha=2.0)
    actual = torch.sparse.sampled_addmm(mask_cpu.to(DEV), m1.to(DEV), m2.to(DEV), beta=0.5, alpha=2.0)
    _assert_sparse_equal(actual, expected)
    dense = torch.randn(4, 2)
    for reduce in ("sum", "mean", "amax", "amin"):
        assert_close_to_cpu(
            torch.sparse.mm(mask_cpu.to(DEV), dense.to(DEV), reduce),
            torch.sparse.mm(mask_cpu, dense, reduce),
            msg=reduce,
        )


def test_elementwise_with_scalars_sum_and_index_select():
    cpu = _uncoalesced_cpu().coalesce()
    dev = cpu.to(DEV)
    _assert_sparse_equal(dev * 3, cpu * 3)
    _assert_sparse_equal(dev / 2, cpu / 2)
    _assert_sparse_equal(torch.neg(dev), torch.neg(cpu))
    _assert_sparse_equal(dev.pow(2), cpu.pow(2))
    _assert_sparse_equal(dev + dev, cpu + cpu)
    _assert_sparse_equal(dev * dev, cpu * cpu)
    in_place = dev.clone()
    in_place.mul_(4)
    _assert_sparse_equal(in_place, cpu * 4)
    assert_close_to_cpu(torch.sparse.sum(dev), torch.sparse.sum(cpu))
    _assert_sparse_equal(torch.sparse.sum(dev, dim=0), torch.sparse.sum(cpu, dim=0))
    assert_close_to_cpu(dev.sum(), cpu.sum())
    index = torch.tensor([2, 0, 2])
    _assert_sparse_equal(dev.index_select(1, index.to(DEV)), cpu.index_select(1, index))
    csr = _dense(seed=6).to_sparse_csr()
    _assert_sparse_equal(csr.to(DEV) * 2, csr * 2)
    assert_close_to_cpu(csr.to(DEV).sum(), csr.sum())


def test_autograd_through_sparse_times_dense():
    a_cpu = _dense(5, 4, seed=7).to_sparse().requires_grad_()
    b_cpu = torch.randn(4, 3, requires_grad=True)
    a = a_cpu.detach().to(DEV).requires_grad_()
    b = b_cpu.detach().to(DEV).requires_grad_()
    torch.sparse.mm(a_cpu, b_cpu).pow(2).sum().backward()
    torch.sparse.mm(a, b).pow(2).sum().backward()
    assert_close_to_cpu(b.grad, b_cpu.grad)
    assert a.grad.is_sparse and a.grad.device.type == DEV
    assert_close_to_cpu(a.grad.to_dense(), a_cpu.grad.to_dense())


def test_save_and_load(tmp_path):
    coo = _uncoalesced_cpu().to(DEV)
    csr = _dense(seed=8).to_sparse_csr().to(DEV)
    buffer = io.BytesIO()
    torch.save({"coo": coo, "csr": csr}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert loaded["coo"].device.type == DEV and loaded["csr"].device.type == DEV
    assert_close_to_cpu(loaded["coo"].to_dense(), coo.cpu().to_dense())
    assert_close_to_cpu(loaded["csr"].to_dense(), csr.cpu().to_dense())
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")
    assert on_cpu["coo"].device.type == "cpu"
    assert torch.equal(on_cpu["coo"].to_dense(), coo.cpu().to_dense())


# --- bad input ------------------------------------------------------------------


def test_mixing_devices_is_refused():
    sparse = _dense(seed=9).to_sparse().to(DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(sparse, torch.randn(4, 2))
    assert_device_still_usable()


def test_bad_shapes_raise_the_cpu_error():
    sparse_cpu = _dense(seed=10).to_sparse()
    with pytest.raises(RuntimeError) as cpu_error:
        torch.sparse.mm(sparse_cpu, torch.randn(3, 2))
    with pytest.raises(RuntimeError) as dev_error:
        torch.sparse.mm(sparse_cpu.to(DEV), torch.randn(3, 2, device=DEV))
    assert str(dev_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]
    with pytest.raises(RuntimeError, match="index out of bounds|out of bounds|size is inconsistent"):
        torch.sparse_coo_tensor(torch.tensor([[0, 7]]), torch.ones(2), (3,), device=DEV, check_invariants=True)
    assert_device_still_usable()


def test_op_without_any_sparse_kernel_is_a_clear_error():
    sparse = _dense(seed=11).to_sparse().to(DEV)
    with pytest.raises(NotImplementedError) as cpu_error:
        torch.cumsum(sparse.cpu(), 0)
    with pytest.raises(NotImplementedError, match="cumsum") as dev_error:
        torch.cumsum(sparse, 0)
    assert type(dev_error.value) is type(cpu_error.value)
    assert_device_still_usable()


# --- the table of ops run over host views ---------------------------------------


def _native_functions():
    """(name, {dispatch key: kernel}) from the native_functions.yaml that
    ships with torch."""
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged/ATen/native/native_functions.yaml"
    for entry in yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        dispatch = {}
        for keys, kernel in (entry.get("dispatch") or {}).items():
            dispatch.update({key.strip(): kernel for key in keys.split(",")})
        yield entry["func"].split("(")[0], dispatch


_SOURCE = Path(__file__).parent.parent / "csrc/aten/sparse_tensors.cpp"


def test_every_cpu_specific_sparse_kernel_runs_over_host_views():
    """Sparse ops whose SparseCPU kernel is not SparseCUDA's."""
    source = _SOURCE.read_text()
    cpu_specific = {
        "aten::" + name
        for name, dispatch in _native_functions()
        for cpu, cuda in (("SparseCPU", "SparseCUDA"), ("SparseCsrCPU", "SparseCsrCUDA"))
        if cpu in dispatch and dispatch[cpu] != dispatch.get(cuda)
    } - {"aten::is_pinned", "aten::_pin_memory"}  # CPU-only: pinning host memory
    missing = sorted(op for op in cpu_specific if f'"{op}"' not in source)
    assert not missing, f"add to hostViewOps() in {_SOURCE}: {missing}"


# --- as a user runs it --------------------------------------------------------------


def test_user_script_in_a_fresh_process():
    result = run_python(
        """
        import torch
        i = torch.tensor([[0, 1, 1], [2, 0, 2]])
        v = torch.tensor([3.0, 4.0, 5.0])
        s = torch.sparse_coo_tensor(i, v, (2, 3), device="mydev")
        w = torch.randn(3, 2, device="mydev", requires_grad=True)
        y = torch.sparse.mm(s, w)
        y.sum().backward()
        ref = torch.sparse.mm(s.cpu(), w.detach().cpu())
        assert torch.allclose(y.detach().cpu(), ref), (y, ref)
        assert torch.allclose(w.grad.cpu(), s.cpu().to_dense().t() @ torch.ones(2, 2))
        csr = torch.randn(4, 4, device="mydev").relu().to_sparse_csr()
        print(csr.device, (csr * 2).to_dense().sum().item() == 2 * csr.to_dense().sum().item())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["mydev:0", "True"]
