#include "vector_isa.h"

#include <ATen/Version.h>

#include <string>

namespace mydev {

VectorIsa vectorIsa() {
  static const VectorIsa chosen = [] {
    const std::string capability = at::get_cpu_capability();
    if (capability == "AVX512") return VectorIsa::Avx512;
    if (capability == "AVX2") return VectorIsa::Avx2;
    return VectorIsa::Default;
  }();
  return chosen;
}

const char* vectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return "AVX512";
    case VectorIsa::Avx2: return "AVX2";
    case VectorIsa::Default: break;
  }
  return "DEFAULT";
}

}  // namespace mydev
