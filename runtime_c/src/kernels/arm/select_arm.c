/* The NEON variants: every build whose compiler targets NEON (aarch64 always; armv7 with
 * -mfpu=neon*) can run them, so prepare only hands over to the shared driver. */
#include "../fast/fast.h"

#if defined(__ARM_NEON)

#define OA_NEON_PREPARE(op)                                                                                   \
  oa_status_t oa_neon_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                     oa_diag_t *diag) {                                                       \
    (void)diag;                                                                                               \
    return oa_fast_##op##_prepare_isa(call, env, plan, OA_ISA_NEON);                                          \
  }

OA_NEON_PREPARE(linear)
OA_NEON_PREPARE(linear_packed)
OA_NEON_PREPARE(matmul)
OA_NEON_PREPARE(addmm)
OA_NEON_PREPARE(conv2d)
OA_NEON_PREPARE(conv2d_winograd)
OA_NEON_PREPARE(conv2d_nhwc)
OA_NEON_PREPARE(mbconv_nhwc)

#else
typedef int oa_arm_unused_t; /* ISO C: no empty translation unit */
#endif
