// Runs an AOTInductor package (.pt2) compiled for mydev in a C++ program,
// without Python: torch's package loader finds the model runner that
// libtorch_mydev.so registers for the device "mydev", the weights are loaded
// onto the device and the model's kernels run on its current stream.
//
//   aoti_runner <model.pt2> <inputs.pt> [<outputs.pt>] [<device index>]
//
// inputs.pt: the model's inputs as a list of CPU tensors, written in Python
// with torch.save([...]); they are copied to the device here. The outputs are
// printed and, with outputs.pt, saved as a tuple that Python can torch.load.
#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<char> readFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  TORCH_CHECK(file, "cannot open ", path);
  return {std::istreambuf_iterator<char>(file),
          std::istreambuf_iterator<char>()};
}

std::vector<at::Tensor> loadInputs(const std::string& path,
                                   const c10::Device& device) {
  const c10::IValue saved = torch::jit::pickle_load(readFile(path));
  TORCH_CHECK(saved.isList(), path,
              ": expected a list of tensors saved with torch.save");
  std::vector<at::Tensor> inputs;
  for (const c10::IValue& value : saved.toListRef()) {
    TORCH_CHECK(value.isTensor(), path, ": expected a list of tensors");
    inputs.push_back(value.toTensor().to(device));
  }
  return inputs;
}

void saveOutputs(const std::vector<at::Tensor>& outputs,
                 const std::string& path) {
  // A tuple: Python's torch.load(weights_only=True) reads it as is.
  std::vector<c10::IValue> on_host;
  for (const at::Tensor& output : outputs) {
    on_host.emplace_back(output.cpu());
  }
  const std::vector<char> bytes =
      torch::jit::pickle_save(c10::ivalue::Tuple::create(std::move(on_host)));
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TORCH_CHECK(file, "cannot write ", path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: " << argv[0]
              << " <model.pt2> <inputs.pt> [<outputs.pt>] [<device index>]\n";
    return 2;
  }
  try {
    const std::string outputs_path = argc > 3 ? argv[3] : "";
    const auto index =
        static_cast<c10::DeviceIndex>(argc > 4 ? std::stoi(argv[4]) : 0);
    // "mydev" is a device name as soon as the library is loaded.
    const c10::Device device(c10::DeviceType::PrivateUse1, index);

    const std::vector<at::Tensor> inputs = loadInputs(argv[2], device);
    torch::inductor::AOTIModelPackageLoader loader(
        argv[1], "model", /*run_single_threaded=*/false, /*num_runners=*/1,
        index);
    const std::vector<at::Tensor> outputs = loader.run(inputs);

    for (size_t i = 0; i < outputs.size(); ++i) {
      std::cout << "output " << i << " on " << outputs[i].device() << ", shape "
                << outputs[i].sizes() << ":\n"
                << outputs[i].cpu() << "\n";
    }
    if (!outputs_path.empty()) {
      saveOutputs(outputs, outputs_path);
    }
  } catch (const c10::Error& error) {
    std::cerr << "aoti_runner: " << error.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "aoti_runner: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
