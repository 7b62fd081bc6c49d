/* conv2d (NCHW) and conv2d_nhwc (channels-last) on the blocked GEMM driver (opt.h), for every ISA.
 * The reference kernel's prepare has validated the call before any of these runs (kernel.h).
 *
 * conv2d (NCHW): out[co, p] = W[co, (ci, kh, kw)] * col[(ci, kh, kw), p], the weights the
 * in-place A operand, no im2col matrix:
 *   - 1x1, stride 1, no padding: B = the input planes [C, H * W], packed.
 *   - strides up to 8: the input is copied once into zero-padded, stride-phase-split planes
 *     (conv_direct below) so that B row (ci, kh, kw) is a contiguous run of a plane at offset
 *     boff[k] for consecutive "virtual" pixels oh * wph + ow; the micro-kernel reads B in place
 *     through boff (DIRECT mode) or from panels copied row by row (see conv_direct_in_place),
 *     and the wph - ow extra columns per row are dropped as the GEMM stores or after it (see
 *     conv_direct_vrow). On ResNet-18's 3x3 layers this replaced packing im2col panels element
 *     by element, which cost up to a third of the time with 64 output channels.
 *   - larger strides: im2col panels packed straight from the input rows (pack_im2col).
 *   Groups run one GEMM each. Depthwise convs (one input channel per group) have their own
 *   kernel (dwconv.inc) on a zero-padded copy of each plane. */
#include <string.h>

#include "threadpool.h"
#include "kernels/opt/opt.h"
#include "kernels/opt/plan.h"

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif
enum { PATH_EMPTY = 0, PATH_GEMM = 1, PATH_GEMV = 2, PATH_DIRECT = 3, PATH_IM2COL = 4, PATH_DW = 5, PATH_1X1 = 6 };

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
  q->sh = call->ints[OA_ARG_CONV2D_STRIDE_H];
  q->sw = call->ints[OA_ARG_CONV2D_STRIDE_W];
  q->ph = call->ints[OA_ARG_CONV2D_PAD_H];
  q->pw = call->ints[OA_ARG_CONV2D_PAD_W];
  q->dh = call->ints[OA_ARG_CONV2D_DILATION_H];
  q->dw = call->ints[OA_ARG_CONV2D_DILATION_W];
  q->g = call->ints[OA_ARG_CONV2D_GROUPS];
  q->act = call->n_ints > OA_ARG_CONV2D_ACT ? call->ints[OA_ARG_CONV2D_ACT] : 0;
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

/* The direct path's B (rows of the phase planes) is read in place (DIRECT mode) for few output
 * channels, else each K block of a task's columns is first copied into packed panels
 * (pack_rows: one memcpy per row). Measured on a Xeon (AVX-512 12x32 and AVX2 6x16 tiles, ResNet-18's
 * strided 3x3 layers with 128 to 512 output channels): the copies made them 1.05-1.3x faster
 * (in place, every row of a panel spans two or three cache lines and a 32-wide tile's rows do not
 * fit L1), the 7x7 stem with 64 output channels (whose copy is 7.6 MB) 1.07x slower on AVX2. */
#define DIRECT_PACK_MIN_ROWS 96
static int conv_direct_in_place(const conv_geo_t *q) { return q->og < DIRECT_PACK_MIN_ROWS; }

/* 1x1, stride 1, no padding: B is the input planes themselves */
static int conv_is_1x1(const conv_geo_t *q) {
  return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0;
}


/* Output rows of at least this many tiles' columns (the direct path's wph virtual columns per
 * row) are stored by the GEMM in place (oa_gemm_args_t.vrow: the few tiles that cross a row end go
 * through a buffer): a copy of the whole virtual output afterwards was 0.28 of the 1.5 ms of
 * ResNet-18's stem (wph 115, 1.50 -> 1.29 ms). Narrower rows are copied after each finished
 * block (compact_block): with 29 virtual columns (ResNet-18's 56 x 56 stride-2 layer) every tile
 * crosses a row end, 1.02x slower through the buffers. */
#define DIRECT_VROW_TILES 2
static int conv_direct_vrow(const conv_geo_t *q, const oa_opt_isa_t *isa) {
  return q->wph != q->ow && q->wph >= DIRECT_VROW_TILES * isa->nr;
}
/* the GEMM writes a virtual output that compact_block copies to y */
static int conv_direct_compact(const conv_geo_t *q, const oa_opt_isa_t *isa) {
  return q->wph != q->ow && !conv_direct_vrow(q, isa);
}

/* Scratch of the direct path before the GEMM's own: [boff: k int64][phase planes][virtual output,
 * when the rows are compacted after]. Sets q->plen; -1 when too large. */
typedef struct conv_layout {
  int64_t boff, phase, virt, gemm, total;
} conv_layout_t;

static void conv_direct_layout(conv_geo_t *q, const oa_opt_isa_t *isa, int64_t gemm_floats, conv_layout_t *l) {
  const int64_t pl = oa_cap_mul(oa_cap_add(q->hph, 1), q->wph);
  q->plen = pl;
  l->boff = 0;
  l->phase = oa_round16(oa_cap_mul(q->k, 2));
  const int64_t phases = oa_cap_mul(oa_cap_mul(q->cg, q->sh), q->sw);
  l->virt = oa_cap_add(l->phase, oa_round16(oa_cap_mul(phases, pl)));
  l->gemm = oa_cap_add(l->virt, conv_direct_compact(q, isa) ? oa_round16(oa_cap_mul(q->og, q->nv)) : 0);
  l->total = oa_cap_add(l->gemm, gemm_floats);
}
static void dw_pad_dims(const conv_geo_t *q, int32_t vw, int64_t *pad_h, int64_t *pad_w) {
  const int64_t nvec = (q->ow + vw - 1) / vw;
  *pad_w = (nvec * vw - 1) * q->sw + (q->kw - 1) * q->dw + 2;
  *pad_h = (q->oh - 1) * q->sh + (q->kh - 1) * q->dh + 1;
}

static oa_status_t oa_opt_conv2d_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_opt_isa_t *I = oa_opt_isa(isa);
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
    return oa_opt_set_scratch(plan, oa_cap_mul(oa_cap_mul(ph, pw), slots));
  }
  oa_gemm_blocking_t blk;
  if (conv_is_1x1(&q)) {
    /* 1x1: B = the input planes [C, H * W], packed. Read in place (DIRECT), the H * W row stride
     * put every row of a panel in its own page and in the same few L1 sets: 2.8x slower on
     * MobileNetV2's 16 -> 96 channels at 112 x 112. */
    oa_gemm_plan(I, q.og, q.oh * q.ow, q.k, q.k, 0, threads, &blk);
    plan->params[F_PATH] = PATH_1X1;
    return oa_opt_set_scratch(plan, blk.scratch_floats);
  }
  /* direct: strides up to 8 (phase planes), the input copied once with its padding */
  if (q.sh <= 8 && q.sw <= 8) {
    oa_gemm_plan(I, q.og, q.nv, q.k, q.k, conv_direct_in_place(&q), threads, &blk);
    conv_layout_t l;
    conv_direct_layout(&q, I, blk.scratch_floats, &l);
    if (l.total >= 0) {
      plan->params[F_PATH] = PATH_DIRECT;
      return oa_opt_set_scratch(plan, l.total);
    }
  }
  /* otherwise im2col panels packed from the input (small scratch) */
  oa_gemm_plan(I, q.og, q.oh * q.ow, q.k, q.k, 0, threads, &blk);
  plan->params[F_PATH] = PATH_IM2COL;
  return oa_opt_set_scratch(plan, blk.scratch_floats);
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
  const oa_opt_isa_t *isa;
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

/* units u = (ci, a, b) of phase planes: a thread takes whole planes, so a 3-channel stem's 12
 * planes split evenly between threads (by channel: 2 + 1 channels on 2 threads) */
static void build_phases(void *ctx, int64_t u0, int64_t u1) {
  const phase_ctx_t *pc = (const phase_ctx_t *)ctx;
  const conv_geo_t *q = pc->q;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t ci = u / (q->sh * q->sw), a = u / q->sw % q->sh, b = u % q->sw;
    if (!(pc->used_a >> a & 1u) || !(pc->used_b >> b & 1u)) continue;
    const float *xc = pc->x + ci * q->h * q->w;
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
      } else if (q->sw == 2) {
        for (int64_t c = lo; c < hi; c++) row[c] = src[2 * c]; /* a constant stride vectorizes */
      } else {
        for (int64_t c = lo; c < hi; c++) row[c] = src[c * q->sw];
      }
      memset(row + hi, 0, (size_t)(q->wph - hi) * sizeof(float));
    }
  }
}

/* The GEMM's output in virtual columns (wph per output row, the last wph - ow dropped) copied to
 * y, one finished block of C at a time (oa_gemm_args_t.done: the block is still in the caches of
 * the thread that computed it; a separate pass over the whole output read it back from memory,
 * 0.22 of the 1.9 ms of ResNet-18's stem). */
typedef struct compact_ctx {
  const conv_geo_t *q;
  const float *virt;
  float *y;
} compact_ctx_t;

static void compact_block(const void *ctx, int64_t c0, int64_t c1, int64_t j0, int64_t nc) {
  const compact_ctx_t *cc = (const compact_ctx_t *)ctx;
  const conv_geo_t *q = cc->q;
  const int64_t j1 = j0 + nc;
  for (int64_t r = j0 / q->wph; r < q->oh && r * q->wph < j1; r++) {
    /* output row r is virtual columns [r * wph, r * wph + ow): its part inside [j0, j1) */
    const int64_t v0 = oa_max64(j0, r * q->wph), v1 = oa_min64(j1, r * q->wph + q->ow);
    if (v1 <= v0) continue;
    for (int64_t co = c0; co < c1; co++)
      memcpy(cc->y + (co * q->oh + r) * q->ow + (v0 - r * q->wph), cc->virt + co * q->nv + v0,
             (size_t)(v1 - v0) * sizeof(float));
  }
}

/* B rows gathered through row offsets into packed panels: B[p][j] = b[boff[p] + j] */
typedef struct rows_ctx {
  const float *b;
  const int64_t *boff;
} rows_ctx_t;

static void pack_rows(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  const rows_ctx_t *rc = (const rows_ctx_t *)ctx;
  for (int64_t pq = 0; pq * nr < nc; pq++) {
    const int64_t jq = j0 + pq * nr, wq = oa_min64(nr, nc - pq * nr);
    float *d = dst + pq * kc * nr;
    if (wq == 32 && nr == 32) { /* the AVX-512 panel: a fixed-size copy the compiler inlines (a memcpy call per
                     * 128 bytes was 16% of a strided 3x3 conv's time) */
      for (int64_t p = 0; p < kc; p++, d += nr) memcpy(d, rc->b + rc->boff[k0 + p] + jq, 32 * sizeof(float));
      continue;
    }
    if (wq == 16) {
      for (int64_t p = 0; p < kc; p++, d += nr) memcpy(d, rc->b + rc->boff[k0 + p] + jq, 16 * sizeof(float));
      for (int64_t p = 0; nr > 16 && p < kc; p++) memset(dst + pq * kc * nr + p * nr + 16, 0, (size_t)(nr - 16) * sizeof(float));
      continue;
    }
    for (int64_t p = 0; p < kc; p++, d += nr) {
      const float *src = rc->b + rc->boff[k0 + p] + jq;
      memcpy(d, src, (size_t)wq * sizeof(float));
      for (int64_t t = wq; t < nr; t++) d[t] = 0.0f;
    }
  }
}

static void conv_direct(const oa_opt_isa_t *isa, conv_geo_t *q, int32_t threads, const float *x, const float *w,
                        const float *bias, float *y, float *scratch, const oa_uk_epi_t *epi,
                        struct oa_threadpool *pool) {
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, q->og, q->nv, q->k, q->k, conv_direct_in_place(q), threads, &blk);
  conv_layout_t l;
  conv_direct_layout(q, isa, blk.scratch_floats, &l);
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
  const int vrow = conv_direct_vrow(q, isa), compact = conv_direct_compact(q, isa);
  for (int64_t nb = 0; nb < q->n; nb++) {
    for (int64_t g = 0; g < q->g; g++) {
      const float *xg = x + (nb * q->c + g * q->cg) * q->h * q->w;
      float *yg = y + (nb * q->o + g * q->og) * q->oh * q->ow;
      phase_ctx_t pc = {q, xg, phase, used_a, used_b};
      oa_parallel_for(pool, q->cg * q->sh * q->sw, 1, build_phases, &pc);
      rows_ctx_t rc = {phase, boff};
      compact_ctx_t cc = {q, virt, yg};
      oa_gemm_args_t args = {.m = q->og, .n = q->nv, .k = q->k, .a = w + g * q->og * q->k, .lda = q->k, .b = phase,
                             .boff = boff, .pack = conv_direct_in_place(q) ? NULL : pack_rows, .pack_ctx = &rc,
                             .c = compact ? virt : yg, .rs_c = compact ? q->nv : q->oh * q->ow, .cs_c = 1,
                             .vrow = vrow ? q->wph : 0, .vcols = q->ow,
                             .bias = bias ? bias + g * q->og : NULL, .act = epi->act, .lo = epi->lo, .hi = epi->hi,
                             .done = compact ? compact_block : NULL, .done_ctx = &cc};
      oa_gemm_run(isa, &blk, &args, scratch + l.gemm, pool);
    }
  }
}

oa_status_t oa_opt_conv2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int64_t path = plan->params[F_PATH];
  if (path == PATH_EMPTY) return OA_OK;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  conv_geo_t q;
  conv_geo(call, &q);
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *bias = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_opt_epi_of(call, q.act);
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

/* ---- conv2d_nhwc ------------------------------------------------------------------------------ */

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
 *   - depthwise (one input channel per group, as many outputs): dwconv_nhwc.inc, channels
 *     in the vector lanes.
 * Other grouped convolutions decline (the reference kernel runs; the exporter does not emit them).
 * input_nchw = 1 (the input [N, C, H, W]: a network's image input, exporter/layout.py): strips
 * and im2col blocks gather from it directly; 1x1 and depthwise decline.
 * The reference kernel's prepare has validated the call before any of this runs. */enum { NHWC_EMPTY = 0, NHWC_1X1 = 1, NHWC_IM2COL = 2, NHWC_DW = 3, NHWC_STRIP = 4 };
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
  q->in_nchw = call->n_ints > OA_ARG_CONV2D_NHWC_INPUT_NCHW ? call->ints[OA_ARG_CONV2D_NHWC_INPUT_NCHW] : 0;
  q->n = x->shape[0];
  q->h = x->shape[q->in_nchw ? 2 : 1];
  q->w = x->shape[q->in_nchw ? 3 : 2];
  q->c = x->shape[q->in_nchw ? 1 : 3];
  q->block = call->n_ints > OA_ARG_CONV2D_NHWC_BLOCK ? call->ints[OA_ARG_CONV2D_NHWC_BLOCK] : 0;
  q->kh = w->shape[q->block ? 1 : 0];
  q->kw = w->shape[q->block ? 2 : 1];
  q->o = out->shape[3];
  q->sh = call->ints[OA_ARG_CONV2D_NHWC_STRIDE_H];
  q->sw = call->ints[OA_ARG_CONV2D_NHWC_STRIDE_W];
  q->ph = call->ints[OA_ARG_CONV2D_NHWC_PAD_H];
  q->pw = call->ints[OA_ARG_CONV2D_NHWC_PAD_W];
  q->dh = call->ints[OA_ARG_CONV2D_NHWC_DILATION_H];
  q->dw = call->ints[OA_ARG_CONV2D_NHWC_DILATION_W];
  q->g = call->ints[OA_ARG_CONV2D_NHWC_GROUPS];
  q->act = call->n_ints > OA_ARG_CONV2D_NHWC_ACT ? call->ints[OA_ARG_CONV2D_NHWC_ACT] : 0;
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

static oa_status_t oa_opt_conv2d_nhwc_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                            int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_opt_isa_t *I = oa_opt_isa(isa);
  nhwc_geo_t q;
  nhwc_geo(call, &q);
  if (call->outputs[0]->numel == 0) {
    plan->params[F_PATH] = NHWC_EMPTY;
    return OA_OK;
  }
  const int32_t threads = (int32_t)plan->params[F_THREADS];
  if (q.block % I->pw) return OA_ERR_UNSUPPORTED; /* panels narrower than (or not a multiple of) PW */
  /* an NCHW input: only the paths that gather the input (1x1 reads it in place as A) */
  if (q.in_nchw && (q.g > 1 || is_1x1(&q))) return OA_ERR_UNSUPPORTED;
  if (q.g > 1) {
    if (q.g != q.c || q.o != q.c || q.kh > OA_DWC_MAX_KH) return OA_ERR_UNSUPPORTED;
    plan->params[F_PATH] = NHWC_DW;
    return OA_OK;
  }
  oa_gemm_blocking_t blk;
  if (is_1x1(&q)) {
    oa_gemm_plan(I, q.m, q.o, q.k, q.c, 1, threads, &blk);
    plan->params[F_PATH] = NHWC_1X1;
    return oa_opt_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(q.k), blk.scratch_floats));
  }
  const int64_t strip = strip_floats(&q);
  if (strip > 0) {
    oa_gemm_plan(I, q.ow, q.o, q.k, strip_lda(&q), 1, 1, &blk);
    plan->params[F_PATH] = NHWC_STRIP;
    plan->params[F_ROWS] = strip;
    plan->params[F_SLOTS] = oa_min64(threads, q.n * q.oh);
    const int64_t per_slot = oa_cap_add(oa_round16(strip), blk.scratch_floats);
    const int64_t shared = oa_cap_add(oa_row_offsets_floats(q.k), oa_round16(q.k * strip_weight_width(&q)));
    return oa_opt_set_scratch(plan, oa_cap_add(shared, oa_cap_mul(per_slot, plan->params[F_SLOTS])));
  }
  /* im2col blocks: rows a multiple of MR, the block within IM2COL_BLOCK_FLOATS */
  int64_t rows = oa_min64(IM2COL_MAX_ROWS, IM2COL_BLOCK_FLOATS / oa_max64(q.k, 1)) / I->mr * I->mr;
  rows = oa_max64(rows, I->mr);
  const int64_t blocks = oa_cdiv(q.m, rows);
  const int64_t slots = oa_min64(threads, blocks);
  oa_gemm_plan(I, rows, q.o, q.k, q.k, 1, 1, &blk); /* DIRECT: slot scratch does not depend on rows */
  const int64_t per_slot = oa_cap_add(oa_round16(oa_cap_mul(rows, q.k)), blk.scratch_floats);
  plan->params[F_PATH] = NHWC_IM2COL;
  plan->params[F_ROWS] = rows;
  plan->params[F_BLOCKS] = blocks;
  plan->params[F_SLOTS] = slots;
  return oa_opt_set_scratch(plan, oa_cap_add(oa_row_offsets_floats(q.k), oa_cap_mul(per_slot, slots)));
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

static void run_dw(const oa_opt_isa_t *isa, const nhwc_geo_t *q, const float *x, const float *w, const float *bias,
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
  const oa_opt_isa_t *isa;
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

oa_status_t oa_opt_conv2d_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int64_t path = plan->params[F_PATH];
  if (path == NHWC_EMPTY) return OA_OK;
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  nhwc_geo_t q;
  nhwc_geo(call, &q);
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const float *bias = tb ? (const float *)tb->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const oa_uk_epi_t epi = oa_opt_epi_of(call, q.act);
  if (path == NHWC_DW) {
    run_dw(isa, &q, x, w, bias, y, &epi, env->pool);
    return OA_OK;
  }
  const int64_t *boff = (const int64_t *)scratch;
  float *rest = oa_row_offsets(scratch, q.k, q.block ? q.block : q.o);
  oa_gemm_args_t g = {.m = q.m, .n = q.o, .k = q.k, .a = x, .lda = q.c, .b = w, .boff = boff, .bblock = q.block, .c = y,
                      .rs_c = q.o, .cs_c = 1, .bias_col = bias, .act = epi.act, .lo = epi.lo, .hi = epi.hi};
  if (path == NHWC_1X1) {
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
  if (path == NHWC_STRIP) {
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

/* ---- registration (isa.h) ---------------------------------------------------------------------- */

OA_OPT_SHARED(conv2d, OA_DT_F32)
OA_OPT_SHARED(conv2d_nhwc, OA_DT_F32)
