"""Every change torch-mydev makes to torch's own state, in one place.

Registration through torch's intended APIs is not a patch and lives where it
belongs: ``rename_privateuse1_backend``, ``_register_device_module``,
``generate_methods_for_privateuse1_backend`` (``device_ext/_registration.py``),
``Backend.register_backend`` (``device_ext/distributed.py``),
``register_backend_for_device``, ``register_device_op_overrides``,
``register_interface_for_device`` and ``register_benchmarker``
(``inductor_backend``). Everything else that assigns to a torch module,
class or table, or rebinds a torch function, is a module here, one per torch
subsystem, with an ``apply()`` that is idempotent. Each wrapped function
keeps torch's original as ``__wrapped__``, which is how the tests put it back
to show the failure. Nothing outside this package assigns to a torch
attribute (tests/test_layering.py checks it).

Importing this package imports none of its modules: each is imported by
whoever applies it, when the torch subsystem it patches has been imported.

| module | what it changes | why | torch | test that fails without it | remove when |
| --- | --- | --- | --- | --- | --- |
| ``inductor`` | ``scheduler.BaseSchedulerNode.is_cpu`` also true for mydev nodes when the kernel language is "cpp" | the scheduler's C++-codegen-only paths (no loop reordering / reindexing for reductions / index inversion) test ``is_cpu()``; without it a pointwise fused into a reduction is reindexed for a SIMD kernel and C++ codegen fails | 2.13 | tests/test_compile_workarounds.py::test_is_cpu_keeps_scheduler_reindexing_away_from_mydev_nodes | Inductor asks the device's scheduling whether it is a C++ kernel generator |
| ``inductor`` | ``scheduler.device_need_guard`` true for mydev | device guards are emitted only for GPU_TYPES, and adding mydev there requires Triton; code compiled for mydev:1 would run on the current device | 2.13 | test_compile_workarounds.py::test_device_need_guard_guards_mydev_devices | the guard decision is a per-device registration |
| ``inductor`` | ``get_current_backend`` (in ``utils``, ``codegen.common``, ``scheduler``, ``kernel.mm_common``) answers mydev's kernel language | Inductor answers "triton" for unknown devices; C++ kernels then lose index dtypes | 2.13 | test_compile_workarounds.py::test_get_current_backend_reports_cpp_for_mydev | the answer comes from the registered scheduling |
| ``inductor`` | ``triton_heuristics.CachingAutotuner._make_launchers`` reloads a mydev Triton kernel's Python function | workers drop it before pickling; mydev's simulator interprets it | 2.13 | test_compile_workarounds.py::test_mydev_triton_kernels_compiled_in_workers_get_their_python_back | mydev Triton kernels run compiled binaries |
| ``inductor`` | ``codegen.common.device_codegens["mydev"]`` is an entry that picks the scheduling per compile (``set_device_codegens``) | ``register_backend_for_device`` stores one fixed scheduling class; mydev has two kernel languages chosen by ``config.kernel_language`` | 2.13 | tests/test_compile_triton.py::test_kernel_language_is_chosen_per_compile | Inductor lets a device choose its scheduling per compile |
| ``inductor`` | ``codegen.cpp_utils.DEVICE_TO_ATEN["mydev"] = "at::kPrivateUse1"`` | ``cpp_wrapper=True`` names the device type from this table, which has no registration function | 2.13 | tests/test_compile.py::test_cpp_wrapper_launches_kernels_on_the_stream_and_uses_mydev_shims | the table covers PrivateUse1 or gets a registration API |
| ``dynamo`` | ``torch.utils._triton.has_triton`` also true when Triton can run mydev kernels | Dynamo captures ``@triton.jit`` calls only if ``has_triton()``, which checks a fixed device list | 2.13 | test_compile_workarounds.py::test_has_triton_counts_mydev_as_a_triton_device | ``has_triton`` asks registered Triton backends |
| ``fake_tensor`` | ``torch._C._select_conv_backend`` answers for mydev tensors as for CPU tensors of the same layout | FakeTensor convolution takes the output layout from it and gets "contiguous" for PrivateUse1, while mydev's convolution keeps channels-last | 2.13 | test_compile_workarounds.py::test_select_conv_backend_answers_like_the_cpu_for_mydev | PrivateUse1 can declare its convolution's output layout |
| ``c10d`` | ``distributed_c10d._new_process_group_helper`` wrapped: default spec ``"mydev:myccl,cpu:gloo"``, default backend type CUSTOM, a store prefix per group incarnation, gloo's ``global_ranks_in_group`` filled | torch 2.13 leaves the default backend type undefined for a plugin device (warnings, no CPU backend for ``init_process_group()``), reuses store keys of a destroyed group, and gloo's ``split()`` reads an empty rank list | 2.13 | tests/test_distributed.py::test_myccl_only_then_default_backend_reinit, test_collectives_mixed_backend_two_ranks; tests/test_distributed_training.py::test_destroy_and_recreate_process_group_three_times; tests/test_distributed_host_path.py::test_split_two_dim_mesh_over_gloo | torch special-cases custom backends as it does NCCL, and keys stores per incarnation |
| ``autograd_exit`` | an ``atexit`` handler that runs one backward pass per mydev device through the engine (zero-element tensors: no device memory; only if a backward pass started autograd's device threads, so an uncaught Ctrl-C keeps its SIGINT status) | since 2.13 a device thread can drop a graph task holding a Python context after finalization began: abort at exit (134) | 2.13 | tests/test_autograd_optim.py::test_process_exits_cleanly_right_after_backward | torch no longer stashes per-backward Python state in the graph task |
| ``multiprocessing`` | the reducers ``torch.multiprocessing`` registers with ``ForkingPickler`` for tensors, parameters and ``UntypedStorage``: mydev tensors go through device IPC (``device_ext/_storage_sharing.py``), everything else to torch's reducer | ``reductions.reduce_tensor`` special-cases only cuda; other devices fail with "_share_fd_: only available on CPU" in a Queue's feeder thread while the consumer waits forever | 2.13 | tests/test_multiprocessing.py | ``torch.multiprocessing.reductions`` dispatches to the device module for non-cuda accelerators |
| ``aot_inductor`` | ``codecache._get_cpp_wrapper_header`` answers ``device_ext/include/mydev_aoti.h`` for mydev AOTInductor models | ``aoti_compile_and_package`` precompiles ``torch/csrc/inductor/aoti_include/<device>.h``, which torch ships for cpu, cuda, xpu and mps only: the compile fails before the model is built | 2.13 | tests/test_aoti.py::test_precompiled_model_header_is_mydevs | the AOTInductor header is asked of the device's wrapper codegen (``get_device_include_path_aot``) |

docs/torch_patches.md holds the same table.
"""
