/* Helpers shared by the prepare/run pairs of the GEMM-family optimized kernels (opt/matmul.c,
 * opt/conv.c, opt/winograd.c, opt/mbconv.c): size arithmetic that saturates instead of overflowing, the scratch request,
 * and the common head of plan->params. Files are untrusted: every size a kernel asks for is
 * computed with these and capped at MAX_SCRATCH_FLOATS (past it the variant declines and the
 * reference kernel runs). */
#ifndef OA_KERNELS_OPT_PLAN_H
#define OA_KERNELS_OPT_PLAN_H

#include <stdint.h>
#include <string.h>

#include "kernels/opt/opt.h"

/* scratch an optimized kernel may ask for before it declines (the reference kernel then runs) */
#define MAX_SCRATCH_FLOATS ((int64_t)1 << 26)

/* plan->params of the GEMM-based variants: F_ISA .. F_THREADS set by oa_opt_begin */
enum { F_ISA, F_PATH, F_THREADS, F_M, F_N, F_K };

static inline int64_t oa_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t oa_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t oa_max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* a * b and a + b for non-negative operands, or -1 past MAX_SCRATCH_FLOATS (or when an operand is -1) */
static inline int64_t oa_cap_mul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (a && b > MAX_SCRATCH_FLOATS / a) return -1;
  return a * b;
}
static inline int64_t oa_cap_add(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || a > MAX_SCRATCH_FLOATS - b) return -1;
  return a + b;
}
/* floats rounded up to 64 bytes (-1 stays -1) */
static inline int64_t oa_round16(int64_t f) { return f < 0 ? -1 : (f + 15) / 16 * 16; }

/* The row-offset table of a B read in place (oa_gemm_args_t.boff: row p at p * stride floats;
 * pre-packed weight panels: stride = the panel width) at the start of the scratch: its size in
 * floats (k int64, 64-byte rounded), and filling it, which returns the scratch after it. */
static inline int64_t oa_row_offsets_floats(int64_t k) { return oa_round16(oa_cap_mul(k, 2)); }
static inline float *oa_row_offsets(void *scratch, int64_t k, int64_t stride) {
  int64_t *boff = (int64_t *)scratch;
  for (int64_t p = 0; p < k; p++) boff[p] = p * stride;
  return (float *)scratch + oa_row_offsets_floats(k);
}

/* plan->scratch_bytes = floats, or OA_ERR_UNSUPPORTED when unreasonable */
static inline oa_status_t oa_opt_set_scratch(oa_op_plan_t *plan, int64_t floats) {
  if (floats < 0 || floats > MAX_SCRATCH_FLOATS || (uint64_t)floats > (SIZE_MAX - 64) / sizeof(float))
    return OA_ERR_UNSUPPORTED;
  plan->scratch_bytes = (size_t)floats * sizeof(float);
  return OA_OK;
}

/* Start a plan for ISA `isa` (OA_ERR_UNSUPPORTED when this build does not have it). */
static inline oa_status_t oa_opt_begin(oa_op_plan_t *plan, const oa_kernel_env_t *env, int32_t isa) {
  if (!oa_opt_isa(isa)) return OA_ERR_UNSUPPORTED;
  memset(plan->params, 0, sizeof plan->params);
  plan->scratch_bytes = 0;
  plan->params[F_ISA] = isa;
  plan->params[F_THREADS] = env ? oa_opt_threads(env->pool) : 1;
  return OA_OK;
}

static inline const oa_opt_isa_t *oa_opt_isa_of(const oa_op_plan_t *plan) {
  return oa_opt_isa((int32_t)plan->params[F_ISA]);
}

/* The fused activation of a linear / linear_packed / conv2d / conv2d_nhwc call: act_min and
 * act_max are at the same float positions in each (checked here, so a layout change in opset.py
 * breaks the build, not the numerics). */
_Static_assert(OA_ARG_LINEAR_ACT_MIN == OA_ARG_CONV2D_ACT_MIN && OA_ARG_LINEAR_ACT_MAX == OA_ARG_CONV2D_ACT_MAX &&
                   OA_ARG_LINEAR_PACKED_ACT_MIN == OA_ARG_CONV2D_ACT_MIN &&
                   OA_ARG_LINEAR_PACKED_ACT_MAX == OA_ARG_CONV2D_ACT_MAX &&
                   OA_ARG_CONV2D_NHWC_ACT_MIN == OA_ARG_CONV2D_ACT_MIN &&
                   OA_ARG_CONV2D_NHWC_ACT_MAX == OA_ARG_CONV2D_ACT_MAX,
               "act_min / act_max moved in one of the GEMM-family ops");
static inline oa_uk_epi_t oa_opt_epi_of(const oa_op_call_t *call, int64_t act) {
  oa_uk_epi_t e;
  e.bias = NULL;
  e.bias_col = NULL;
  e.act = (int32_t)act;
  e.lo = call->n_floats > OA_ARG_CONV2D_ACT_MIN ? (float)call->floats[OA_ARG_CONV2D_ACT_MIN] : 0.0f;
  e.hi = call->n_floats > OA_ARG_CONV2D_ACT_MAX ? (float)call->floats[OA_ARG_CONV2D_ACT_MAX] : 0.0f;
  return e;
}

#endif /* OA_KERNELS_OPT_PLAN_H */
