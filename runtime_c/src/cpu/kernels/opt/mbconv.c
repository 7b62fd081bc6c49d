/* mbconv_nhwc, the fused inverted-residual block ([1x1 expand ->] depthwise -> 1x1 project,
 * kernels/mbconv.h), row band by row band so the expanded tensors never leave the cache.
 *
 * Unfused, MobileNetV2's expanded tensors (6x the block's channels: 96 x 112 x 112 floats is
 * 4.8 MB) are written by the expansion, read and the depthwise output written by the depthwise
 * convolution, and read again by the projection: on this class of core that traffic, not the
 * arithmetic, bounds the early layers. Here each thread walks bands of output rows of one image:
 *   1. the input rows the band's depthwise taps read are expanded (one GEMM over those rows'
 *      pixels, weights pre-packed in panels as in conv2d_nhwc) into a ring of rows; rows the
 *      previous band expanded already stay in place (neither recomputed nor moved);
 *   2. the depthwise kernel computes the band's rows from window rows (dwconv_nhwc.inc);
 *   3. one GEMM projects the band (rows x OW pixels) into the output.
 * Window and band buffers are sized to stay within about 512 KB per thread; a band has at least
 * 64 pixels (7x7 maps: the whole image) so the GEMMs have rows to fill their tiles. Images are
 * split into row chunks between threads (a chunk recomputes the expansion of the few rows above
 * it); every output element is computed by the same operations whatever the split. */
#include <string.h>

#include "threadpool.h"
#include "kernels/mbconv.h"
#include "kernels/opt/opt.h"
#include "kernels/opt/plan.h"

/* plan->params past F_K */
enum { M_BAND = F_K + 1, M_CHUNKS, M_SLOTS, M_SLOT_FLOATS };

#define BAND_BYTES ((int64_t)512 * 1024)
#define BAND_MIN_PIXELS 64

typedef struct mb_geo {
  int64_t n, h, w, c, e, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, block;
  int has_expand;
  int64_t band, win_rows, chunks, slots;
  int64_t boff_floats, win_floats, dwb_floats, gemm_floats, slot_floats;
} mb_geo_t;

/* the block's sizes and the scratch layout for `threads`; 0 when unreasonably large */
static int mb_geo(const oa_mbconv_parts_t *m, const oa_opt_isa_t *isa, int32_t threads, mb_geo_t *g) {
  const oa_tensor_t *x = m->in[MB_EXPAND][0], *y = m->out[MB_PROJECT][0];
  const int64_t *d = m->ints[MB_DW];
  memset(g, 0, sizeof *g);
  g->n = x->shape[0];
  g->h = x->shape[1];
  g->w = x->shape[2];
  g->c = x->shape[3];
  g->e = m->depthwise.shape[3];
  g->o = y->shape[3];
  g->oh = y->shape[1];
  g->ow = y->shape[2];
  g->kh = m->in[MB_DW][1]->shape[0];
  g->kw = m->in[MB_DW][1]->shape[1];
  g->sh = d[OA_ARG_CONV2D_NHWC_STRIDE_H];
  g->sw = d[OA_ARG_CONV2D_NHWC_STRIDE_W];
  g->ph = d[OA_ARG_CONV2D_NHWC_PAD_H];
  g->pw = d[OA_ARG_CONV2D_NHWC_PAD_W];
  g->dh = d[OA_ARG_CONV2D_NHWC_DILATION_H];
  g->dw = d[OA_ARG_CONV2D_NHWC_DILATION_W];
  g->block = m->ints[MB_PROJECT][OA_ARG_CONV2D_NHWC_BLOCK];
  g->has_expand = m->has_expand;
  const int64_t span = (g->kh - 1) * g->dh + 1, row = g->w * g->e, orow = g->ow * g->e;
  g->band = oa_max64(1, oa_min64(g->oh, oa_cdiv(BAND_MIN_PIXELS, oa_max64(g->ow, 1))));
  for (;;) {
    g->win_rows = oa_min64((g->band - 1) * g->sh + span, g->h);
    g->win_floats = g->has_expand ? oa_round16(oa_cap_mul(g->win_rows, row)) : 0;
    g->dwb_floats = oa_round16(oa_cap_mul(g->band, orow));
    const int64_t bytes = oa_cap_mul(oa_cap_add(g->win_floats, g->dwb_floats), (int64_t)sizeof(float));
    if (g->band == 1 || (bytes >= 0 && bytes <= BAND_BYTES)) break;
    g->band = g->band / 2;
  }
  /* (an empty batch is planned as one image: prepare then takes the nothing-to-do path) */
  const int64_t tasks_per_image = g->n >= threads ? 1 : oa_min64(g->oh, oa_cdiv(threads, oa_max64(g->n, 1)));
  g->chunks = tasks_per_image;
  g->slots = oa_min64(threads, g->n * g->chunks);
  oa_gemm_blocking_t blk;
  oa_gemm_plan(isa, BAND_MIN_PIXELS, g->o, g->e, g->e, 1, 1, &blk); /* DIRECT: slot scratch fixed */
  g->gemm_floats = blk.scratch_floats;
  g->boff_floats = oa_row_offsets_floats(oa_max64(g->c, g->e));
  g->slot_floats = oa_cap_add(oa_cap_add(g->win_floats, g->dwb_floats), g->gemm_floats);
  return g->boff_floats >= 0 && g->slot_floats >= 0 && g->win_rows >= 0;
}

static oa_status_t oa_opt_mbconv_nhwc_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                            int32_t isa) {
  oa_status_t st = oa_opt_begin(plan, env, isa);
  if (st) return st;
  const oa_opt_isa_t *I = oa_opt_isa(isa);
  oa_mbconv_parts_t m;
  if (oa_mbconv_split(call, &m, NULL)) return OA_ERR_UNSUPPORTED;
  mb_geo_t g;
  if (!mb_geo(&m, I, (int32_t)plan->params[F_THREADS], &g)) return OA_ERR_UNSUPPORTED;
  /* weights in panels that are a multiple of NR wide; kernel heights the depthwise kernel takes */
  if (g.block <= 0 || g.block % I->pw || g.kh > OA_DWC_MAX_KH) return OA_ERR_UNSUPPORTED;
  if (m.depthwise.numel == 0 || call->outputs[0]->numel == 0) {
    plan->params[F_PATH] = 0;
    return OA_OK;
  }
  plan->params[F_PATH] = 1;
  plan->params[M_BAND] = g.band;
  plan->params[M_CHUNKS] = g.chunks;
  plan->params[M_SLOTS] = g.slots;
  plan->params[M_SLOT_FLOATS] = g.slot_floats;
  return oa_opt_set_scratch(plan, oa_cap_add(g.boff_floats, oa_cap_mul(g.slots, g.slot_floats)));
}

typedef struct mb_job {
  const oa_opt_isa_t *isa;
  const oa_mbconv_parts_t *m;
  const mb_geo_t *g;
  const int64_t *boff;
  float *scratch; /* slot s at scratch + s * slot_floats */
  oa_dwc_t dwp;
  oa_uk_epi_t epi_e, epi_p;
} mb_job_t;

/* C[rows, n] = act(A[rows, k] * Bpanels + bias): one single-threaded GEMM of the block */
static void gemm(const mb_job_t *j, int64_t rows, int64_t n, int64_t k, const float *a, const oa_tensor_t *w,
                 const oa_tensor_t *bias, const oa_uk_epi_t *epi, float *c, float *scratch) {
  oa_gemm_args_t args = {.m = rows, .n = n, .k = k, .a = a, .lda = k, .b = (const float *)w->data,
                         .boff = j->boff, .bblock = j->g->block, .c = c, .rs_c = n, .cs_c = 1,
                         .bias_col = bias ? (const float *)bias->data : NULL, .act = epi->act, .lo = epi->lo,
                         .hi = epi->hi};
  oa_gemm_blocking_t blk;
  oa_gemm_plan(j->isa, rows, n, k, k, 1, 1, &blk);
  oa_gemm_run(j->isa, &blk, &args, scratch, NULL);
}

/* output rows [r0, r1) of image n, band by band */
static void run_chunk(const mb_job_t *j, int64_t n, int64_t r0, int64_t r1, float *slot) {
  const mb_geo_t *g = j->g;
  const oa_mbconv_parts_t *m = j->m;
  float *win = slot, *dwb = slot + g->win_floats, *gs = dwb + g->dwb_floats;
  const float *x = (const float *)m->in[MB_EXPAND][0]->data + n * g->h * g->w * g->c;
  float *y = (float *)m->out[MB_PROJECT][0]->data;
  const int64_t row = g->w * g->e;
  int64_t win_lo = 0, win_hi = -1; /* input rows the window holds */
  const float *rows[OA_DWC_MAX_KH];
  for (int64_t b0 = r0; b0 < r1; b0 += g->band) {
    const int64_t b1 = oa_min64(b0 + g->band, r1);
    const int64_t lo = oa_max64(b0 * g->sh - g->ph, 0);
    const int64_t hi = oa_min64((b1 - 1) * g->sh - g->ph + (g->kh - 1) * g->dh, g->h - 1);
    if (g->has_expand && lo <= hi) {
      /* the window is a ring of win_rows rows (input row r in slot r % win_rows): rows the last
       * band expanded stay where they are, the others are expanded into their slots (one GEMM
       * per run of consecutive slots) */
      const int64_t first = lo >= win_lo && lo <= win_hi ? win_hi + 1 : lo;
      for (int64_t r = first; r <= hi;) {
        const int64_t at = r % g->win_rows, n_rows = oa_min64(hi - r + 1, g->win_rows - at);
        gemm(j, n_rows * g->w, g->e, g->c, x + r * g->w * g->c, m->in[MB_EXPAND][1], m->in[MB_EXPAND][2], &j->epi_e,
             win + at * row, gs);
        r += n_rows;
      }
      win_lo = lo;
      win_hi = hi;
    }
    for (int64_t oh = b0; oh < b1; oh++) {
      for (int64_t kh = 0; kh < g->kh; kh++) {
        const int64_t ih = oh * g->sh - g->ph + kh * g->dh;
        rows[kh] = ih < 0 || ih >= g->h ? NULL
                   : g->has_expand      ? win + (ih % g->win_rows) * row
                                        : x + ih * g->w * g->c;
      }
      j->isa->dwc_row(&j->dwp, rows, dwb + (oh - b0) * g->ow * g->e);
    }
    gemm(j, (b1 - b0) * g->ow, g->o, g->e, dwb, m->in[MB_PROJECT][1], m->in[MB_PROJECT][2], &j->epi_p,
         y + (n * g->oh + b0) * g->ow * g->o, gs);
  }
}

static void mb_slots(void *ctx, int64_t s0, int64_t s1) {
  const mb_job_t *j = (const mb_job_t *)ctx;
  const mb_geo_t *g = j->g;
  const int64_t tasks = g->n * g->chunks;
  for (int64_t s = s0; s < s1; s++) {
    float *slot = j->scratch + s * g->slot_floats;
    for (int64_t t = s * tasks / g->slots; t < (s + 1) * tasks / g->slots; t++) {
      const int64_t n = t / g->chunks, ch = t % g->chunks;
      run_chunk(j, n, ch * g->oh / g->chunks, (ch + 1) * g->oh / g->chunks, slot);
    }
  }
}

oa_status_t oa_opt_mbconv_nhwc_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  if (!plan->params[F_PATH]) return OA_OK;
  oa_mbconv_parts_t m;
  if (oa_mbconv_split(call, &m, NULL)) return OA_ERR_INVALID_PROGRAM; /* validated at prepare */
  const oa_opt_isa_t *isa = oa_opt_isa_of(plan);
  mb_geo_t g;
  mb_geo(&m, isa, (int32_t)plan->params[F_THREADS], &g);
  mb_job_t j;
  j.isa = isa;
  j.m = &m;
  j.g = &g;
  j.boff = (const int64_t *)scratch;
  j.scratch = oa_row_offsets(scratch, oa_max64(g.c, g.e), g.block);
  const oa_op_call_t *dwc = &m.calls[MB_DW];
  j.dwp = (oa_dwc_t){.w = (const float *)m.in[MB_DW][1]->data,
                     .bias = m.in[MB_DW][2] ? (const float *)m.in[MB_DW][2]->data : NULL, .h = g.h, .w_in = g.w,
                     .c = g.e, .kh = g.kh, .kw = g.kw, .sh = g.sh, .sw = g.sw, .ph = g.ph, .pw = g.pw, .dh = g.dh,
                     .dw = g.dw, .oh = g.oh, .ow = g.ow};
  oa_dwc_interior(&j.dwp);
  j.dwp.epi = oa_opt_epi_of(dwc, dwc->ints[OA_ARG_CONV2D_NHWC_ACT]);
  j.epi_e = oa_opt_epi_of(&m.calls[MB_EXPAND], m.calls[MB_EXPAND].ints[OA_ARG_CONV2D_NHWC_ACT]);
  j.epi_p = oa_opt_epi_of(&m.calls[MB_PROJECT], m.calls[MB_PROJECT].ints[OA_ARG_CONV2D_NHWC_ACT]);
  oa_parallel_for(env->pool, g.slots, 1, mb_slots, &j);
  return OA_OK;
}

OA_OPT_SHARED(mbconv_nhwc, OA_DT_F32)
