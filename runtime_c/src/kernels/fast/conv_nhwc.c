/* conv2d_nhwc (channels-last convolution) on the blocked GEMM driver and the channels-last
 * depthwise kernel, for every ISA.
 *
 * out[pixel, co] = sum over taps (kh, kw) and channels ci of x[tap's input pixel, ci] *
 * W[kh, kw, ci, co]: the output pixels are the GEMM's rows (M = N * OH * OW) and the weights are
 * B exactly as they lie in the file: packed at export into panels of 16 output channels (`block`,
 * [K][16] each, what the 6x16 AVX2 micro-kernel reads; NEON's 8-wide and the portable 4/8-wide
 * kernels read them through row offsets), or [kH, kW, C, O] read in place (block 0). Panels were
 * 1.1-1.2x faster than B in place on MobileNetV2's 1x1 layers on 7x7 to 28x28 maps (a row of B
 * in place is a whole row of output channels away from the next, so a panel's rows fall into
 * few L1 sets). So
 *   - 1x1, stride 1, no padding: A = the input itself ([N * H * W, C], read in place), B = the
 *     weights, one GEMM over every pixel; nothing is packed or copied.
 *     This is why MobileNet-style networks run channels-last: in NCHW the pixels are B's columns,
 *     packed on every run, and a 7 x 7 map fills 49 of 64 columns of 16-wide panels.
 *   - convolutions with one group whose kernel windows overlap along a row (kW > stride), wide
 *     output rows and a small input row (the 3-channel stem of image models): per output row a
 *     "strip" of the input it reads, [columns][kH][C] zero-padded, and a GEMM that reads A
 *     straight from the strip: output pixel ow's taps ordered (kw, kh, c) are the K floats at
 *     ow * stride * kH * C, so A's rows overlap and nothing is copied per tap; the (small)
 *     weights are copied into that row order on every run (exported (kh, kw, c)).
 *     The im2col gather copied each input float kH * kW / stride^2 times (2.25x for a 3x3
 *     stride-2 stem), in 3-float pieces for 3 channels.
 *   - other convolutions with one group: blocks of output pixels, each gathered into an im2col
 *     A block ([rows, kH * kW * C]: one contiguous run of kW * C floats per kernel row when the
 *     taps are inside the image) by the thread that then runs its single-threaded GEMM.
 *   - depthwise (one input channel per group, as many outputs): dwconv_nhwc_tmpl.inc, channels
 *     in the vector lanes.
 * Other grouped convolutions decline (the reference kernel runs; the exporter does not emit them).
 * input_nchw = 1 (the input [N, C, H, W]: a network's image input, exporter/layout.py): strips
 * and im2col blocks gather from it directly; 1x1 and depthwise decline.
 * The reference kernel's prepare has validated the call before any of this runs. */
#include <string.h>

#include "../../cpu/threadpool.h"
#include "fast.h"
#include "fast_plan.h"

enum { PATH_EMPTY = 0, PATH_1X1 = 1, PATH_IM2COL = 2, PATH_DW = 3, PATH_STRIP = 4 };
/* plan->params past F_K: im2col rows per block (strip: floats of a strip), number of blocks, slots */
enum { F_ROWS = F_K + 1, F_BLOCKS, F_SLOTS };

/* an im2col block holds at most this many floats (64 KB: stays in L2 next to the B panel) */
#define IM2COL_BLOCK_FLOATS ((int64_t)16384)
#define IM2COL_MAX_ROWS 256
/* strips: at most this many floats (stays in L1/L2 while its row's GEMM runs), output rows at
 * least this wide (a GEMM per output row; narrow rows leave the micro-kernel's row tiles empty) */
#define STRIP_MAX_FLOATS ((int64_t)8192)
/* the weights are copied into the strip's K order on every run: only small ones */
#define STRIP_MAX_WEIGHTS ((int64_t)16384)
#define STRIP_MIN_COLS 24

typedef struct nhwc_geo {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g, oh, ow, act;
  int64_t in_nchw; /* the input is [N, C, H, W] (input_nchw = 1): strips and im2col gather from it */
  int64_t block; /* weights in panels of `block` output channels, or 0: [kH, kW, C/g, O] */
  int64_t m, k; /* GEMM rows (output pixels) and depth (kh * kw * c) */
} nhwc_geo_t;

static void nhwc_geo(const oa_op_call_t *call, nhwc_geo_t *q) {
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  q->in_nchw = call->n_ints > 9 ? call->ints[9] : 0;
  q->n = x->shape[0];
  q->h = x->shape[q->in_nchw ? 2 : 1];
  q->w = x->shape[q->in_nchw ? 3 : 2];
  q->c = x->shape[q->in_nchw ? 1 : 3];
  q->block = call->n_ints > 8 ? call->ints[8] : 0;
  q->kh = w->shape[q->block ? 1 : 0];
  q->kw = w->shape[q->block ? 2 : 1];
  q->o = out->shape[3];
  q->sh = call->ints[0];
  q->sw = call->ints[1];
  q->ph = call->ints[2];
  q->pw = call->ints[3];
  q->dh = call->ints[4];
  q->dw = call->ints[5];
  q->g = call->ints[6];
  q->act = call->n_ints > 7 ? call->ints[7] : 0;
  q->oh = out->shape[1];
  q->ow = out->shape[2];
  q->m = q->n * q->oh * q->ow;
  q->k = q->kh * q->kw * (q->c / q->g);
}

static int is_1x1(const nhwc_geo_t *q) {
  return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0;
}

/* floats a row of the weights takes, all panels (what the reordered copy holds per K row) */
static int64_t strip_weight_width(const nhwc_geo_t *q) { return q->block ? oa_cdiv(q->o, q->block) * q->block : q->o; }

/* floats of one output row's strip ([columns][kH][C]), or 0 when the strip path does not apply */
static int64_t strip_floats(const nhwc_geo_t *q) {
  if (q->g != 1 || q->dh != 1 || q->dw != 1 || q->kw <= q->sw || q->ow < STRIP_MIN_COLS) return 0;
  if (oa_cap_mul(q->k, strip_weight_width(q)) > STRIP_MAX_WEIGHTS) return 0;
  const int64_t f = oa_cap_mul(oa_cap_mul((q->ow - 1) * q->sw + q->kw, q->kh), q->c);
  return f > 0 && f <= STRIP_MAX_FLOATS ? f : 0;
}
/* A's row stride in a strip: the next output pixel starts stride columns later */
static int64_t strip_lda(const nhwc_geo_t *q) { return q->sw * q->kh * q->c; }

oa_status_t oa_fast_conv2d_nhwc_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                            int32_t isa) {
  oa_status_t st = oa_fast_begin(plan, env, isa);
  if (st) return st;
  const oa_fast_isa_t *I = oa_fast_isa(isa);
  nhwc_geo_t q;
  nhwc_geo(call, &q);
  if (call->outputs[0]->numel == 0) {
    plan->params[F_PATH] = PATH_EMPTY;
    return OA_OK;
  }
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  if (q.block % I->nr) return OA_ERR_UNSUPPORTED; /* panels narrower than (or not a multiple of) NR */
  /* an NCHW input: only the paths that gather the input (1x1 reads it in place as A) */
  if (q.in_nchw && (q.g > 1 || is_1x1(&q))) return OA_ERR_UNSUPPORTED;
  if (q.g > 1) {
    if (q.g != q.c || q.o != q.c || q.kh > OA_DWC_MAX_KH) return OA_ERR_UNSUPPORTED;
    plan->params[F_PATH] = PATH_DW;
    return OA_OK;
  }
  oa_gemm_blocking_t blk;
  if (is_1x1(&q)) {
    oa_gemm_plan(I, q.m, q.o, q.k, q.c, 1, threads, &blk);
    plan->params[F_PATH] = PATH_1X1;
    return oa_fast_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(q.k), blk.scratch_floats));
  }
  const int64_t strip = strip_floats(&q);
  if (strip > 0) {
    oa_gemm_plan(I, q.ow, q.o, q.k, strip_lda(&q), 1, 1, &blk);
    plan->params[F_PATH] = PATH_STRIP;
    plan->params[F_ROWS] = strip;
    plan->params[F_SLOTS] = oa_min64(threads, q.n * q.oh);
    const int64_t per_slot = oa_cap_add(oa_round16(strip), blk.scratch_floats);
    const int64_t shared = oa_cap_add(oa_row_offsets_floats(q.k), oa_round16(q.k * strip_weight_width(&q)));
    return oa_fast_set_scratch(plan, oa_cap_add(shared, oa_cap_mul(per_slot, plan->params[F_SLOTS])));
  }
  /* im2col blocks: rows a multiple of MR, the block within IM2COL_BLOCK_FLOATS */
  int64_t rows = oa_min64(IM2COL_MAX_ROWS, IM2COL_BLOCK_FLOATS / oa_max64(q.k, 1)) / I->mr * I->mr;
  rows = oa_max64(rows, I->mr);
  const int64_t blocks = oa_cdiv(q.m, rows);
  const int64_t slots = oa_min64(threads, blocks);
  oa_gemm_plan(I, rows, q.o, q.k, q.k, 1, 1, &blk); /* DIRECT: slot scratch does not depend on rows */
  const int64_t per_slot = oa_cap_add(oa_round16(oa_cap_mul(rows, q.k)), blk.scratch_floats);
  plan->params[F_PATH] = PATH_IM2COL;
  plan->params[F_ROWS] = rows;
  plan->params[F_BLOCKS] = blocks;
  plan->params[F_SLOTS] = slots;
  return oa_fast_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(q.k), oa_cap_mul(per_slot, slots)));
}

/* ---- depthwise ----------------------------------------------------------------------------- */

typedef struct dw_job {
  oa_dwc_t p;
  oa_dwc_fn fn;
} dw_job_t;

static void dw_job_rows(void *ctx, int64_t t0, int64_t t1) {
  const dw_job_t *j = (const dw_job_t *)ctx;
  j->fn(&j->p, t0, t1);
}

static void run_dw(const oa_fast_isa_t *isa, const nhwc_geo_t *q, const float *x, const float *w, const float *bias,
                   float *y, const oa_uk_epi_t *epi, struct oa_threadpool *pool) {
  dw_job_t j;
  j.fn = isa->dwc;
  j.p = (oa_dwc_t){.x = x, .w = w, .bias = bias, .y = y, .h = q->h, .w_in = q->w, .c = q->c, .kh = q->kh,
                   .kw = q->kw, .sh = q->sh, .sw = q->sw, .ph = q->ph, .pw = q->pw, .dh = q->dh, .dw = q->dw,
                   .oh = q->oh, .ow = q->ow, .epi = *epi};
  oa_dwc_interior(&j.p);
  oa_parallel_for(pool, q->n * q->oh, 1, dw_job_rows, &j);
}

/* ---- im2col blocks ------------------------------------------------------------------------- */

typedef struct im2col_job {
  const oa_fast_isa_t *isa;
  const nhwc_geo_t *q;
  const float *x;
  oa_gemm_args_t g; /* shared fields; a, m, c set per block */
  oa_gemm_blocking_t blk; /* strips: the blocking of every row's GEMM */
  float *scratch;   /* slot s at scratch + s * per_slot */
  int64_t rows, blocks, slots, per_slot; /* strips: rows = floats of a strip */
} im2col_job_t;

/* gather() from an NCHW input: one strided read per tap and channel (input_nchw is for inputs
 * with a few channels) */
static void gather_nchw(const nhwc_geo_t *q, const float *x, int64_t r0, int64_t r1, float *a) {
  const int64_t plane = q->oh * q->ow, hw = q->h * q->w;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t n = r / plane, oh = r % plane / q->ow, ow = r % q->ow;
    float *dst = a + (r - r0) * q->k;
    for (int64_t kh = 0; kh < q->kh; kh++) {
      const int64_t ih = oh * q->sh - q->ph + kh * q->dh;
      for (int64_t kw = 0; kw < q->kw; kw++, dst += q->c) {
        const int64_t iw = ow * q->sw - q->pw + kw * q->dw;
        const int inside = ih >= 0 && ih < q->h && iw >= 0 && iw < q->w;
        const float *src = inside ? x + n * q->c * hw + ih * q->w + iw : x;
        for (int64_t ci = 0; ci < q->c; ci++) dst[ci] = inside ? src[ci * hw] : 0.0f;
      }
    }
  }
}

/* A rows [r0, r1) of the im2col matrix: per output pixel, per kernel row, kW * C floats (one
 * memcpy when the row's taps are inside the image and not dilated; per tap otherwise) */
static void gather(const nhwc_geo_t *q, const float *x, int64_t r0, int64_t r1, float *a) {
  if (q->in_nchw) {
    gather_nchw(q, x, r0, r1, a);
    return;
  }
  const int64_t c = q->c, run = q->kw * c, plane = q->oh * q->ow;
  int64_t n = r0 / plane, oh = r0 % plane / q->ow, ow = r0 % q->ow;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t iw0 = ow * q->sw - q->pw;
    const int inside_w = q->dw == 1 && iw0 >= 0 && iw0 + q->kw <= q->w;
    float *dst = a + (r - r0) * q->k;
    for (int64_t kh = 0; kh < q->kh; kh++, dst += run) {
      const int64_t ih = oh * q->sh - q->ph + kh * q->dh;
      if (ih < 0 || ih >= q->h) {
        memset(dst, 0, (size_t)run * sizeof(float));
        continue;
      }
      const float *src = x + ((n * q->h + ih) * q->w) * c;
      if (inside_w) {
        memcpy(dst, src + iw0 * c, (size_t)run * sizeof(float));
        continue;
      }
      for (int64_t kw = 0; kw < q->kw; kw++) {
        const int64_t iw = iw0 + kw * q->dw;
        if (iw < 0 || iw >= q->w)
          memset(dst + kw * c, 0, (size_t)c * sizeof(float));
        else
          memcpy(dst + kw * c, src + iw * c, (size_t)c * sizeof(float));
      }
    }
    if (++ow == q->ow) {
      ow = 0;
      if (++oh == q->oh) {
        oh = 0;
        n++;
      }
    }
  }
}

/* ---- strips -------------------------------------------------------------------------------- */

/* One kernel row of a strip: columns [c0, c1) from the input pixels at src (channels cs floats
 * apart, pixels ps), zeros elsewhere (or everywhere when src is NULL: a row outside the image).
 * Inlined with cs = 1 or ps = 1 known, so each layout gets its own loop. */
static inline void strip_row(float *d, const float *src, int64_t cols, int64_t c0, int64_t c1, int64_t step,
                             int64_t c, int64_t cs, int64_t ps) {
  for (int64_t col = 0; col < cols; col++, d += step) {
    if (!src || col < c0 || col >= c1) {
      memset(d, 0, (size_t)c * sizeof(float));
      continue;
    }
    if (c == 3) {
      d[0] = src[0];
      d[1] = src[cs];
      d[2] = src[2 * cs];
    } else if (cs == 1) {
      memcpy(d, src, (size_t)c * sizeof(float));
    } else {
      for (int64_t ci = 0; ci < c; ci++) d[ci] = src[ci * cs];
    }
    src += ps;
  }
}

/* output row (n, oh)'s strip: column col (input column col - pw), kernel row kh: the C floats of
 * that input pixel, zeros outside the image */
static void build_strip(const nhwc_geo_t *q, const float *x, int64_t n, int64_t oh, float *s) {
  const int64_t c = q->c, cols = (q->ow - 1) * q->sw + q->kw, step = q->kh * c, hw = q->h * q->w;
  /* columns [0, c0) and [c1, cols) are padding */
  const int64_t c0 = oa_min64(cols, q->pw), c1 = oa_max64(c0, oa_min64(cols, q->pw + q->w));
  for (int64_t kh = 0; kh < q->kh; kh++) {
    const int64_t ih = oh * q->sh - q->ph + kh;
    const int inside = ih >= 0 && ih < q->h;
    /* pixel (ih, c0 - pw) of image n */
    const int64_t at = n * c * hw + (ih * q->w + c0 - q->pw) * (q->in_nchw ? 1 : c);
    const float *src = inside ? x + at : NULL;
    if (q->in_nchw)
      strip_row(s + kh * c, src, cols, c0, c1, step, c, hw, 1);
    else
      strip_row(s + kh * c, src, cols, c0, c1, step, c, 1, c);
  }
}

/* The weights with their rows in the strip's K order (kw, kh, c) (exported (kh, kw, c)): the
 * same layout (panels of `block` columns, or [K][O] when block is 0), `width` floats a row. */
static void strip_weights(const nhwc_geo_t *q, const float *w, float *dst) {
  const int64_t width = q->block ? q->block : q->o, panels = q->block ? oa_cdiv(q->o, q->block) : 1;
  for (int64_t pn = 0; pn < panels; pn++) {
    const float *src = w + pn * q->k * width;
    for (int64_t kw = 0; kw < q->kw; kw++)
      for (int64_t kh = 0; kh < q->kh; kh++)
        for (int64_t ci = 0; ci < q->c; ci++, dst += width)
          memcpy(dst, src + ((kh * q->kw + kw) * q->c + ci) * width, (size_t)width * sizeof(float));
  }
}

/* slot s: a static share of the output rows, its own strip and GEMM scratch */
static void strip_slots(void *ctx, int64_t s0, int64_t s1) {
  const im2col_job_t *j = (const im2col_job_t *)ctx;
  const nhwc_geo_t *q = j->q;
  const int64_t rows = q->n * q->oh;
  for (int64_t s = s0; s < s1; s++) {
    float *strip = j->scratch + s * j->per_slot, *gs = strip + oa_round16(j->rows);
    for (int64_t r = s * rows / j->slots; r < (s + 1) * rows / j->slots; r++) {
      build_strip(q, j->x, r / q->oh, r % q->oh, strip);
      oa_gemm_args_t g = j->g;
      g.a = strip;
      g.c = j->g.c + r * q->ow * q->o;
      oa_gemm_run(j->isa, &j->blk, &g, gs, NULL);
    }
  }
}

/* slot s: a static share of the blocks (deterministic), its own A block and GEMM scratch */
static void im2col_slots(void *ctx, int64_t s0, int64_t s1) {
  const im2col_job_t *j = (const im2col_job_t *)ctx;
  const nhwc_geo_t *q = j->q;
  for (int64_t s = s0; s < s1; s++) {
    float *a = j->scratch + s * j->per_slot, *gs = a + oa_round16(j->rows * q->k);
    for (int64_t b = s * j->blocks / j->slots; b < (s + 1) * j->blocks / j->slots; b++) {
      const int64_t r0 = b * j->rows, r1 = oa_min64(r0 + j->rows, q->m);
      gather(q, j->x, r0, r1, a);
      oa_gemm_args_t g = j->g;
      g.m = r1 - r0;
      g.a = a;
      g.c = j->g.c + r0 * q->o;
      oa_gemm_blocking_t blk;
      oa_gemm_plan(j->isa, g.m, g.n, g.k, g.lda, 1, 1, &blk);
      oa_gemm_run(j->isa, &blk, &g, gs, NULL);
    }
  }
}

oa_status_t oa_fast_conv2d_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int64_t path = plan->params[F_PATH];
  if (path == PATH_EMPTY) return OA_OK;
  const oa_fast_isa_t *isa = oa_fast_isa_of(plan);
  nhwc_geo_t q;
  nhwc_geo(call, &q);
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *bias = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_fast_epi_of(call, q.act);
  if (path == PATH_DW) {
    run_dw(isa, &q, x, w, bias, y, &epi, env->pool);
    return OA_OK;
  }
  const int64_t *boff = (const int64_t *)scratch;
  float *rest = oa_row_offsets(scratch, q.k, q.block ? q.block : q.o);
  oa_gemm_args_t g = {.m = q.m, .n = q.o, .k = q.k, .a = x, .lda = q.c, .b = w, .boff = boff, .bblock = q.block, .c = y,
                      .rs_c = q.o, .cs_c = 1, .bias_col = bias, .act = epi.act, .lo = epi.lo, .hi = epi.hi};
  if (path == PATH_1X1) {
    oa_gemm_blocking_t blk;
    oa_gemm_plan(isa, q.m, q.o, q.k, q.c, 1, (int32_t)plan->params[F_THREADS], &blk);
    oa_gemm_run(isa, &blk, &g, rest, env->pool);
    return OA_OK;
  }
  im2col_job_t j;
  j.isa = isa;
  j.q = &q;
  j.x = x;
  j.g = g;
  if (path == PATH_STRIP) {
    strip_weights(&q, w, rest);
    j.g.b = rest;
    j.g.m = q.ow;
    j.g.lda = strip_lda(&q);
    j.scratch = rest + oa_round16(q.k * strip_weight_width(&q));
    j.rows = plan->params[F_ROWS];
    j.slots = plan->params[F_SLOTS];
    oa_gemm_plan(isa, q.ow, q.o, q.k, j.g.lda, 1, 1, &j.blk);
    j.per_slot = oa_round16(j.rows) + j.blk.scratch_floats;
    oa_parallel_for(env->pool, j.slots, 1, strip_slots, &j);
    return OA_OK;
  }
  j.g.lda = q.k;
  j.scratch = rest;
  j.rows = plan->params[F_ROWS];
  j.blocks = plan->params[F_BLOCKS];
  j.slots = plan->params[F_SLOTS];
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, j.rows, q.o, q.k, q.k, 1, 1, &blk);
  j.per_slot = oa_round16(j.rows * q.k) + blk.scratch_floats;
  oa_parallel_for(env->pool, j.slots, 1, im2col_slots, &j);
  return OA_OK;
}

oa_status_t oa_portable_conv2d_nhwc_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                            oa_diag_t *diag) {
  (void)diag;
  return oa_fast_conv2d_nhwc_prepare_isa(call, env, plan, OA_ISA_PORTABLE);
}
