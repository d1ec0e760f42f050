"""Random numbers and bool masks in compiled mydev kernels.

The vectorized kernels draw rand and randn a vector at a time
(device_ext/include/mydev_random.h) and load and store bool tensors as lane
masks with the device's functions (device_ext/include/mydev_bool_masks.h).
Both must give exactly what Inductor's own code gives: the draws are checked
lane for lane against cpp_prefix.h's scalar functions (in a C++ program over
random seeds and offsets, and in compiled kernels against the same kernels
built without vectors), the masks against the same ops run eagerly on the
CPU.
"""

import subprocess

import pytest
import torch
import torch.nn.functional as F
import torch.utils.cpp_extension
from torch._inductor import config as inductor_config
from torch._inductor import cpp_builder
from torch._inductor.utils import run_and_get_code

from inductor_backend.kernel_modules import INCLUDE_DIR
from mydev_testing import assert_close_to_cpu, run_python

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"

ISA_FLAGS = {
    "default": [],
    "avx2": ["-mavx2", "-mfma", "-DCPU_CAPABILITY_AVX2"],
    "avx512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma", "-DCPU_CAPABILITY_AVX512"],
}


def print_for_every_isa_this_cpu_runs(tmp_path, name, program_source, flags):
    """{isa: what it printed} of ``program_source`` (a C++ program including
    the device headers and torch's) built with ``flags`` for each vector ISA
    this CPU can run and for none; each build must exit with 0."""
    isas = list(ISA_FLAGS)
    own = torch.backends.cpu.get_cpu_capability().lower()
    runnable = isas[: isas.index(own) + 1] if own in isas else isas[:1]
    source = tmp_path / f"{name}.cpp"
    source.write_text(program_source)
    include = [f"-I{path}" for path in torch.utils.cpp_extension.include_paths()]
    printed = {}
    for isa in runnable:
        program = tmp_path / f"{name}_{isa}"
        command = ["g++", "-std=c++17", *flags, *ISA_FLAGS[isa], f"-I{INCLUDE_DIR}", *include]
        command += [str(source), "-o", str(program)]
        subprocess.run(command, check=True, capture_output=True, timeout=300)
        ran = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, f"{isa}: {ran.stderr}"
        printed[isa] = ran.stdout
    return printed


LANE_BY_LANE = r"""
#include <torch/csrc/inductor/cpp_prefix.h>
#include "mydev_random.h"
#include <cstdio>
#include <cstring>
#include <random>

template <typename Offset>
int mismatches(std::mt19937_64& numbers) {
  int found = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const uint32_t seed = static_cast<uint32_t>(numbers());
    Offset offset[16];
    for (Offset& each : offset) each = static_cast<Offset>(numbers());
    float uniform[16], normal[16];
    mydev_random::uniform(seed, offset, uniform);
    mydev_random::normal(seed, offset, normal);
    for (int lane = 0; lane < 16; ++lane) {
      const float u = normalized_rand_cpu(seed, offset[lane]);
      const float n = randn_cpu(seed, offset[lane]);
      found += std::memcmp(&u, &uniform[lane], sizeof u) != 0;
      found += std::memcmp(&n, &normal[lane], sizeof n) != 0;
    }
  }
  return found;
}

int main() {
  std::mt19937_64 numbers(20261129);
  std::printf("%d\n", mismatches<int64_t>(numbers) + mismatches<int32_t>(numbers));
}
"""


def test_vector_draws_equal_the_scalar_draws_for_every_isa_this_cpu_runs(tmp_path):
    """640,000 lanes of rand and randn, 64- and 32-bit offsets (the kernels
    take both as 32-bit), each vector ISA this CPU can run and the build
    without one, with the floating-point flags Inductor builds kernels with
    (no contraction: fused into a multiply-add, randn's 1 - u may round
    differently in the vector and scalar loops)."""
    kernel_flags = [f"-{flag}" for flag in cpp_builder._get_ffast_math_flags()]
    printed = print_for_every_isa_this_cpu_runs(tmp_path, "lane_by_lane", LANE_BY_LANE, ["-O3", *kernel_flags])
    for isa, stdout in printed.items():
        assert stdout.split() == ["0"], f"{isa}: {stdout} lanes differ"


def compiled_twice(function, *inputs, seed=7):
    """function compiled with vectors and without (every lane through
    cpp_prefix.h's scalar draws), each called after the same manual_seed:
    (vectorized result, scalar result, vectorized kernel's code)."""
    torch.manual_seed(seed)
    vectorized, codes = run_and_get_code(torch.compile(function), *inputs)
    torch._dynamo.reset()
    with inductor_config.patch({"cpp.simdlen": 1}):
        torch.manual_seed(seed)
        scalar, scalar_codes = run_and_get_code(torch.compile(function), *inputs)
    assert not any("mydev_random::" in code for code in scalar_codes)
    return vectorized, scalar, "\n".join(codes)


@pytest.mark.parametrize("numel", [16 * 1000, 16 * 1000 + 7], ids=["whole-vectors", "with-a-tail"])
def test_compiled_rand_and_randn_are_the_scalar_kernels_numbers(numel):
    x = torch.empty(numel, device=D)

    def draws(x):
        return torch.rand_like(x), torch.randn_like(x)

    (uniform, normal), (scalar_uniform, scalar_normal), code = compiled_twice(draws, x)
    assert "mydev_random::uniform(" in code and "mydev_random::normal(" in code
    assert torch.equal(uniform.cpu(), scalar_uniform.cpu())
    assert torch.equal(normal.cpu(), scalar_normal.cpu())
    assert 0 <= uniform.min().item() and uniform.max().item() < 1
    assert abs(uniform.mean().item() - 0.5) < 0.01
    assert abs(normal.mean().item()) < 0.02 and abs(normal.std().item() - 1) < 0.02


def test_compiled_dropout_masks_are_the_scalar_kernels_masks_and_train_as_dropout():
    """Forward and backward of a dropout between two layers: the same output
    and gradients as the kernels built without vectors, a kept fraction
    near 1 - p, kept values scaled by 1 / (1 - p), and gradients zero exactly
    where the forward dropped."""
    p = 0.25
    torch.manual_seed(0)
    weight = torch.randn(256, 256, device=D, requires_grad=True)
    x = torch.randn(64, 256, device=D)

    def step(x):
        hidden = F.dropout(x @ weight, p, training=True)
        hidden.sum().backward()
        return hidden

    (hidden,), (scalar_hidden,), code = compiled_twice(lambda x: (step(x),), x)
    assert "mydev_random::uniform(" in code
    assert torch.equal(hidden.detach().cpu(), scalar_hidden.detach().cpu())
    kept = hidden.detach().cpu() != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.01
    expected = (x @ weight).detach().cpu() / (1 - p)
    assert_close_to_cpu(hidden.detach()[kept.to(D)], expected[kept], rtol=1e-5, atol=1e-5)


def test_bool_tensors_load_and_store_as_the_cpu_computes_them():
    """Compares stored as bools, bools loaded into where and logical ops,
    at lengths below, at and across the 16 lanes of a vector, and a bool
    input read with a stride (which keeps Inductor's own code)."""

    def masks(x, keep):
        above = x > 0.3
        return above, torch.where(keep, x, -x) * 2, keep & above, ~keep | above

    compiled = torch.compile(masks, dynamic=False)
    code_seen = ""
    for numel in (5, 16, 37, 4099):
        x = torch.randn(numel, device=D)
        keep = torch.rand(numel, device=D) > 0.5
        results, (code,) = run_and_get_code(compiled, x, keep)
        code_seen += code
        for result, expected in zip(results, masks(x.cpu(), keep.cpu())):
            assert result.dtype == expected.dtype
            assert torch.equal(result.cpu(), expected), f"{numel} elements"
    assert "mydev_masks::load<" in code_seen and "mydev_masks::store(" in code_seen
    strided = (torch.rand(64, 2, device=D) > 0.5)[:, 0]
    x = torch.randn(64, device=D)
    result = torch.compile(lambda x, keep: torch.where(keep, x, 0.0))(x, strided)
    assert torch.equal(result.cpu(), torch.where(strided.cpu(), x.cpu(), 0.0))


MASKS_AGAINST_ATEN = r"""
#include <torch/csrc/inductor/cpp_prefix.h>
#include "mydev_bool_masks.h"
#include <cstdio>
#include <cstring>
#include <random>

using Mask = at::vec::VecMask<float, 1>;
constexpr int kLanes = Mask::size();

int main() {
  std::mt19937 numbers(20261129);
  int found = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    // Bytes past the lanes a count covers hold a marker: a load must not
    // read them as lanes, a store must leave them as they are.
    unsigned char source[2 * kLanes];
    for (unsigned char& byte : source) byte = numbers() % 3 == 0 ? 0 : 1;
    for (int count = 0; count <= kLanes; ++count) {
      unsigned char input[2 * kLanes];
      std::memcpy(input, source, sizeof input);
      for (int i = count; i < 2 * kLanes; ++i) input[i] = 7;
      const bool* bools = reinterpret_cast<const bool*>(input);
      const Mask ours = mydev_masks::load<Mask>(bools, count);
      const Mask atens = Mask::from(bools, count);
      float ours_lanes[kLanes], atens_lanes[kLanes];
      at::vec::Vectorized<float>(ours).store(ours_lanes);
      at::vec::Vectorized<float>(atens).store(atens_lanes);
      for (int lane = 0; lane < count; ++lane) {
        found += std::memcmp(&ours_lanes[lane], &atens_lanes[lane], 4) != 0;
      }
      unsigned char stored[2 * kLanes], expected[2 * kLanes];
      std::memset(stored, 9, sizeof stored);
      std::memset(expected, 9, sizeof expected);
      mydev_masks::store(atens, reinterpret_cast<bool*>(stored), count);
      Mask(atens).store(reinterpret_cast<bool*>(expected), count);
      found += std::memcmp(stored, expected, sizeof stored) != 0;
    }
  }
  std::printf("%d\n", found);
}
"""


def test_bool_masks_equal_atens_for_every_isa_this_cpu_runs(tmp_path):
    """mydev_masks::load and store against ATen's VecMask::from and store,
    in a C++ program built for each vector ISA this CPU can run (each has
    its own code: masked byte moves on AVX-512, an 8-byte word on AVX2,
    ATen's loop without one): random 0/1 bytes, every count from 0 to a
    whole vector, bytes beyond the count neither read nor written."""
    printed = print_for_every_isa_this_cpu_runs(tmp_path, "masks_against_aten", MASKS_AGAINST_ATEN, ["-O2"])
    for isa, stdout in printed.items():
        assert stdout.split() == ["0"], f"{isa}: {stdout} mismatches"


def test_compiled_dropout_training_in_a_plain_script():
    """A user's script: a small model with dropout, compiled, trained for a
    few steps on mydev; the loss falls, dropout keeps about 1 - p of the
    activations, and the same seed gives the same step."""
    completed = run_python(
        """
            import torch
            import torch.nn as nn

            def run(seed):
                torch.manual_seed(seed)
                model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 1)).to("mydev")
                compiled = torch.compile(model)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
                x = torch.randn(512, 32, device="mydev")
                y = x[:, :1] * 2 - x[:, 1:2]
                losses = []
                for _ in range(30):
                    loss = ((compiled(x) - y) ** 2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
                dropped = torch.compile(nn.Dropout(0.2))(torch.ones(100000, device="mydev"))
                return losses, (dropped != 0).float().mean().item(), dropped.max().item()

            losses, kept, largest = run(1)
            again, _, _ = run(1)
            assert losses == again, "same seed, different training"
            assert losses[-1] < losses[0] / 2, losses
            assert abs(kept - 0.8) < 0.01 and abs(largest - 1.25) < 1e-6, (kept, largest)
            print("dropout trains on mydev")
            """,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr
    assert "dropout trains on mydev" in completed.stdout
