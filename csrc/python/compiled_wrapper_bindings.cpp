// What a compiled graph's Python wrapper calls on every run, at the price
// of the CPU's equivalents.
//
// A graph allocates each of its buffers with a call; through
// torch.empty_strided(..., device='mydev') that call parses keyword
// arguments and a device string first, about 1.2 us of host time against
// 0.55 us for the CPU's empty_strided_cpu (torch._C._dynamo.guards), which
// Inductor emits for cpu/cuda/xpu only. Entering the graph's device guard
// through torch.mydev.device costs ~0.5 us of Python. A small graph (the
// model suite's cnn forward: six buffers) pays that on every call.
#include "compiled_wrapper_bindings.h"

#include <ATen/EmptyTensor.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "../core/runtime_check.h"

namespace py = pybind11;

namespace mydev {
namespace {

c10::SmallVector<int64_t, 6> intsOf(PyObject* tuple, const char* what) {
  TORCH_CHECK_TYPE(PyTuple_Check(tuple), "_empty_strided: ", what,
                   " must be a tuple of ints");
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  c10::SmallVector<int64_t, 6> values(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long value = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      TORCH_CHECK_TYPE(false, "_empty_strided: ", what,
                       " must be a tuple of ints");
    }
    values[static_cast<size_t>(i)] = value;
  }
  return values;
}

// _empty_strided(size, stride, dtype): a tensor on the current mydev device
// from the caching allocator, as torch.empty_strided would make it, without
// the dispatcher and argument parsing.
PyObject* emptyStrided(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 3 && THPDtype_Check(args[2]),
                   "_empty_strided(size, stride, dtype) takes two tuples of "
                   "ints and a torch.dtype");
  const auto size = intsOf(args[0], "size");
  const auto stride = intsOf(args[1], "stride");
  TORCH_CHECK(size.size() == stride.size(), "_empty_strided: size has ",
              size.size(), " dimensions but stride has ", stride.size());
  const at::ScalarType dtype =
      reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  at::Tensor result;
  {
    py::gil_scoped_release no_gil;
    result = at::detail::empty_strided_generic(
        size, stride, &cachingAllocator(),
        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
  }
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

// _exchange_device(index): makes `index` current, returns the previous one.
PyObject* exchangeDevice(PyObject*, PyObject* index_object) {
  HANDLE_TH_ERRORS
  const long index = PyLong_AsLong(index_object);
  if (index == -1 && PyErr_Occurred()) return nullptr;
  const c10::DeviceIndex previous = currentDevice();
  if (index != previous) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(index));
    MYDEV_CHECK(mydevSetDevice(static_cast<int>(index)));
  }
  return PyLong_FromLong(previous);
  END_HANDLE_TH_ERRORS
}

PyMethodDef kMethods[] = {
    {"_empty_strided", reinterpret_cast<PyCFunction>(emptyStrided),
     METH_FASTCALL,
     "_empty_strided(size, stride, dtype): a tensor on the current mydev "
     "device (the allocation of compiled graphs)"},
    {"_exchange_device", exchangeDevice, METH_O,
     "_exchange_device(index): makes index current and returns the previous "
     "device (the device guard of compiled graphs)"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bindCompiledWrapper(py::module& module) {
  for (PyMethodDef* method = kMethods; method->ml_name != nullptr; ++method) {
    module.add_object(method->ml_name, py::reinterpret_steal<py::object>(
                                           PyCFunction_New(method, nullptr)));
  }
}

}  // namespace mydev
