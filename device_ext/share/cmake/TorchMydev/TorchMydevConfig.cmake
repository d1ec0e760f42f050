# find_package(TorchMydev): the imported target torch_mydev, i.e.
# libtorch_mydev.so (the mydev driver and torch integration) and its public
# headers. Put device_ext.cpp_extension.cmake_prefix_path in
# CMAKE_PREFIX_PATH; link torch's targets (find_package(Torch)) as well.
get_filename_component(_TORCH_MYDEV_PACKAGE "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_TORCH_MYDEV_LIBRARY "${_TORCH_MYDEV_PACKAGE}/lib/libtorch_mydev.so")
if(NOT EXISTS "${_TORCH_MYDEV_LIBRARY}")
  set(TorchMydev_FOUND FALSE)
  set(TorchMydev_NOT_FOUND_MESSAGE
      "${_TORCH_MYDEV_LIBRARY} does not exist: build torch-mydev first (pip install --no-build-isolation -e .)")
  return()
endif()
if(NOT TARGET torch_mydev)
  add_library(torch_mydev SHARED IMPORTED)
  set_target_properties(torch_mydev PROPERTIES
    IMPORTED_LOCATION "${_TORCH_MYDEV_LIBRARY}"
    IMPORTED_SONAME "libtorch_mydev.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_TORCH_MYDEV_PACKAGE}/include")
endif()
set(TorchMydev_INCLUDE_DIRS "${_TORCH_MYDEV_PACKAGE}/include")
set(TorchMydev_LIBRARIES torch_mydev)
