/* linear / matmul / addmm / conv2d on the blocked GEMM driver (fast.h), for every ISA.
 *
 * The reference kernel's prepare has validated the call before any of these runs (kernel.h), so
 * prepare here only derives sizes, chooses a path and declines (OA_ERR_UNSUPPORTED) what it does
 * not handle (scratch that would be unreasonably large); run recomputes the same geometry from
 * the call. Numbers below: Zen3, one thread, benchmarks/micro/gemm_bench.py.
 *
 * linear (weights are constants in PyTorch's [N, K] layout):
 *   M <= 32 rows: GEMV kernel, dot products of W rows with X rows, W read in place (2.5x faster
 *   than PyTorch on the MLP's 1-row layers).
 *   Otherwise Y = X * W^T with A = X in place and B = W^T packed on every run by the ISA's
 *   transposing packer (AVX2: 8x8 register transposes, 4x faster than the scalar one). Tried and
 *   measured: the transposed product Y^T = W * X^T (W in place, nothing of W packed) was 1.5x
 *   slower for GPT's M = 128 projections because of the transposed stores into Y; packing W costs
 *   about 5% of these products, so pre-packing W at export (a format change) was not done.
 *
 * conv2d (NCHW): out[co, p] = W[co, (ci, kh, kw)] * col[(ci, kh, kw), p], the weights the
 * in-place A operand, no im2col matrix:
 *   - 1x1, stride 1, no padding: B = the input planes [C, H * W], packed.
 *   - strides up to 8: the input is copied once into zero-padded, stride-phase-split planes
 *     (conv_direct below) so that B row (ci, kh, kw) is a contiguous run of a plane at offset
 *     boff[k] for consecutive "virtual" pixels oh * wph + ow; the micro-kernel reads B in place
 *     through boff (DIRECT mode) and the wph - ow extra columns per row are dropped after (on
 *     ResNet-18's 3x3 layers this replaced packing im2col panels, which cost up to a third of
 *     the time with 64 output channels).
 *   - larger strides: im2col panels packed straight from the input rows (pack_im2col).
 *   Groups run one GEMM each. Depthwise convs (one input channel per group) have their own
 *   kernel (dwconv_tmpl.inc) on a zero-padded copy of each plane. */
#include <string.h>

#include "../../cpu/threadpool.h"
#include "fast.h"
#include "fast_plan.h"

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif

enum { PATH_EMPTY = 0, PATH_GEMM = 1, PATH_GEMV = 2, PATH_DIRECT = 3, PATH_IM2COL = 4, PATH_DW = 5, PATH_1X1 = 6 };

/* linear with at most this many rows uses the GEMV kernel: it reads W in place, where the GEMM
 * path packs all of W on every run; measured 1.2-1.9x faster up to 32 rows (512 x 512 and
 * 256 -> 1024 weights), about equal at 48 */
#define GEMV_MAX_ROWS 32

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

oa_status_t oa_fast_linear_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
  if (st) return st;
  int64_t m, n, k;
  linear_dims(call, &m, &n, &k);
  if (linear_plan_dims(plan, m, n, k)) return OA_OK;
  if (m <= GEMV_MAX_ROWS) {
    plan->params[F_PATH] = PATH_GEMV;
    return OA_OK;
  }
  oa_gemm_blocking_t blk;
  oa_gemm_plan(oa_fast_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_fast_set_scratch(plan, blk.scratch_floats);
}

typedef struct gemv_ctx {
  const oa_fast_isa_t *isa;
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

oa_status_t oa_fast_linear_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K];
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *b = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_fast_epi_of(call, call->n_ints > 0 ? call->ints[0] : 0);
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
oa_status_t oa_fast_linear_packed_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
  if (st) return st;
  const oa_tensor_t *w = call->inputs[1], *out = call->outputs[0];
  const int64_t n = out->shape[out->ndim - 1], k = w->shape[1], block = call->ints[1];
  const int64_t m = n ? out->numel / n : 0;
  if (linear_plan_dims(plan, m, n, k)) return OA_OK;
  if (block % oa_fast_isa(isa)->nr) return OA_ERR_UNSUPPORTED; /* panels narrower than NR */
  oa_gemm_blocking_t blk;
  oa_gemm_plan(oa_fast_isa(isa), m, n, k, k, 1, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_fast_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(k), blk.scratch_floats));
}

oa_status_t oa_fast_linear_packed_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                      const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
  const int64_t m = plan->params[F_M], n = plan->params[F_N], k = plan->params[F_K], block = call->ints[1];
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const oa_uk_epi_t epi = oa_fast_epi_of(call, call->ints[0]);
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

oa_status_t oa_portable_linear_packed_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)diag;
  return oa_fast_linear_packed_prepare_isa(call, env, plan, OA_ISA_PORTABLE);
}

/* ---- matmul ---------------------------------------------------------------------------------- */

oa_status_t oa_fast_matmul_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
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
  oa_gemm_plan(oa_fast_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &b1);
  oa_gemm_plan(oa_fast_isa(isa), rows > m ? rows : m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &b2);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_fast_set_scratch(plan, b1.scratch_floats > b2.scratch_floats ? b1.scratch_floats : b2.scratch_floats);
}

oa_status_t oa_fast_matmul_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
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

oa_status_t oa_fast_addmm_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
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
  oa_gemm_plan(oa_fast_isa(isa), m, n, k, k, 0, (int32_t)plan->params[F_THREADS], &blk);
  plan->params[F_PATH] = PATH_GEMM;
  return oa_fast_set_scratch(plan, blk.scratch_floats);
}

oa_status_t oa_fast_addmm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (plan->params[F_PATH] == PATH_EMPTY) return OA_OK;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
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
  const float beta = (float)call->floats[0], alpha = (float)call->floats[1];
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

/* ---- conv2d ---------------------------------------------------------------------------------- */

typedef struct conv_geo {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, oh, ow, cg, og, act;
  int64_t k;              /* GEMM depth: cg * kh * kw */
  int64_t hph, wph, plen; /* phase planes: ceil((h + 2 ph) / sh) x ceil((w + 2 pw) / sw), length */
  int64_t nv;             /* GEMM columns: oh * wph "virtual" pixels (columns ow .. wph - 1 unused) */
} conv_geo_t;

static void conv_geo(const oa_op_call_t *call, conv_geo_t *q) {
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  q->n = x->shape[0];
  q->c = x->shape[1];
  q->h = x->shape[2];
  q->w = x->shape[3];
  q->o = w->shape[0];
  q->kh = w->shape[2];
  q->kw = w->shape[3];
  q->sh = call->ints[0];
  q->sw = call->ints[1];
  q->ph = call->ints[2];
  q->pw = call->ints[3];
  q->dh = call->ints[4];
  q->dw = call->ints[5];
  q->g = call->ints[6];
  q->act = call->n_ints > 7 ? call->ints[7] : 0;
  q->oh = out->shape[2];
  q->ow = out->shape[3];
  q->cg = q->c / q->g;
  q->og = q->o / q->g;
  q->k = q->cg * q->kh * q->kw;
  /* (validated shapes and arguments are < 2^50 and 2^30: no overflow below) */
  q->hph = (q->h + 2 * q->ph + q->sh - 1) / q->sh;
  q->wph = (q->w + 2 * q->pw + q->sw - 1) / q->sw;
  q->plen = -1; /* set by conv_direct_floats when the sizes are reasonable */
  q->nv = q->oh * q->wph;
}

/* 1x1, stride 1, no padding: B is the input planes themselves */
static int conv_is_1x1(const conv_geo_t *q) {
  return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0;
}


/* Scratch of the direct path before the GEMM's own: [boff: k int64][phase planes][virtual output].
 * Sets q->plen; -1 when too large. */
typedef struct conv_layout {
  int64_t boff, phase, virt, gemm, total;
} conv_layout_t;

static void conv_direct_layout(conv_geo_t *q, int64_t gemm_floats, conv_layout_t *l) {
  const int64_t pl = oa_cap_mul(oa_cap_add(q->hph, 1), q->wph);
  q->plen = pl;
  l->boff = 0;
  l->phase = oa_round16(oa_cap_mul(q->k, 2));
  const int64_t phases = oa_cap_mul(oa_cap_mul(q->cg, q->sh), q->sw);
  l->virt = oa_cap_add(l->phase, oa_round16(oa_cap_mul(phases, pl)));
  l->gemm = oa_cap_add(l->virt, q->wph != q->ow ? oa_round16(oa_cap_mul(q->og, q->nv)) : 0);
  l->total = oa_cap_add(l->gemm, gemm_floats);
}
static void dw_pad_dims(const conv_geo_t *q, int32_t vw, int64_t *pad_h, int64_t *pad_w) {
  const int64_t nvec = (q->ow + vw - 1) / vw;
  *pad_w = (nvec * vw - 1) * q->sw + (q->kw - 1) * q->dw + 2;
  *pad_h = (q->oh - 1) * q->sh + (q->kh - 1) * q->dh + 1;
}

oa_status_t oa_fast_conv2d_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
  if (st) return st;
  const oa_fast_isa_t *I = oa_fast_isa(isa);
  conv_geo_t q;
  conv_geo(call, &q);
  if (call->outputs[0]->numel == 0) {
    plan->params[F_PATH] = PATH_EMPTY;
    return OA_OK;
  }
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  if (q.cg == 1 && q.g > 1) {
    int64_t ph, pw;
    dw_pad_dims(&q, I->vw, &ph, &pw);
    const int64_t planes = q.n * q.o, slots = oa_min64(threads, planes);
    plan->params[F_PATH] = PATH_DW;
    return oa_fast_set_scratch(plan, oa_cap_mul(oa_cap_mul(ph, pw), slots));
  }
  oa_gemm_blocking_t blk;
  if (conv_is_1x1(&q)) {
    /* 1x1: B = the input planes [C, H * W], packed. Read in place (DIRECT), the H * W row stride
     * put every row of a panel in its own page and in the same few L1 sets: 2.8x slower on
     * MobileNetV2's 16 -> 96 channels at 112 x 112. */
    oa_gemm_plan(I, q.og, q.oh * q.ow, q.k, q.k, 0, threads, &blk);
    plan->params[F_PATH] = PATH_1X1;
    return oa_fast_set_scratch(plan, blk.scratch_floats);
  }
  /* direct: strides up to 8 (phase planes), the input copied once with its padding */
  if (q.sh <= 8 && q.sw <= 8) {
    oa_gemm_plan(I, q.og, q.nv, q.k, q.k, 1, threads, &blk);
    conv_layout_t l;
    conv_direct_layout(&q, blk.scratch_floats, &l);
    if (l.total >= 0) {
      plan->params[F_PATH] = PATH_DIRECT;
      return oa_fast_set_scratch(plan, l.total);
    }
  }
  /* otherwise im2col panels packed from the input (small scratch) */
  oa_gemm_plan(I, q.og, q.oh * q.ow, q.k, q.k, 0, threads, &blk);
  plan->params[F_PATH] = PATH_IM2COL;
  return oa_fast_set_scratch(plan, blk.scratch_floats);
}



/* im2col straight into packed panels */
typedef struct im2col_ctx {
  const float *x; /* the group's cg input planes */
  const conv_geo_t *q;
} im2col_ctx_t;

static void pack_im2col(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  const im2col_ctx_t *ic = (const im2col_ctx_t *)ctx;
  const conv_geo_t *q = ic->q;
  const int64_t taps = q->kh * q->kw, hw = q->h * q->w;
  /* a panel's pixels as runs of one output row: (offset in panel, output row, first column, length) */
  int64_t seg[64][4];
  for (int64_t pq = 0; pq * nr < nc; pq++) {
    const int64_t jq = j0 + pq * nr, wq = oa_min64(nr, nc - pq * nr);
    float *d = dst + pq * kc * nr;
    int ns = 0;
    for (int64_t p = jq; p < jq + wq;) {
      const int64_t oh = p / q->ow, ow0 = p % q->ow, len = oa_min64(q->ow - ow0, jq + wq - p);
      seg[ns][0] = p - jq;
      seg[ns][1] = oh * q->sh - q->ph;
      seg[ns][2] = ow0 * q->sw - q->pw;
      seg[ns][3] = len;
      ns++;
      p += len;
    }
    int64_t ci = k0 / taps, r = k0 % taps, i = r / q->kw, j = r % q->kw;
    for (int64_t kk = 0; kk < kc; kk++) {
      float *row = d + kk * nr;
      const float *plane = ic->x + ci * hw;
      for (int s = 0; s < ns; s++) {
        float *o = row + seg[s][0];
        const int64_t len = seg[s][3];
        const int64_t ih = seg[s][1] + i * q->dh;
        if (ih < 0 || ih >= q->h) {
          for (int64_t t = 0; t < len; t++) o[t] = 0.0f;
          continue;
        }
        const float *src = plane + ih * q->w;
        const int64_t iw0 = seg[s][2] + j * q->dw, sw = q->sw;
        /* columns t with 0 <= iw0 + t * sw < w */
        int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
        int64_t hi = iw0 > q->w - 1 ? 0 : (q->w - 1 - iw0) / sw + 1;
        if (hi > len) hi = len;
        if (lo > hi) lo = hi;
        int64_t t = 0;
        for (; t < lo; t++) o[t] = 0.0f;
        if (sw == 1) {
          const float *sp = src + iw0;
          for (; t < hi; t++) o[t] = sp[t];
        } else {
          for (; t < hi; t++) o[t] = src[iw0 + t * sw];
        }
        for (; t < len; t++) o[t] = 0.0f;
      }
      for (int64_t t = wq; t < nr; t++) row[t] = 0.0f;
      if (++j == q->kw) {
        j = 0;
        if (++i == q->kh) {
          i = 0;
          ci++;
        }
      }
    }
  }
}

typedef struct dw_ctx {
  const oa_fast_isa_t *isa;
  const conv_geo_t *q;
  const float *x, *w, *bias;
  float *y, *scratch;
  int64_t pad_h, pad_w, planes, slots;
  oa_uk_epi_t epi;
#if !defined(__STDC_NO_ATOMICS__)
  atomic_llong next; /* next plane to take */
#endif
} dw_ctx_t;

/* planes are taken from a shared counter (a static split without C11 atomics); each slot has its
 * own padded buffer */
static void dw_slots(void *ctx, int64_t s0, int64_t s1) {
  dw_ctx_t *d = (dw_ctx_t *)ctx;
  const conv_geo_t *q = d->q;
  for (int64_t s = s0; s < s1; s++) {
    float *pad = d->scratch + s * d->pad_h * d->pad_w;
    int64_t filled = -1; /* input plane now in `pad` (channel multipliers reuse it) */
#if !defined(__STDC_NO_ATOMICS__)
    for (int64_t pl; (pl = (int64_t)atomic_fetch_add(&d->next, 1)) < d->planes;) {
#else
    for (int64_t pl = s * d->planes / d->slots; pl < (s + 1) * d->planes / d->slots; pl++) {
#endif
      const int64_t nb = pl / q->o, oc = pl % q->o, src_plane = nb * q->c + oc / q->og;
      if (filled < 0) {
        /* the padding is the same for every plane: zero the buffer once, then copy only the
         * input rows (per-row memset + memcpy calls dominated on 7x7 and 14x14 planes) */
        memset(pad, 0, (size_t)(d->pad_h * d->pad_w) * sizeof(float));
      }
      if (src_plane != filled) {
        const float *xp = d->x + src_plane * q->h * q->w;
        const int64_t r0 = q->ph, r1 = oa_min64(q->ph + q->h, d->pad_h);
        const int64_t c0 = oa_min64(q->pw, d->pad_w), c1 = oa_min64(q->pw + q->w, d->pad_w), n = c1 - c0;
        for (int64_t r = r0; r < r1; r++) {
          float *pr = pad + r * d->pad_w + c0;
          const float *src = xp + (r - q->ph) * q->w;
          if (n >= 32) {
            memcpy(pr, src, (size_t)n * sizeof(float));
          } else {
            for (int64_t c = 0; c < n; c++) pr[c] = src[c];
          }
        }
        filled = src_plane;
      }
      oa_dw_plane_t p;
      p.pad = pad;
      p.pad_w = d->pad_w;
      p.w = d->w + oc * q->kh * q->kw;
      p.kh = q->kh;
      p.kw = q->kw;
      p.sh = q->sh;
      p.sw = q->sw;
      p.dh = q->dh;
      p.dw = q->dw;
      p.oh = q->oh;
      p.ow = q->ow;
      p.out = d->y + pl * q->oh * q->ow;
      p.bias = d->bias ? d->bias[oc] : 0.0f;
      p.epi = d->epi;
      d->isa->dw(&p);
    }
  }
}

/* Phase planes of the direct path: plane (ci, a, b)[r][c] = xpad[r * sh + a][c * sw + b], where
 * xpad is the input with its zero padding; rows 0 .. hph (one spare row of zeros). Output pixel
 * (oh, ow) for tap (kh, kw) then reads plane (ci, kh dh % sh, kw dw % sw) at
 * (oh + kh dh / sh) * wph + ow + kw dw / sw: for fixed k, consecutive virtual pixels
 * v = oh * wph + ow read consecutive floats, so B row k is the phase plane at offset boff[k]. */
typedef struct phase_ctx {
  const conv_geo_t *q;
  const float *x;
  float *phase;
  uint32_t used_a, used_b; /* phases any tap reads */
} phase_ctx_t;

static void build_phases(void *ctx, int64_t c0, int64_t c1) {
  const phase_ctx_t *pc = (const phase_ctx_t *)ctx;
  const conv_geo_t *q = pc->q;
  for (int64_t ci = c0; ci < c1; ci++) {
    const float *xc = pc->x + ci * q->h * q->w;
    for (int64_t a = 0; a < q->sh; a++) {
      if (!(pc->used_a >> a & 1u)) continue;
      for (int64_t b = 0; b < q->sw; b++) {
        if (!(pc->used_b >> b & 1u)) continue;
        float *plane = pc->phase + ((ci * q->sh + a) * q->sw + b) * q->plen;
        /* columns c with 0 <= c * sw + b - pw < w */
        const int64_t off = b - q->pw;
        int64_t lo = off >= 0 ? 0 : (-off + q->sw - 1) / q->sw;
        int64_t hi = q->w - 1 - off < 0 ? 0 : (q->w - 1 - off) / q->sw + 1;
        if (hi > q->wph) hi = q->wph;
        if (lo > hi) lo = hi;
        for (int64_t r = 0; r <= q->hph; r++) {
          float *row = plane + r * q->wph;
          const int64_t iy = r * q->sh + a - q->ph;
          if (iy < 0 || iy >= q->h) {
            memset(row, 0, (size_t)q->wph * sizeof(float));
            continue;
          }
          const float *src = xc + iy * q->w + off;
          memset(row, 0, (size_t)lo * sizeof(float));
          if (q->sw == 1) {
            memcpy(row + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
          } else {
            for (int64_t c = lo; c < hi; c++) row[c] = src[c * q->sw];
          }
          memset(row + hi, 0, (size_t)(q->wph - hi) * sizeof(float));
        }
      }
    }
  }
}

typedef struct compact_ctx {
  const conv_geo_t *q;
  const float *virt;
  float *y;
} compact_ctx_t;

static void compact_rows(void *ctx, int64_t c0, int64_t c1) {
  const compact_ctx_t *cc = (const compact_ctx_t *)ctx;
  const conv_geo_t *q = cc->q;
  for (int64_t co = c0; co < c1; co++)
    for (int64_t r = 0; r < q->oh; r++)
      memcpy(cc->y + (co * q->oh + r) * q->ow, cc->virt + co * q->nv + r * q->wph, (size_t)q->ow * sizeof(float));
}

static void conv_direct(const oa_fast_isa_t *isa, conv_geo_t *q, int32_t threads, const float *x, const float *w,
                        const float *bias, float *y, float *scratch, const oa_uk_epi_t *epi,
                        struct oa_threadpool *pool) {
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, q->og, q->nv, q->k, q->k, 1, threads, &blk);
  conv_layout_t l;
  conv_direct_layout(q, blk.scratch_floats, &l);
  int64_t *boff = (int64_t *)(void *)(scratch + l.boff);
  float *phase = scratch + l.phase, *virt = scratch + l.virt;
  uint32_t used_a = 0, used_b = 0;
  for (int64_t ci = 0, kk = 0; ci < q->cg; ci++) {
    for (int64_t i = 0; i < q->kh; i++) {
      for (int64_t j = 0; j < q->kw; j++, kk++) {
        const int64_t a = i * q->dh % q->sh, b = j * q->dw % q->sw;
        used_a |= 1u << a;
        used_b |= 1u << b;
        boff[kk] = ((ci * q->sh + a) * q->sw + b) * q->plen + (i * q->dh / q->sh) * q->wph + j * q->dw / q->sw;
      }
    }
  }
  const int compact = q->wph != q->ow;
  for (int64_t nb = 0; nb < q->n; nb++) {
    for (int64_t g = 0; g < q->g; g++) {
      const float *xg = x + (nb * q->c + g * q->cg) * q->h * q->w;
      float *yg = y + (nb * q->o + g * q->og) * q->oh * q->ow;
      phase_ctx_t pc = {q, xg, phase, used_a, used_b};
      oa_parallel_for(pool, q->cg, 1, build_phases, &pc);
      oa_gemm_args_t args = {.m = q->og, .n = q->nv, .k = q->k, .a = w + g * q->og * q->k, .lda = q->k, .b = phase,
                             .boff = boff, .c = compact ? virt : yg, .rs_c = q->nv, .cs_c = 1,
                             .bias = bias ? bias + g * q->og : NULL, .act = epi->act, .lo = epi->lo, .hi = epi->hi};
      oa_gemm_run(isa, &blk, &args, scratch + l.gemm, pool);
      if (compact) {
        compact_ctx_t cc = {q, virt, yg};
        oa_parallel_for(pool, q->og, 4, compact_rows, &cc);
      }
    }
  }
}

oa_status_t oa_fast_conv2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int64_t path = plan->params[F_PATH];
  if (path == PATH_EMPTY) return OA_OK;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  conv_geo_t q;
  conv_geo(call, &q);
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *bias = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_fast_epi_of(call, q.act);
  if (path == PATH_DW) {
    dw_ctx_t d;
    d.isa = isa;
    d.q = &q;
    d.x = x;
    d.w = w;
    d.bias = bias;
    d.y = y;
    d.scratch = (float *)scratch;
    d.planes = q.n * q.o;
    d.epi = epi;
#if !defined(__STDC_NO_ATOMICS__)
    atomic_init(&d.next, 0);
#endif
    dw_pad_dims(&q, isa->vw, &d.pad_h, &d.pad_w);
    d.slots = oa_min64(threads, d.planes);
    oa_parallel_for(env->pool, d.slots, 1, dw_slots, &d);
    return OA_OK;
  }
  if (path == PATH_DIRECT) {
    conv_direct(isa, &q, threads, x, w, bias, y, (float *)scratch, &epi, env->pool);
    return OA_OK;
  }
  const int64_t p = q.oh * q.ow;
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, q.og, p, q.k, q.k, 0, threads, &blk);
  for (int64_t nb = 0; nb < q.n; nb++) {
    for (int64_t g = 0; g < q.g; g++) {
      im2col_ctx_t ic = {x + (nb * q.c + g * q.cg) * q.h * q.w, &q};
      oa_pack_dense_t pd = {ic.x, p};
      const int one = path == PATH_1X1;
      oa_gemm_args_t args = {.m = q.og, .n = p, .k = q.k, .a = w + g * q.og * q.k, .lda = q.k,
                             .pack = one ? oa_pack_rowmajor : pack_im2col,
                             .pack_ctx = one ? (const void *)&pd : (const void *)&ic,
                             .c = y + (nb * q.o + g * q.og) * p, .rs_c = p, .cs_c = 1,
                             .bias = bias ? bias + g * q.og : NULL, .act = epi.act, .lo = epi.lo, .hi = epi.hi};
      oa_gemm_run(isa, &blk, &args, (float *)scratch, env->pool);
    }
  }
  return OA_OK;
}

/* ---- the portable variants ------------------------------------------------------------------- */

#define OA_PORTABLE_PREPARE(op)                                                                             \
  oa_status_t oa_portable_##op##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,              \
                                         oa_op_plan_t *plan, oa_diag_t *diag) {                             \
    (void)diag;                                                                                             \
    return oa_fast_##op##_prepare_isa(call, env, plan, OA_ISA_PORTABLE);                                    \
  }

OA_PORTABLE_PREPARE(linear)
OA_PORTABLE_PREPARE(matmul)
OA_PORTABLE_PREPARE(addmm)
OA_PORTABLE_PREPARE(conv2d)
