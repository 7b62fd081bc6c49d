/* permute of 4-byte elements when it is a batched 2-D transpose: dims = [0 .. b-1] followed by a
 * rotation [k .. r-1, b .. k-1], i.e. [B, R1, R2] -> [B, R2, R1] (NCHW <-> NHWC at the edges of
 * a channels-last convolution stack, exporter/layout.py; the last two dims of a matrix). The
 * reference kernel walks the output with one strided read per element: 0.44 ms for MobileNetV2's
 * 3 x 224 x 224 input to NHWC; 32 x 32 tiles, so both sides touch whole cache lines, took 0.19
 * ms and the three-channel special case 0.10 ms; inside a tile, 8 x 8 blocks (block8). Other
 * permutations decline (the reference kernel runs). */
#include "threadpool.h"
#include "kernels/isa.h"
#include "kernels/kernel.h"

#define TILE 32

enum { T_B, T_R1, T_R2 };

/* the same code for every ISA: registered as the portable variant */
static oa_status_t permute_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  (void)env;
  (void)isa;
  const oa_tensor_t *x = call->inputs[0];
  const int32_t r = x->ndim;
  if (oa_dtype_size(x->dtype) != 4 || r < 2) return OA_ERR_UNSUPPORTED;
  int32_t b = 0;
  while (b < r && call->ints[b] == b) b++;
  if (b >= r - 1) return OA_ERR_UNSUPPORTED; /* identity: nothing to transpose */
  const int32_t k = (int32_t)call->ints[b]; /* the first input dim the output starts with */
  for (int32_t i = b; i < r; i++) {
    const int64_t want = i - b < r - k ? k + (i - b) : b + (i - b) - (r - k);
    if (call->ints[i] != want) return OA_ERR_UNSUPPORTED;
  }
  int64_t nb = 1, r1 = 1, r2 = 1;
  for (int32_t i = 0; i < b; i++) nb *= x->shape[i];
  for (int32_t i = b; i < k; i++) r1 *= x->shape[i];
  for (int32_t i = k; i < r; i++) r2 *= x->shape[i];
  plan->params[T_B] = nb;
  plan->params[T_R1] = r1;
  plan->params[T_R2] = r2;
  plan->scratch_bytes = 0;
  return OA_OK;
}

typedef struct transpose_job {
  const uint32_t *x;
  uint32_t *y;
  int64_t r1, r2, tiles_r1; /* tasks: (batch, tile row of R1) */
} transpose_job_t;

/* An 8 x 8 block: all 64 reads (8 rows of 8 contiguous elements) before any write. Element by
 * element (one read, one write), a 112 x 112 x 32 NHWC -> NCHW permute took 0.84 ms, in blocks
 * 0.50 ms (likely 4 KB aliasing: its output rows are 49 KB apart, 1 KB modulo 4 KB, and every
 * read of the contiguous 4 KB input tile shares its low 12 address bits with a recent store). */
static inline void block8(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy) {
  uint32_t t[8][8];
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) t[b][a] = x[a * ldx + b];
  for (int b = 0; b < 8; b++)
    for (int a = 0; a < 8; a++) y[b * ldy + a] = t[b][a];
}

static void transpose_rows(void *ctx, int64_t t0, int64_t t1) {
  const transpose_job_t *j = (const transpose_job_t *)ctx;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t bi = t / j->tiles_r1, i0 = t % j->tiles_r1 * TILE;
    const int64_t i1 = i0 + TILE < j->r1 ? i0 + TILE : j->r1;
    const uint32_t *x = j->x + bi * j->r1 * j->r2;
    uint32_t *y = j->y + bi * j->r1 * j->r2;
    if (j->r1 == 3) { /* an RGB image to NHWC (a network's input): one pass, three read streams */
      const uint32_t *x0 = x, *x1 = x + j->r2, *x2 = x + 2 * j->r2;
      for (int64_t c = 0; c < j->r2; c++) {
        y[3 * c] = x0[c];
        y[3 * c + 1] = x1[c];
        y[3 * c + 2] = x2[c];
      }
      continue;
    }
    for (int64_t c0 = 0; c0 < j->r2; c0 += TILE) {
      const int64_t c1 = c0 + TILE < j->r2 ? c0 + TILE : j->r2;
      int64_t i = i0;
      for (; i + 8 <= i1; i += 8) {
        int64_t c = c0;
        for (; c + 8 <= c1; c += 8) block8(x + i * j->r2 + c, j->r2, y + c * j->r1 + i, j->r1);
        for (; c < c1; c++)
          for (int64_t a = 0; a < 8; a++) y[c * j->r1 + i + a] = x[(i + a) * j->r2 + c];
      }
      for (int64_t c = c0; c < c1; c++)
        for (int64_t a = i; a < i1; a++) y[c * j->r1 + a] = x[a * j->r2 + c];
    }
  }
}

oa_status_t oa_opt_permute_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  transpose_job_t j = {(const uint32_t *)call->inputs[0]->data, (uint32_t *)call->outputs[0]->data,
                       plan->params[T_R1], plan->params[T_R2], (plan->params[T_R1] + TILE - 1) / TILE};
  if (j.r1 == 0 || j.r2 == 0) return OA_OK;
  oa_parallel_for(env ? env->pool : NULL, plan->params[T_B] * j.tiles_r1, 1, transpose_rows, &j);
  return OA_OK;
}

oa_status_t oa_opt_permute_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag);
static const oa_kernel_t permute_variants[OA_ISA_COUNT] = {
    {"permute", "portable", OA_DT_F32 | OA_DT_I32, oa_opt_permute_prepare, oa_opt_permute_run},
    {"permute", "avx2", 0, NULL, NULL},
    {"permute", "neon", 0, NULL, NULL},
};

oa_status_t oa_opt_permute_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)diag;
  return oa_isa_pick(permute_variants, permute_prepare_isa, call, env, plan);
}
