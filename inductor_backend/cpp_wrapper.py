"""cpp_wrapper=True for mydev (filled in below)."""

from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu


class MydevCppWrapperCodegen(CppWrapperCpu):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return MydevCppWrapperCodegen()
