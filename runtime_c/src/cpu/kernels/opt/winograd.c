/* conv2d_winograd on the GEMM micro-kernels (opt.h), for every ISA.
 *
 * The exporter transformed the weights (sdk/openaccel/exporter/winograd.py): U[xi] for each of
 * the (m+2)^2 transform positions xi is a C x K matrix stored in panels of `block` (16) output
 * channels, [C][block] each: the packed B operand of the micro-kernels, read in place (NR = 16:
 * the packed kernel; NR = 8 or 4: the same panels through row offsets p * block). Per band of
 * tile rows of one image (bands bound the scratch: V and M of a band take at most BAND_FLOATS):
 *   1. input transform, threads over tile rows (winograd_transform.inc): V[xi] = tiles x C;
 *   2. (m+2)^2 GEMMs M[xi] (tiles x K) = V[xi] * U[xi], threads over (xi, row block, column
 *      block) tasks; V rows are the A operand read in place;
 *   3. output transform with bias, addend and activation, threads over tile rows.
 * A transform task covers every channel of its tile row, so it fills whole rows of V (and reads
 * whole rows of M) while they are in L2: tasks over channel blocks wrote (read) a part of every
 * line of V (M) each, and were 1.3x slower on ResNet-18's 56 x 56 layers.
 * Tiles are the rows of the GEMMs (M^T = V^T U^T rather than M = U V) so that the big operand,
 * U, is the prepacked one and small images still fill the 6-row tiles (7 x 7 outputs: 4 tiles).
 *
 * Layers whose transformed weights fit in half the L2 run in bands of that size instead. On
 * several threads, layers whose U is at most PER_THREAD_U_MAX give each thread an equal share of
 * the tiles, run alone (all three phases in its own buffers: nothing one core wrote is read by
 * the other); larger ones share each band, phase by phase, and read U once.
 *
 * Determinism: every V, M and output element is computed by one task with a fixed order of
 * operations (the K blocking over C depends on C only), whatever the thread count. */
#include <string.h>

#include "threadpool.h"
#include "kernels/opt/opt.h"
#include "kernels/opt/plan.h"

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif

/* plan->params */
enum { G_ISA, G_THREADS, G_ROWS };

/* V + M of one band (floats): 4 MB, so a band stays within the L2 / L3 of a core pair; half the
 * L2 (of 1 MB or more) when the transformed weights U fit in that too (see wino_geo) */
#define BAND_FLOATS ((int64_t)1 << 20)
#define BAND_L2_MIN_BYTES ((int64_t)1 << 20)
/* bands per thread (wino_geo_t.per_thread) also for transformed weights U up to this size, which
 * every thread then reads (from the L3): ResNet-18's 128- and 256-channel layers (U 2.4 and
 * 4.2 MB) 1.1x faster on 2 threads than with shared bands, whose transforms read what the other
 * core wrote; its 512-channel ones (U 16.8 MB, streamed from memory) keep one read of U */
#define PER_THREAD_U_MAX ((int64_t)8 << 20)
#define KC_MAX 256
/* GEMM tasks: rows of V (tiles) per task, columns of M (output channels) per task */
#define TASK_ROWS 96
#define TASK_COLS 64

extern const oa_wino_isa_t oa_wino_portable_isa;
#if defined(OA_BUILT_AVX2)
extern const oa_wino_isa_t oa_wino_avx2_isa;
#endif
#if defined(OA_BUILT_AVX512)
extern const oa_wino_isa_t oa_wino_avx512_isa;
#endif
#if defined(OA_BUILT_NEON)
extern const oa_wino_isa_t oa_wino_neon_isa;
#endif

static const oa_wino_isa_t *wino_isa(int32_t id) {
  switch (id) {
    case OA_ISA_PORTABLE: return &oa_wino_portable_isa;
#if defined(OA_BUILT_AVX2)
    case OA_ISA_AVX2: return &oa_wino_avx2_isa;
#endif
#if defined(OA_BUILT_AVX512)
    case OA_ISA_AVX512: return &oa_wino_avx512_isa;
#endif
#if defined(OA_BUILT_NEON)
    case OA_ISA_NEON: return &oa_wino_neon_isa;
#endif
#if defined(OA_BUILT_RVV)
    /* the RVV GEMM with the portable transforms (the transforms keep VW vectors in arrays, which
     * RVV's sizeless types cannot be) */
    case OA_ISA_RVV: return &oa_wino_portable_isa;
#endif
    default: return NULL;
  }
}


typedef struct wino_geo {
  int64_t n, c, h, w, k, oh, ow, m, a, ph, pw, act, block, kb;
  int64_t th, tw, ldv, ldm, nkb, kc;
  int64_t rows;   /* tile rows per band */
  int64_t work;   /* floats of a slot's transform buffer */
  int64_t off_v, off_m, off_work, total; /* scratch layout (floats) */
  int32_t vw, slots;
  /* bands per thread: each slot runs whole bands (all three phases) in its own V, M and work
   * buffers, slot s at off_v + s * slot_floats (off_m, off_work relative to it) */
  int32_t per_thread;
  int64_t slot_floats;
} wino_geo_t;

/* Geometry and scratch layout; the call was validated by the reference kernel's prepare.
 * Returns 0 when the scratch would be unreasonably large. */
static int wino_geo(const oa_op_call_t *call, const oa_opt_isa_t *isa, const oa_wino_isa_t *wi, int32_t threads,
                    wino_geo_t *g) {
  const oa_tensor_t *x = call->inputs[0], *out = call->outputs[0];
  g->n = x->shape[0];
  g->c = x->shape[1];
  g->h = x->shape[2];
  g->w = x->shape[3];
  g->k = out->shape[1];
  g->oh = out->shape[2];
  g->ow = out->shape[3];
  g->m = call->ints[OA_ARG_CONV2D_WINOGRAD_TILE];
  g->ph = call->ints[OA_ARG_CONV2D_WINOGRAD_PAD_H];
  g->pw = call->ints[OA_ARG_CONV2D_WINOGRAD_PAD_W];
  g->act = call->ints[OA_ARG_CONV2D_WINOGRAD_ACT];
  g->block = call->ints[OA_ARG_CONV2D_WINOGRAD_BLOCK];
  g->a = g->m + 2;
  g->kb = oa_cdiv(g->k, g->block);
  g->th = oa_cdiv(g->oh, g->m);
  g->tw = oa_cdiv(g->ow, g->m);
  g->vw = wi->vw;
  g->ldv = oa_cdiv(g->c, g->vw) * g->vw;
  g->ldm = oa_cdiv(g->k, isa->nr) * isa->nr; /* the GEMM stores whole NR-column panels */
  g->nkb = oa_cdiv(g->c, KC_MAX);
  g->kc = oa_cdiv(g->c, g->nkb);
  /* sizes are validated (< 2^50 elements); guard the products below against the scratch cap */
  const int64_t aa = g->a * g->a;
  if (g->tw > MAX_SCRATCH_FLOATS / (g->m + 2) || g->ldv + g->ldm > MAX_SCRATCH_FLOATS / aa / g->tw) return 0;
  const int64_t per_row = aa * g->tw * (g->ldv + g->ldm); /* V + M floats of one tile row */
  /* Bands within half the L2 when U is no larger: V is then written and M read back in L2 (every
   * band re-reads U, so not for layers whose U is larger). ResNet-18's 64-channel 56 x 56 layers
   * (U 0.6 MB) 1.35x faster with 1 MB bands on a 2 MB-L2 Xeon; the 128-channel ones (U 2.4 MB)
   * and larger stay at BAND_FLOATS. On several threads such bands are run one per thread, all
   * three phases each (the phases of a shared band are short and their barriers added up: the
   * 64-channel layer on 2 threads took 0.53 ms in shared 1 MB bands, 0.44 in one band of the
   * whole image, 0.34 ms one band per thread, 0.54 on one thread). */
  const int64_t l2 = oa_opt_l2_bytes(), u_bytes = oa_cap_mul((int64_t)call->inputs[1]->numel, (int64_t)sizeof(float));
  const int l2_bands = l2 >= BAND_L2_MIN_BYTES && u_bytes >= 0 && u_bytes <= l2 / 2;
  const int64_t band = l2_bands ? l2 / 2 / (int64_t)sizeof(float) : BAND_FLOATS;
  int64_t rows = band / per_row > 0 ? band / per_row : 1;
  g->per_thread = threads > 1 && g->n * g->th * g->tw > 1 && (l2_bands || (u_bytes >= 0 && u_bytes <= PER_THREAD_U_MAX));
  /* shared bands: the transforms split a band's tile rows between threads: a multiple of the
   * thread count (the nearest), so that no thread waits at the end of each phase (3 rows on 2
   * threads: 2 + 1) */
  if (!g->per_thread && threads > 1 && rows > threads) rows = (rows + threads / 2) / threads * threads;
  g->rows = oa_min64(g->th, rows);
  rows = g->rows;
  g->work = oa_round16((g->m + 2) * (g->tw * g->m + 2) * g->vw + 36 * g->vw);
  g->off_v = oa_round16(KC_MAX * 2); /* boff: KC_MAX int64 */
  const int64_t vf = oa_round16(aa * rows * g->tw * g->ldv), mf = oa_round16(aa * rows * g->tw * g->ldm);
  if (g->per_thread) {
    /* per slot: V, M, work (offsets relative to the slot) */
    g->slots = (int32_t)oa_min64(threads, g->n * g->th * g->tw);
    g->off_m = vf;
    g->off_work = vf + mf;
    g->slot_floats = vf + mf + g->work;
    if (g->slot_floats > (MAX_SCRATCH_FLOATS - g->off_v) / g->slots) return 0;
    g->total = g->off_v + g->slots * g->slot_floats;
    return 1;
  }
  g->slots = (int32_t)oa_min64(threads, rows);
  g->slot_floats = 0;
  g->off_m = g->off_v + vf;
  g->off_work = g->off_m + mf;
  if (g->work > (MAX_SCRATCH_FLOATS - g->off_work) / g->slots) return 0;
  g->total = g->off_work + g->slots * g->work;
  return 1;
}

static oa_status_t oa_opt_conv2d_winograd_prepare_isa(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                                oa_op_plan_t *plan, int32_t isa) {
  const oa_opt_isa_t *I = oa_opt_isa(isa);
  const oa_wino_isa_t *W = wino_isa(isa);
  if (!I || !W) return OA_ERR_UNSUPPORTED;
  memset(plan->params, 0, sizeof plan->params);
  plan->scratch_bytes = 0;
  const int64_t block = call->ints[OA_ARG_CONV2D_WINOGRAD_BLOCK];
  if (block % I->pw != 0 || I->nr % W->vw != 0) return OA_ERR_UNSUPPORTED;
  /* no input channels (the output is the bias) or no images: the reference kernel (the blocking
   * below divides by the channel count) */
  if (!call->inputs[0]->numel) return OA_ERR_UNSUPPORTED;
  const int32_t threads = env ? oa_opt_threads(env->pool) : 1;
  wino_geo_t g;
  if (!wino_geo(call, I, W, threads, &g)) return OA_ERR_UNSUPPORTED;
  if ((uint64_t)g.total > (SIZE_MAX - 64) / sizeof(float)) return OA_ERR_UNSUPPORTED;
  plan->params[G_ISA] = isa;
  plan->params[G_THREADS] = threads;
  plan->params[G_ROWS] = g.rows;
  plan->scratch_bytes = (size_t)g.total * sizeof(float);
  return OA_OK;
}

/* ---- running --------------------------------------------------------------------------------- */

typedef struct wino_ctx {
  const oa_opt_isa_t *isa;
  const oa_wino_isa_t *wi;
  const wino_geo_t *g;
  const oa_wino_band_t *band;
  const float *u;
  const int64_t *boff;
  float *work;
  int64_t blocks;    /* tile rows of the transform phase */
  int64_t tiles;     /* tiles of the band (GEMM rows) */
  int64_t row_tasks, col_tasks;
  int64_t nslots;    /* slots of the transform phase */
  int output;        /* transform phase: 0 input, 1 output */
#if !defined(__STDC_NO_ATOMICS__)
  atomic_llong next;
#endif
} wino_ctx_t;

/* transform phase: slot s takes tile rows from the shared counter (a static split without
 * C11 atomics) and uses its own work buffer */
static void transform_slots(void *ctx, int64_t s0, int64_t s1) {
  wino_ctx_t *x = (wino_ctx_t *)ctx;
  for (int64_t s = s0; s < s1; s++) {
    float *work = x->work + s * x->g->work;
#if !defined(__STDC_NO_ATOMICS__)
    for (int64_t blk; (blk = (int64_t)atomic_fetch_add(&x->next, 1)) < x->blocks;) {
#else
    for (int64_t blk = s * x->blocks / x->nslots; blk < (s + 1) * x->blocks / x->nslots; blk++) {
#endif
      if (x->output)
        x->wi->output(x->band, blk, blk + 1, work);
      else
        x->wi->input(x->band, blk, blk + 1, work);
    }
  }
}

static void transform(wino_ctx_t *cx, int output, int64_t blocks, struct oa_threadpool *pool) {
  cx->output = output;
  cx->blocks = blocks;
  cx->nslots = oa_min64(cx->g->slots, blocks);
#if !defined(__STDC_NO_ATOMICS__)
  atomic_store(&cx->next, 0);
#endif
  oa_parallel_for(pool, cx->nslots, 1, transform_slots, cx);
}

/* GEMM tasks t = (xi, row block, column block): M[xi][rows][cols] = V[xi][rows][:] * U[xi][:, cols] */
static void gemm_tasks(void *ctx, int64_t t0, int64_t t1) {
  const wino_ctx_t *x = (const wino_ctx_t *)ctx;
  const wino_geo_t *g = x->g;
  const oa_wino_band_t *b = x->band;
  const oa_opt_isa_t *isa = x->isa;
  const int32_t mr = isa->mr, nr = isa->nr, pw = isa->pw;
  const oa_uk_epi_t epi = {NULL, NULL, 0, 0.0f, 0.0f};
  const int64_t per_xi = x->row_tasks * x->col_tasks;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t xi = t / per_xi, rb = t % per_xi / x->col_tasks, cb = t % x->col_tasks;
    const int64_t i0 = rb * TASK_ROWS, i1 = oa_min64(i0 + TASK_ROWS, x->tiles);
    /* columns up to M's row (ldm: whole NR tiles) and the zero-padded panels of U (kb * block;
     * a 32-wide tile never reads a panel past them) */
    const int64_t j0 = cb * TASK_COLS, j1 = oa_min64(j0 + TASK_COLS, oa_min64(g->ldm, g->kb * g->block));
    const float *v = b->v + xi * b->sv;
    float *mm = (float *)b->mm + xi * b->sm;
    const float *u = x->u + xi * g->kb * g->c * g->block;
    /* panels outside, K blocks inside: U is read in its memory order (one stream per task; with
     * K blocks outside, every panel was a new 16 KB stream, and U, read once per run from
     * DRAM, is what bounds the layers with few tiles) */
    for (int64_t j = j0; j < j1; j += nr) {
      for (int64_t kb = 0; kb < g->nkb; kb++) {
        const int64_t c0 = kb * g->kc, kcur = oa_min64(g->kc, g->c - c0);
        const uint32_t flags = kb > 0 ? OA_UK_ACCUM : 0u;
        const float *panel = u + (j / g->block) * g->c * g->block + c0 * g->block + j % g->block;
        for (int64_t i = i0; i < i1; i += mr) {
          const int32_t mcur = (int32_t)oa_min64(mr, i1 - i);
          const int32_t ncq = (int32_t)oa_min64(nr, j1 - j);
          if (g->block == pw) /* the tile's packed layout: the next panel of U is C * block further */
            isa->gemm(kcur, v + i * b->ldv + c0, b->ldv, panel, g->c * g->block, mm + i * b->ldm + j, b->ldm, 1, mcur,
                      ncq, flags, &epi);
          else
            isa->gemm_ind(kcur, v + i * b->ldv + c0, b->ldv, panel, x->boff, mm + i * b->ldm + j, b->ldm, 1, mcur, ncq,
                          flags, &epi);
        }
      }
    }
  }
}

/* The band's tiles t0 .. t1 and the tile rows they touch */
static void band_tiles(oa_wino_band_t *b, int64_t t0, int64_t t1) {
  b->t0 = t0;
  b->t1 = t1;
  b->ty0 = t0 / b->tw;
  b->ty1 = oa_cdiv(t1, b->tw);
}

/* The three phases on the band cx->band (tiles t0 .. t1 of one image). */
static void run_band(wino_ctx_t *cx, struct oa_threadpool *pool) {
  const wino_geo_t *g = cx->g;
  const oa_wino_band_t *band = cx->band;
  cx->tiles = band->t1 - band->t0;
  /* 1. input transform */
  transform(cx, 0, band->ty1 - band->ty0, pool);
  /* 2. the GEMMs */
  cx->row_tasks = oa_cdiv(cx->tiles, TASK_ROWS);
  cx->col_tasks = oa_cdiv(g->ldm, TASK_COLS);
  oa_parallel_for(pool, g->a * g->a * cx->row_tasks * cx->col_tasks, 1, gemm_tasks, cx);
  /* 3. output transform */
  transform(cx, 1, band->ty1 - band->ty0, pool);
}

/* bands per thread (wino_geo_t.per_thread): slot s takes an equal share of all images' tiles
 * (tiles s * total / slots .., in raster order) and runs it alone in its own buffers, in bands of
 * at most g->rows * tw tiles that stay inside one image. Equal shares of tiles, not whole bands
 * or tile rows: 7 tile rows (a 28 x 28 output in 4 x 4 tiles) went 4 + 3 on 2 threads, 14 rows
 * in bands of 4 as 8 + 6. */
typedef struct band_jobs {
  const wino_ctx_t *proto; /* the shared fields (isa, tables, U, row offsets) */
  const oa_wino_band_t *band; /* the band fields every band shares */
  const float *x, *addend;
  float *y, *scratch;
  int64_t total; /* tiles of all images */
} band_jobs_t;

static void band_slots(void *ctx, int64_t s0, int64_t s1) {
  band_jobs_t *j = (band_jobs_t *)ctx;
  const wino_geo_t *g = j->proto->g;
  for (int64_t s = s0; s < s1; s++) {
    float *slot = j->scratch + g->off_v + s * g->slot_floats;
    wino_geo_t g1 = *g;
    g1.slots = 1; /* the phases of this slot's band run on this thread alone */
    oa_wino_band_t band = *j->band;
    band.v = slot;
    band.mm = slot + g->off_m;
    wino_ctx_t cx = *j->proto;
    cx.g = &g1;
    cx.band = &band;
    cx.work = slot + g->off_work;
    const int64_t per_image = g->th * g->tw, t1 = (s + 1) * j->total / g->slots;
    for (int64_t t = s * j->total / g->slots; t < t1;) {
      const int64_t nb = t / per_image, first = t % per_image;
      band.x = j->x + nb * g->c * g->h * g->w;
      band.y = j->y + nb * g->k * g->oh * g->ow;
      band.addend = j->addend ? j->addend + nb * g->k * g->oh * g->ow : NULL;
      band_tiles(&band, first, oa_min64(oa_min64(first + g->rows * g->tw, per_image), first + (t1 - t)));
      run_band(&cx, NULL);
      t += band.t1 - band.t0;
    }
  }
}

oa_status_t oa_opt_conv2d_winograd_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                        const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)diag;
  const int32_t id = (int32_t)plan->params[G_ISA];
  const oa_opt_isa_t *isa = oa_opt_isa(id);
  const oa_wino_isa_t *wi = wino_isa(id);
  wino_geo_t g;
  wino_geo(call, isa, wi, (int32_t)plan->params[G_THREADS], &g);
  float *s = (float *)scratch;
  int64_t *boff = (int64_t *)(void *)s;
  for (int64_t p = 0; p < KC_MAX; p++) boff[p] = p * g.block;
  const float *x = (const float *)call->inputs[0]->data;
  const oa_tensor_t *tb = call->n_inputs > 2 ? call->inputs[2] : NULL;
  const oa_tensor_t *ta = call->n_inputs > 3 ? call->inputs[3] : NULL;
  float *y = (float *)call->outputs[0]->data;
  oa_wino_band_t band;
  band.c = g.c;
  band.h = g.h;
  band.w = g.w;
  band.ph = g.ph;
  band.pw = g.pw;
  band.m = g.m;
  band.tw = g.tw;
  band.v = s + g.off_v;
  band.ldv = g.ldv;
  band.sv = g.rows * g.tw * g.ldv;
  band.mm = s + g.off_m;
  band.ldm = g.ldm;
  band.sm = g.rows * g.tw * g.ldm;
  band.bias = tb ? (const float *)tb->data : NULL;
  band.k = g.k;
  band.oh = g.oh;
  band.ow = g.ow;
  band.epi.bias = NULL;
  band.epi.bias_col = NULL;
  band.epi.act = (int32_t)g.act;
  band.epi.lo = call->n_floats > OA_ARG_CONV2D_WINOGRAD_ACT_MIN ? (float)call->floats[OA_ARG_CONV2D_WINOGRAD_ACT_MIN]
                                                                 : 0.0f;
  band.epi.hi = call->n_floats > OA_ARG_CONV2D_WINOGRAD_ACT_MAX ? (float)call->floats[OA_ARG_CONV2D_WINOGRAD_ACT_MAX]
                                                                 : 0.0f;
  wino_ctx_t cx;
  cx.isa = isa;
  cx.wi = wi;
  cx.g = &g;
  cx.band = &band;
  cx.u = (const float *)call->inputs[1]->data;
  cx.boff = boff;
  cx.work = s + g.off_work;
#if !defined(__STDC_NO_ATOMICS__)
  atomic_init(&cx.next, 0);
#endif
  const float *addend = ta ? (const float *)ta->data : NULL;
  if (g.per_thread) {
    band_jobs_t j;
    j.proto = &cx;
    j.band = &band;
    j.x = x;
    j.addend = addend;
    j.y = y;
    j.scratch = s;
    j.total = g.n * g.th * g.tw;
    oa_parallel_for(env->pool, g.slots, 1, band_slots, &j);
    return OA_OK;
  }
  for (int64_t nb = 0; nb < g.n; nb++) {
    band.x = x + nb * g.c * g.h * g.w;
    band.y = y + nb * g.k * g.oh * g.ow;
    band.addend = addend ? addend + nb * g.k * g.oh * g.ow : NULL;
    for (int64_t ty0 = 0; ty0 < g.th; ty0 += g.rows) {
      band_tiles(&band, ty0 * g.tw, oa_min64(ty0 + g.rows, g.th) * g.tw);
      run_band(&cx, env->pool);
    }
  }
  return OA_OK;
}

OA_OPT_SHARED(conv2d_winograd, OA_DT_F32)
