"""Compiles a small MLP for mydev into an AOTInductor package and saves an
input for aoti_runner (README.md), and what Python's runner returns for it.

    python examples/aoti_cpp/export_model.py model.pt2 inputs.pt [expected.pt]
"""

import sys

import torch


def main(package_path: str, inputs_path: str, expected_path: str = "") -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = model.to("mydev").eval()
    x = torch.randn(8, 16)
    with torch.no_grad():
        exported = torch.export.export(model, (x.to("mydev"),))
        torch._inductor.aoti_compile_and_package(exported, package_path=package_path)
        # The runner takes CPU tensors and copies them to the device.
        torch.save([x], inputs_path)
        if expected_path:
            runner = torch._inductor.aoti_load_package(package_path)
            # One output: the model returns a tensor (the C++ runner a list).
            torch.save([runner(x.to("mydev")).cpu()], expected_path)
    print(f"wrote {package_path} and {inputs_path}")


if __name__ == "__main__":
    main(*sys.argv[1:])
