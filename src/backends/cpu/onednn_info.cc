// oneDNN's self-description for `ljperf doctor`; see onednn_info.h.
#include "backends/cpu/onednn_info.h"

#include <dnnl.h>

#include <cstdio>

namespace lj::cpu {
namespace {

std::string isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all:
      return "all";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(isa));
  return hex;
}

std::string runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "unknown";
  }
}

// Whether oneDNN creates an f16 x f16 -> f32 matmul primitive here (asked once).
bool f16_matmul_available() {
  static const bool available = [] {
    dnnl_engine_t engine = nullptr;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return false;
    const dnnl_dims_t dims = {16, 16};
    dnnl_memory_desc_t a, b, c;
    dnnl_memory_desc_init_by_tag(&a, 2, dims, dnnl_f16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b, 2, dims, dnnl_f16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c, 2, dims, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = nullptr;
    const bool ok =
        dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &c) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) == dnnl_success;
    if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(engine);
    return ok;
  }();
  return available;
}

}  // namespace

OneDnnInfo onednn_info() {
  OneDnnInfo info;
  const dnnl_version_t* v = dnnl_version();
  info.version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  if (v->hash != nullptr && std::string(v->hash) != "N/A") info.git_hash = v->hash;
  info.cpu_runtime = runtime_name(v->cpu_runtime);
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  info.cpu_isa = isa_name(isa);
  // The ISA values are bit masks that contain the masks of the ISAs they extend.
  const unsigned bits = static_cast<unsigned>(isa);
  info.isa_avx2 = (bits & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
  info.isa_avx512 = (bits & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  info.f16_matmul = f16_matmul_available();
  return info;
}

}  // namespace lj::cpu
