/* The instruction sets of the optimized kernels, and how an optimized kernel picks one.
 *
 * An ISA id is the bit index of its OA_CPU_ISA_* flag (openaccel/cpu.h). The device resolves once
 * which ISAs its kernels may use (built into this binary, reported by the CPU, not disabled by
 * oa_cpu_options_t.disable_isas) and passes that set down in oa_kernel_env_t.isas. An optimized
 * kernel is registered once in kernels.def (variant "opt"); its prepare walks OA_ISA_PRIORITY and
 * takes the first ISA that is in env->isas, that the kernel has, and whose prepare accepts the
 * call; the plan then points at that ISA's variant (oa_kernel_t.variant = the ISA's name), so
 * execute calls the chosen run directly and tools can tell which ISA ran.
 *
 * Adding an ISA (AVX-512, RVV): an id and bit here and in cpu.h, its place in OA_ISA_PRIORITY, a
 * line in oa_isa_built / oa_isa_detected (isa.c), its back-end under arch/, and its OA_IF_<ISA>. */
#ifndef OA_KERNELS_ISA_H
#define OA_KERNELS_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "kernel.h"

enum { OA_ISA_PORTABLE = 0, OA_ISA_AVX2 = 1, OA_ISA_NEON = 2, OA_ISA_AVX512 = 3, OA_ISA_RVV = 4, OA_ISA_COUNT = 5 };
#define OA_ISA_BIT(id) (1u << (id))

/* best first */
#define OA_ISA_PRIORITY {OA_ISA_AVX512, OA_ISA_AVX2, OA_ISA_NEON, OA_ISA_RVV, OA_ISA_PORTABLE}

/* this build has the ISA's kernels: x86-64 builds with the AVX2 back-end (OA_SIMD_AVX2, the
 * default), NEON builds (aarch64, armv7 with -mfpu=neon*); the portable ones everywhere */
#if defined(__x86_64__) && defined(OA_HAVE_AVX2)
#define OA_BUILT_AVX2 1
#define OA_IF_AVX2(x) x
#else
#define OA_IF_AVX2(x) NULL
#endif
#if defined(__x86_64__) && defined(OA_HAVE_AVX512)
#define OA_BUILT_AVX512 1
#define OA_IF_AVX512(x) x
#else
#define OA_IF_AVX512(x) NULL
#endif
/* the VNNI int8 tiles (OA_CPU_ISA_VNNI: an option of the AVX-512 / AVX2 ISAs, not an id), built
 * when the compiler takes -mavx512vnni / -mavxvnni */
#if defined(OA_BUILT_AVX512) && defined(OA_HAVE_AVX512_VNNI)
#define OA_BUILT_AVX512_VNNI 1
#endif
#if defined(OA_BUILT_AVX2) && defined(OA_HAVE_AVX_VNNI)
#define OA_BUILT_AVX_VNNI 1
#endif
/* the AMX int8 tiles (OA_CPU_ISA_AMX: another option of the AVX-512 ISA), built when the compiler
 * takes -mamx-tile -mamx-int8 (and the VNNI file is built: the AMX table shares its packer and GEMV) */
#if defined(OA_BUILT_AVX512_VNNI) && defined(OA_HAVE_AMX)
#define OA_BUILT_AMX 1
#endif
#if defined(__riscv) && defined(OA_HAVE_RVV)
#define OA_BUILT_RVV 1
#define OA_IF_RVV(x) x
#else
#define OA_IF_RVV(x) NULL
#endif
#if defined(__ARM_NEON)
#define OA_BUILT_NEON 1
#define OA_IF_NEON(x) x
#else
#define OA_IF_NEON(x) NULL
#endif

/* OA_CPU_ISA_* bits of the ISAs this build has / this CPU can run (built or not). */
uint32_t oa_isa_built(void);
uint32_t oa_isa_detected(const oa_cpu_features_t *features);
/* "portable", "avx2", "neon", "avx512", "rvv"; NULL for an unknown id */
const char *oa_isa_name(int32_t id);

/* Prepare for one ISA id (the GEMM-family kernels share one prepare and one run for every ISA). */
typedef oa_status_t (*oa_isa_prepare_fn)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                         int32_t isa);

/* Pick the variant of an optimized kernel: variants[id] (run NULL: the kernel has no such ISA in
 * this build) for the first id of OA_ISA_PRIORITY in env->isas whose prepare accepts the call:
 * prepare_isa(call, env, plan, id) when given, else variants[id].prepare. On OA_OK plan->kernel
 * is &variants[id]; OA_ERR_UNSUPPORTED when no ISA takes the call (the reference kernel runs). */
oa_status_t oa_isa_pick(const oa_kernel_t *variants, oa_isa_prepare_fn prepare_isa, const oa_op_call_t *call,
                        const oa_kernel_env_t *env, oa_op_plan_t *plan);

/* The run of an "opt" kernel whose ISAs have their own runs: the variant prepare chose. */
static inline oa_status_t oa_isa_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {
  return ((const oa_kernel_t *)plan->kernel)->run(call, plan, scratch, env, diag);
}

/* ---- registration helpers for opt/<family>.c ------------------------------------------------ */

/* Variant tables: OA_ISA_YES(x) is x, OA_ISA_NO(x) is NULL (the kernel has no such variant). */
#define OA_ISA_YES(x) x
#define OA_ISA_NO(x) NULL

/* A kernel with one prepare_isa and one run for every ISA (the GEMM family: the ISA is a
 * micro-kernel table, opt.h): given oa_opt_<op>_prepare_isa and oa_opt_<op>_run, defines
 * oa_opt_<op>_prepare. AVX2 and NEON where built, and portable C. */
#define OA_OPT_SHARED(op, dtypes)                                                                               \
  oa_status_t oa_opt_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,  \
                                    oa_diag_t *diag);                                                          \
  static const oa_kernel_t op##_variants[OA_ISA_COUNT] = {                                                     \
      {#op, "portable", dtypes, oa_opt_##op##_prepare, oa_opt_##op##_run},                                     \
      {#op, "avx2", dtypes, oa_opt_##op##_prepare, OA_IF_AVX2(oa_opt_##op##_run)},                             \
      {#op, "neon", dtypes, oa_opt_##op##_prepare, OA_IF_NEON(oa_opt_##op##_run)},                             \
      {#op, "avx512", dtypes, oa_opt_##op##_prepare, OA_IF_AVX512(oa_opt_##op##_run)},                         \
      {#op, "rvv", dtypes, oa_opt_##op##_prepare, OA_IF_RVV(oa_opt_##op##_run)},                               \
  };                                                                                                           \
  oa_status_t oa_opt_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,  \
                                    oa_diag_t *diag) {                                                         \
    (void)diag;                                                                                                \
    return oa_isa_pick(op##_variants, oa_opt_##op##_prepare_isa, call, env, plan);                            \
  }

/* A SIMD-family kernel (opt/simd_kernels.inc compiled once per ISA under arch/, functions
 * oa_simd_<isa>_<op>_prepare / _run): declares those, defines oa_opt_<op>_prepare and _run.
 * PORTABLE: OA_ISA_YES where the portable C variant beats the reference kernel, else OA_ISA_NO. */
#define OA_SIMD_DECL_(isa, op)                                                                                  \
  oa_status_t oa_simd_##isa##_##op##_prepare(const oa_op_call_t *, const oa_kernel_env_t *, oa_op_plan_t *,    \
                                             oa_diag_t *);                                                     \
  oa_status_t oa_simd_##isa##_##op##_run(const oa_op_call_t *, const oa_op_plan_t *, void *,                   \
                                         const oa_kernel_env_t *, oa_diag_t *);
#define OA_OPT_SIMD(op, PORTABLE)                                                                               \
  OA_SIMD_DECL_(portable, op)                                                                                  \
  OA_SIMD_DECL_(avx2, op)                                                                                      \
  OA_SIMD_DECL_(neon, op)                                                                                      \
  OA_SIMD_DECL_(avx512, op)                                                                                    \
  OA_SIMD_DECL_(rvv, op)                                                                                       \
  static const oa_kernel_t op##_variants[OA_ISA_COUNT] = {                                                     \
      {#op, "portable", OA_DT_F32, PORTABLE(oa_simd_portable_##op##_prepare), PORTABLE(oa_simd_portable_##op##_run)}, \
      {#op, "avx2", OA_DT_F32, OA_IF_AVX2(oa_simd_avx2_##op##_prepare), OA_IF_AVX2(oa_simd_avx2_##op##_run)},  \
      {#op, "neon", OA_DT_F32, OA_IF_NEON(oa_simd_neon_##op##_prepare), OA_IF_NEON(oa_simd_neon_##op##_run)},  \
      {#op, "avx512", OA_DT_F32, OA_IF_AVX512(oa_simd_avx512_##op##_prepare),                                   \
       OA_IF_AVX512(oa_simd_avx512_##op##_run)},                                                               \
      {#op, "rvv", OA_DT_F32, OA_IF_RVV(oa_simd_rvv_##op##_prepare), OA_IF_RVV(oa_simd_rvv_##op##_run)},        \
  };                                                                                                           \
  oa_status_t oa_opt_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,  \
                                    oa_diag_t *diag) {                                                         \
    (void)diag;                                                                                                \
    return oa_isa_pick(op##_variants, NULL, call, env, plan);                                                  \
  }                                                                                                            \
  oa_status_t oa_opt_##op##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,             \
                                const oa_kernel_env_t *env, oa_diag_t *diag) {                                 \
    return oa_isa_run(call, plan, scratch, env, diag);                                                         \
  }

#endif /* OA_KERNELS_ISA_H */
