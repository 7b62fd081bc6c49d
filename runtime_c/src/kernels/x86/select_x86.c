/* The AVX2+FMA variants: chosen when the CPU reports avx2 and fma (a baseline x86-64 build runs
 * everywhere and still uses them where they exist). This file is compiled with the target's
 * normal flags; the kernels it hands over to (x86/..._avx2.c) are the only code built with
 * -mavx2 -mfma, and run only after this check. */
#include "../fast/fast.h"

#if defined(__x86_64__)

static int has_avx2(const oa_kernel_env_t *env) {
#if defined(OA_HAVE_AVX2_KERNELS)
  return env && env->features && env->features->avx2 && env->features->fma;
#else
  (void)env;
  return 0; /* this compiler build has no AVX2 kernels */
#endif
}

#define OA_AVX2_PREPARE(op)                                                                                   \
  oa_status_t oa_avx2_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                     oa_diag_t *diag) {                                                       \
    (void)diag;                                                                                               \
    if (!has_avx2(env)) return OA_ERR_UNSUPPORTED;                                                            \
    return oa_fast_##op##_prepare_isa(call, env, plan, OA_ISA_AVX2);                                          \
  }

OA_AVX2_PREPARE(linear)
OA_AVX2_PREPARE(linear_packed)
OA_AVX2_PREPARE(matmul)
OA_AVX2_PREPARE(addmm)
OA_AVX2_PREPARE(conv2d)
OA_AVX2_PREPARE(conv2d_winograd)
OA_AVX2_PREPARE(conv2d_nhwc)
OA_AVX2_PREPARE(mbconv_nhwc)

#else
typedef int oa_x86_unused_t; /* ISO C: no empty translation unit */
#endif
