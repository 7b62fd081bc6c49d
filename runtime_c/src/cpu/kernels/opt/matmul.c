/* linear / linear_packed / matmul / addmm on the blocked GEMM driver (opt.h), for every ISA.
 *
 * The reference kernel's prepare has validated the call before any of these runs (kernel.h), so
 * prepare here only derives sizes, chooses a path and declines (OA_ERR_UNSUPPORTED) what it does
 * not handle (scratch that would be unreasonably large); run recomputes the same geometry from
 * the call. Numbers below: Zen3, one thread, benchmarks/micro/gemm_bench.py.
 *
 * linear (weights are constants in PyTorch's [N, K] layout):
 *   M <= 32 rows (OA_CPU_GEMV_MAX_ROWS): GEMV kernel, dot products of W rows with X rows, W read
 *   in place (2.5x faster than PyTorch on the MLP's 1-row layers).
 *   Otherwise Y = X * W^T with A = X in place and B = W^T packed on every run by the ISA's
 *   transposing packer (AVX2: 8x8 register transposes, 4x faster than the scalar one). Tried and
 *   measured: the transposed product Y^T = W * X^T (W in place, nothing of W packed) was 1.5x
 *   slower for GPT's M = 128 projections because of the transposed stores into Y.
 * linear_packed: the same product with W packed once at export into the micro-kernel's panels
 *   (exporter/pack.py; packing on every run took 15% of the GPT benchmark's time), read in place
 *   through row offsets. */
#include <string.h>

#include "threadpool.h"
#include "kernels/opt/opt.h"
#include "kernels/opt/plan.h"

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif

enum { PATH_EMPTY = 0, PATH_GEMM = 1, PATH_GEMV = 2, PATH_DIRECT = 3, PATH_IM2COL = 4, PATH_DW = 5, PATH_1X1 = 6 };

/* linear with at most this many rows uses the GEMV kernel: it reads W in place, where the GEMM
 * path packs all of W on every run; measured 1.2-1.9x faster up to 32 rows (512 x 512 and
 * 256 -> 1024 weights), about equal at 48. The exporter packs only the linears above it. */
#define GEMV_MAX_ROWS OA_CPU_GEMV_MAX_ROWS

/* ---- linear ---------------------------------------------------------------------------------- */

static void linear_dims(const oa_op_call_t *call, int64_t *m, int64_t *n, int64_t *k) {
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  *n = w->shape[0];
  *k = w->shape[1];
  *m = *k ? x->numel / *k : (*n ? out->numel / *n : 0);
}

/* plan->params M, N, K of linear / linear_packed; 1 (and PATH_EMPTY) when the output is empty */
static int linear_plan_dims(oa_op_plan_t *plan, int64_t m, int64_t n, int64_t k) {
  plan->params[F_M] = m;
  plan->params[F_N] = n;
  plan->params[F_K] = k;
  if (m != 0 && n != 0) return 0;
  plan->params[F_PATH] = PATH_EMPTY;
  return 1;
}

static oa_status_t oa_opt_linear_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  int64_t m, n, k;
  linear_dims(call, &m, &n, &k);
  if (linear_plan_dims(plan, m, n, k)) return OA_OK;
  if (m <= GEMV_MAX_ROWS) {
    plan->params[F_PATH] = PATH_GEMV;
    return OA_OK;
  }
  oa_gemm_blocking_t blk;
  oa_gemm_plan(oa_opt_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_opt_set_scratch(plan, blk.scratch_floats);
}

typedef struct gemv_ctx {
  const oa_opt_isa_t *isa;
  int64_t m, n, k;
  const float *x, *w, *bias;
  float *y;
  oa_uk_epi_t epi;
} gemv_ctx_t;

static void gemv_rows(void *ctx, int64_t j0, int64_t j1) {
  const gemv_ctx_t *g = (const gemv_ctx_t *)ctx;
  g->isa->gemv(g->m, j1 - j0, g->k, g->x, g->k, g->w + j0 * g->k, g->bias ? g->bias + j0 : NULL, g->y + j0, g->n,
               &g->epi);
}

oa_status_t oa_opt_linear_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K];
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *b = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_opt_epi_of(call, call->n_ints > OA_ARG_LINEAR_ACT ? call->ints[OA_ARG_LINEAR_ACT] : 0);
  if (plan->params[F_PATH] == PATH_GEMV) {
    gemv_ctx_t g = {isa, m, n, k, x, w, b, y, epi};
    int64_t work = m * (k + 1), grain = work >= 16384 ? 4 : (16384 / work + 4) / 4 * 4;
    oa_parallel_for(env->pool, n, grain, gemv_rows, &g);
  } else if (plan->params[F_PATH] == PATH_GEMM) {
    /* Y = X * W^T: A = X in place, B = W^T packed (transposed packer), bias per column */
    oa_gemm_blocking_t blk;
    oa_gemm_plan(isa, m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
    oa_pack_dense_t pd = {w, k};
    oa_gemm_args_t g = {.m = m, .n = n, .k = k, .a = x, .lda = k, .pack = isa->pack_t, .pack_ctx = &pd, .c = y,
                        .rs_c = n, .cs_c = 1, .bias_col = b, .act = epi.act, .lo = epi.lo, .hi = epi.hi};
    oa_gemm_run(isa, &blk, &g, (float *)scratch, env->pool);
  }
  return OA_OK;
}

/* ---- linear_packed --------------------------------------------------------------------------- */

/* linear with W packed at export into panels of `block` output features ([ceil(N / block), K,
 * block]): one GEMM, A = X in place, B = the panels read in place (what conv2d_nhwc's 1x1 does).
 * `linear` packs W^T on every run; on GPT's 128-token linears that packing took 15% of the time. */
static oa_status_t oa_opt_linear_packed_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_tensor_t *w = call->inputs[1], *out = call->outputs[0];
  const int64_t n = out->shape[out->ndim - 1], k = w->shape[1], block = call->ints[OA_ARG_LINEAR_PACKED_BLOCK];
  const int64_t m = n ? out->numel / n : 0;
  if (linear_plan_dims(plan, m, n, k)) return OA_OK;
  if (block % oa_opt_isa(isa)->pw) return OA_ERR_UNSUPPORTED; /* panels narrower than PW */
  oa_gemm_blocking_t blk;
  oa_gemm_plan(oa_opt_isa(isa), m, n, k, k, 1, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_opt_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(k), blk.scratch_floats));
}

oa_status_t oa_opt_linear_packed_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                      const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K], block = call->ints[OA_ARG_LINEAR_PACKED_BLOCK];
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const oa_uk_epi_t epi = oa_opt_epi_of(call, call->ints[OA_ARG_LINEAR_PACKED_ACT]);
  float *gemm_scratch = oa_row_offsets(scratch, k, block);
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, m, n, k, k, 1, (int32_t)plan->params[F_THREADS], &blk);
  oa_gemm_args_t g = {.m = m, .n = n, .k = k, .a = (const float *)call->inputs[0]->data, .lda = k,
                      .b = (const float *)call->inputs[1]->data, .boff = (const int64_t *)scratch, .bblock = block,
                      .c = (float *)call->outputs[0]->data, .rs_c = n, .cs_c = 1,
                      .bias_col = tb ? (const float *)tb->data : NULL, .act = epi.act, .lo = epi.lo, .hi = epi.hi};
  oa_gemm_run(isa, &blk, &g, gemm_scratch, env->pool);
  return OA_OK;
}


/* ---- matmul ---------------------------------------------------------------------------------- */

static oa_status_t oa_opt_matmul_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *out = call->outputs[0];
  const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  plan->params[F_M] = m;
  plan->params[F_N] = n;
  plan->params[F_K] = k;
  if (out->numel == 0) {
    plan->params[F_PATH] = PATH_EMPTY;
    return OA_OK;
  }
  /* one GEMM per batch, or one with batch * M rows when B is shared (see run): plan the larger */
  const int64_t rows = a->numel / (m * k > 0 ? m * k : 1) * m;
  oa_gemm_blocking_t b1, b2;
  oa_gemm_plan(oa_opt_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &b1);
  oa_gemm_plan(oa_opt_isa(isa), rows > m ? rows : m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &b2);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_opt_set_scratch(plan, b1.scratch_floats > b2.scratch_floats ? b1.scratch_floats : b2.scratch_floats);
}

oa_status_t oa_opt_matmul_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  const oa_tensor_t *ta = call->inputs[0], *tb = call->inputs[1], *to = call->outputs[0];
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K];
  const int32_t nb = to->ndim - 2;
  /* batch strides in matrices of each operand (0 on broadcast dims), as the reference kernel */
  int64_t sa[OA_MAX_DIMS] = {0}, sb[OA_MAX_DIMS] = {0}, batch = 1, ra = 1, rb = 1;
  int b_shared = 1;
  for (int32_t d = nb - 1; d >= 0; d--) {
    int32_t da = d - (to->ndim - ta->ndim), db = d - (to->ndim - tb->ndim);
    int64_t na = da >= 0 ? ta->shape[da] : 1, nbb = db >= 0 ? tb->shape[db] : 1;
    sa[d] = na == 1 ? 0 : ra;
    sb[d] = nbb == 1 ? 0 : rb;
    if (sb[d] && to->shape[d] > 1) b_shared = 0;
    ra *= na;
    rb *= nbb;
    batch *= to->shape[d];
  }
  const float *a = (const float *)ta->data, *b = (const float *)tb->data;
  float *c = (float *)to->data;
  oa_gemm_blocking_t blk;
  if (b_shared && ra == batch) {
    /* [batch, M, K] x [K, N]: one GEMM with batch * M rows (A's batches are contiguous) */
    oa_gemm_plan(isa, batch * m, n, k, k, 0, threads, &blk);
    oa_pack_dense_t pd = {b, n};
    oa_gemm_args_t g = {.m = batch * m, .n = n, .k = k, .a = a, .lda = k, .pack = oa_pack_rowmajor, .pack_ctx = &pd,
                        .c = c, .rs_c = n, .cs_c = 1};
    oa_gemm_run(isa, &blk, &g, (float *)scratch, env->pool);
    return OA_OK;
  }
  oa_gemm_plan(isa, m, n, k, k, 0, threads, &blk);
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, to->shape, nb, 2, sa, sb, NULL);
  for (int64_t i = 0; i < batch; i++) {
    oa_pack_dense_t pd = {b + it.off[1] * k * n, n};
    oa_gemm_args_t g = {.m = m, .n = n, .k = k, .a = a + it.off[0] * m * k, .lda = k, .pack = oa_pack_rowmajor,
                        .pack_ctx = &pd, .c = c + i * m * n, .rs_c = n, .cs_c = 1};
    oa_gemm_run(isa, &blk, &g, (float *)scratch, env->pool);
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}

/* ---- addmm ----------------------------------------------------------------------------------- */

static oa_status_t oa_opt_addmm_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_tensor_t *a = call->inputs[1], *b = call->inputs[2];
  const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  plan->params[F_M] = m;
  plan->params[F_N] = n;
  plan->params[F_K] = k;
  if (m == 0 || n == 0) {
    plan->params[F_PATH] = PATH_EMPTY;
    return OA_OK;
  }
  oa_gemm_blocking_t blk;
  oa_gemm_plan(oa_opt_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_opt_set_scratch(plan, blk.scratch_floats);
}

oa_status_t oa_opt_addmm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K];
  const oa_tensor_t *tbias = call->inputs[0];
  float *c = (float *)call->outputs[0]->data;
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
  oa_pack_dense_t pd = {(const float *)call->inputs[2]->data, n};
  oa_gemm_args_t g = {.m = m, .n = n, .k = k, .a = (const float *)call->inputs[1]->data, .lda = k,
                      .pack = oa_pack_rowmajor, .pack_ctx = &pd, .c = c, .rs_c = n, .cs_c = 1};
  oa_gemm_run(isa, &blk, &g, (float *)scratch, env->pool);
  /* out = alpha * (A @ B) + beta * bias; with beta == 0 the bias is ignored (as PyTorch) */
  const float beta = (float)call->floats[OA_ARG_ADDMM_BETA], alpha = (float)call->floats[OA_ARG_ADDMM_ALPHA];
  if (beta != 0.0f) {
    int64_t want[2] = {m, n}, bs[2] = {0, 0};
    (void)oa_broadcast_strides(call, tbias, want, 2, bs, "input 0 (bias)", NULL); /* validated in prepare */
    const float *bias = (const float *)tbias->data;
    for (int64_t i = 0; i < m; i++) {
      float *ci = c + i * n;
      const float *bi = bias + i * bs[0];
      if (alpha == 1.0f && beta == 1.0f) {
        for (int64_t j = 0; j < n; j++) ci[j] += bi[j * bs[1]];
      } else {
        for (int64_t j = 0; j < n; j++) ci[j] = alpha * ci[j] + beta * bi[j * bs[1]];
      }
    }
  } else if (alpha != 1.0f) {
    for (int64_t i = 0; i < m * n; i++) c[i] *= alpha;
  }
  return OA_OK;
}

/* ---- registration: one kernel per op, the ISA picked at prepare (isa.h) ------------------------ */

OA_OPT_SHARED(linear, OA_DT_F32)
OA_OPT_SHARED(linear_packed, OA_DT_F32)
OA_OPT_SHARED(matmul, OA_DT_F32)
OA_OPT_SHARED(addmm, OA_DT_F32)
