/* Which ISAs this build and this CPU have, and the pick of an optimized kernel's variant (isa.h). */
#include "isa.h"

#include <string.h>

uint32_t oa_isa_built(void) {
  uint32_t b = OA_CPU_ISA_PORTABLE;
#if defined(OA_BUILT_AVX2)
  b |= OA_CPU_ISA_AVX2;
#endif
#if defined(OA_BUILT_NEON)
  b |= OA_CPU_ISA_NEON;
#endif
#if defined(OA_BUILT_AVX512)
  b |= OA_CPU_ISA_AVX512;
#endif
#if defined(OA_BUILT_RVV)
  b |= OA_CPU_ISA_RVV;
#endif
#if defined(OA_BUILT_AVX512_VNNI) || defined(OA_BUILT_AVX_VNNI)
  b |= OA_CPU_ISA_VNNI;
#endif
#if defined(OA_BUILT_AMX)
  b |= OA_CPU_ISA_AMX;
#endif
  return b;
}

uint32_t oa_isa_detected(const oa_cpu_features_t *f) {
  uint32_t d = OA_CPU_ISA_PORTABLE;
  if (!f) return d;
  if (f->avx2 && f->fma) d |= OA_CPU_ISA_AVX2;
  if (f->neon) d |= OA_CPU_ISA_NEON;
  if (f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->fma) d |= OA_CPU_ISA_AVX512;
  if (f->rvv) d |= OA_CPU_ISA_RVV;
  if (f->avx512_vnni || f->avx_vnni) d |= OA_CPU_ISA_VNNI;
  if (f->amx_tile && f->amx_int8 && f->avx512_vnni) d |= OA_CPU_ISA_AMX; /* the OS permission: features.c */
  return d;
}

const char *oa_isa_name(int32_t id) {
  switch (id) {
    case OA_ISA_PORTABLE: return "portable";
    case OA_ISA_AVX2: return "avx2";
    case OA_ISA_NEON: return "neon";
    case OA_ISA_AVX512: return "avx512";
    case OA_ISA_RVV: return "rvv";
    default: return NULL;
  }
}

oa_status_t oa_isa_pick(const oa_kernel_t *variants, oa_isa_prepare_fn prepare_isa, const oa_op_call_t *call,
                        const oa_kernel_env_t *env, oa_op_plan_t *plan) {
  static const int32_t order[] = OA_ISA_PRIORITY;
  const uint32_t usable = env ? env->isas : 0u;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    const int32_t id = order[i];
    const oa_kernel_t *v = &variants[id];
    if (!(usable & OA_ISA_BIT(id)) || !v->run || (!prepare_isa && !v->prepare)) continue;
    memset(plan, 0, sizeof *plan);
    const oa_status_t st = prepare_isa ? prepare_isa(call, env, plan, id) : v->prepare(call, env, plan, NULL);
    if (st == OA_OK) {
      plan->kernel = v;
      return OA_OK;
    }
  }
  memset(plan, 0, sizeof *plan);
  return OA_ERR_UNSUPPORTED;
}
