/* The blocked GEMM driver (see opt.h), the B packers, and the portable micro-kernels.
 *
 * Blocking (after MLAS / BLIS, measured on Zen3 with the 6x16 AVX2 tile):
 *   K is split into nkb = ceil(K / 256) equal blocks (kc <= 256): a B panel (kc x 16 floats =
 *   16 KB) and the A rows of one tile (6 x kc) stay in L1 while a tile is computed.
 *   N is split into column blocks of nc columns so that a packed kc x nc block of B (<= 256 KB)
 *   stays in L2 while every row tile of A passes over it.
 *   Per K block: (pack B block) -> for each row tile (MR rows of A, read in place) -> for each
 *   panel of the block -> micro-kernel. C is written after the first K block and re-read (and
 *   added to) in the later ones; bias goes in with the first block, the activation with the last.
 *
 * B comes in one of three ways (oa_gemm_blocking_t.mode):
 *   PACK_PER_TASK  tasks are column blocks; each thread packs its B blocks into its own slot
 *   PACK_ALL       B is packed once (in parallel), tasks are (row block x column block) tiles:
 *                  used when there are too few column blocks to share between threads
 *   DIRECT         nothing is packed: row p of the NR columns at j is at b + boff[p] + j (the
 *                  convolution's zero-padded input, see opt/conv.c); tasks are tiles. A panel cut by
 *                  the end of N is copied into a zero-padded panel first (no read past B).
 *                  With args.bblock, B was packed at export into zero-padded panels of bblock
 *                  columns ([K][bblock] each: channels-last conv weights, conv_nhwc.c), read as
 *                  packed panels (bblock = NR) or through row offsets (bblock a multiple of NR).
 *
 * A is read in place unless its row stride makes the MR rows of a tile fall into the same few L1
 * sets (e.g. lda = 1024 floats: every row 4 KB apart, all in one set with the B panel's lines,
 * measured 1.5x slower on 1024^3): then each A tile is first copied to a small buffer with a
 * padded row stride (same values, same order of operations).
 *
 * Threads: each of `slots` (at most the pool size) workers has its own scratch and takes tasks
 * from a shared counter until none is left (a static split without C11 atomics). Only outputs
 * are split, K blocking depends on the shape alone, so every output element is computed by the
 * same instructions whatever the thread count and whichever thread computes it. */
#include <string.h>

#include "threadpool.h"
#include "kernels/opt/opt.h"

#if !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
#endif

#define KC_MAX 512
/* K block of the 16-lane ISA (AVX-512) / of the others: see oa_gemm_plan */
#define KC_WIDE 512
#define KC_NARROW 256
/* A tiles copied to a compact buffer have this row stride (floats): KC_MAX + one cache line, so
 * consecutive rows start in different L1 sets */
#define A_LD (KC_MAX + 16)
#define MR_MAX 12 /* the AVX-512 tile's rows */
#define NR_MAX 32 /* the AVX-512 tile's columns */
#define B_BLOCK_BYTES ((int64_t)256 * 1024)
/* the 16-lane ISA's B block: half the L2 within these bounds (512 KB when the L2 is unknown) */
#define B_BLOCK_WIDE_MIN ((int64_t)512 * 1024)
#define B_BLOCK_WIDE_MAX ((int64_t)1024 * 1024)
/* rows of A passed over one B panel while it stays in L1 (an A block of <= 128 KB stays in L2) */
#define A_BLOCK_BYTES ((int64_t)128 * 1024)
/* DIRECT B up to this size (one K block of the task's columns) is treated as L1-resident */
#define DIRECT_L1_BYTES ((int64_t)16 * 1024)
/* DIRECT B of at most this depth (an image stem: 3 channels x 7 x 7 = 147) runs row tiles outside */
#define DIRECT_SMALL_K 160
#define PANEL_L1_BYTES ((int64_t)32 * 1024)
#define PACK_ALL_MAX_BYTES ((int64_t)4 * 1024 * 1024)
/* per-slot scratch besides a B block: an A tile and one B panel, rounded to 64 bytes */
#define SLOT_FIXED_FLOATS ((int64_t)(MR_MAX * A_LD + KC_MAX * NR_MAX))

int32_t oa_opt_threads(const struct oa_threadpool *pool) { return oa_threadpool_size(pool); }

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t oa_opt_l2_bytes(void) {
#if !defined(__STDC_NO_ATOMICS__)
  static atomic_llong cached = -1;
  long long v = atomic_load(&cached);
  if (v < 0) {
    oa_cpu_features_t f;
    oa_cpu_detect(&f);
    v = f.l2_bytes > 0 ? f.l2_bytes : 0;
    atomic_store(&cached, v);
  }
  return (int64_t)v;
#else
  return 0;
#endif
}

/* ---- epilogue of partial tiles -------------------------------------------------------------- */

void oa_uk_store_tile(const float *tmp, int64_t ld_tmp, float *c, int64_t rs_c, int64_t cs_c, int32_t mr,
                      int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  for (int32_t i = 0; i < mr; i++) {
    float *ci = c + i * rs_c;
    const float *ti = tmp + i * ld_tmp;
    const float b = epi->bias ? epi->bias[i] : 0.0f;
    for (int32_t j = 0; j < nr; j++) {
      float v = ti[j];
      if (flags & OA_UK_ACCUM) v += ci[j * cs_c];
      else if (epi->bias) v += b;
      else if (epi->bias_col) v += epi->bias_col[j];
      if (flags & OA_UK_LAST) v = oa_opt_act(v, epi);
      ci[j * cs_c] = v;
    }
  }
}

/* ---- portable micro-kernels ------------------------------------------------------------------ */
/* They stay beside the driver rather than in arch/portable/ (where the other portable instances
 * are): here oa_uk_store_tile, their epilogue, can be inlined into them (the boards without SIMD
 * kernels, rv64gc, run them); the AVX2 / NEON tiles call it only for partial tiles. */

/* 4 x PNR: 4 x 8 where the compiler has 16 vector registers of 4 floats (SSE2 on x86-64),
 * 4 x 4 elsewhere (scalar FPUs with 32 registers, e.g. rv64gc: 16 accumulators + 8 operands). */
#if defined(__x86_64__) || defined(__SSE2__)
#define PNR 8
#else
#define PNR 4
#endif

#define PORTABLE_GEMM_BODY(BROW)                                                          \
  const float *a0 = a;                                                                    \
  const float *a1 = a + (mr > 1 ? 1 : 0) * lda;                                           \
  const float *a2 = a + (mr > 2 ? 2 : mr - 1) * lda;                                      \
  const float *a3 = a + (mr > 3 ? 3 : mr - 1) * lda;                                      \
  float acc[4][PNR];                                                                      \
  for (int j = 0; j < PNR; j++) acc[0][j] = acc[1][j] = acc[2][j] = acc[3][j] = 0.0f;     \
  for (int64_t p = 0; p < kc; p++) {                                                      \
    const float *bp = BROW;                                                               \
    const float x0 = a0[p], x1 = a1[p], x2 = a2[p], x3 = a3[p];                           \
    for (int j = 0; j < PNR; j++) {                                                       \
      acc[0][j] += x0 * bp[j];                                                            \
      acc[1][j] += x1 * bp[j];                                                            \
      acc[2][j] += x2 * bp[j];                                                            \
      acc[3][j] += x3 * bp[j];                                                            \
    }                                                                                     \
  }                                                                                       \
  oa_uk_store_tile(&acc[0][0], PNR, c, rs_c, cs_c, mr, nr, flags, epi)

void oa_portable_gemm(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                      int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  (void)bs; /* PW = NR: one panel */
  PORTABLE_GEMM_BODY(b + p * PNR);
}

void oa_portable_gemm_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                          int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  PORTABLE_GEMM_BODY(b + boff[p]);
}

void oa_portable_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w,
                      const float *bias, float *y, int64_t ldy, const oa_uk_epi_t *epi) {
  for (int64_t i = 0; i < m; i++) {
    const float *xr = x + i * ldx;
    float *yr = y + i * ldy;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      for (int64_t p = 0; p < k; p++) {
        const float xv = xr[p];
        s0 += xv * w0[p];
        s1 += xv * w1[p];
        s2 += xv * w2[p];
        s3 += xv * w3[p];
      }
      if (bias) {
        s0 += bias[j];
        s1 += bias[j + 1];
        s2 += bias[j + 2];
        s3 += bias[j + 3];
      }
      yr[j] = oa_opt_act(s0, epi);
      yr[j + 1] = oa_opt_act(s1, epi);
      yr[j + 2] = oa_opt_act(s2, epi);
      yr[j + 3] = oa_opt_act(s3, epi);
    }
    for (; j < n; j++) {
      const float *w0 = w + j * k;
      float s0 = 0.0f;
      for (int64_t p = 0; p < k; p++) s0 += xr[p] * w0[p];
      if (bias) s0 += bias[j];
      yr[j] = oa_opt_act(s0, epi);
    }
  }
}

/* ---- packers --------------------------------------------------------------------------------- */

void oa_pack_rowmajor(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  const oa_pack_dense_t *pd = (const oa_pack_dense_t *)ctx;
  for (int64_t q = 0; q * nr < nc; q++) {
    const int64_t jq = j0 + q * nr, w = min64(nr, nc - q * nr);
    float *d = dst + q * kc * nr;
    const float *s = pd->b + k0 * pd->ldb + jq;
    if (w == 16 && nr == 16) {
      for (int64_t p = 0; p < kc; p++) memcpy(d + p * 16, s + p * pd->ldb, 16 * sizeof(float));
    } else if (w == 8 && nr == 8) {
      for (int64_t p = 0; p < kc; p++) memcpy(d + p * 8, s + p * pd->ldb, 8 * sizeof(float));
    } else {
      for (int64_t p = 0; p < kc; p++) {
        float *dp = d + p * nr;
        const float *sp = s + p * pd->ldb;
        int64_t j = 0;
        for (; j < w; j++) dp[j] = sp[j];
        for (; j < nr; j++) dp[j] = 0.0f;
      }
    }
  }
}

void oa_pack_transposed(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  const oa_pack_dense_t *pd = (const oa_pack_dense_t *)ctx;
  for (int64_t q = 0; q * nr < nc; q++) {
    const int64_t jq = j0 + q * nr, w = min64(nr, nc - q * nr);
    float *d = dst + q * kc * nr;
    int64_t jj = 0;
    for (; jj < w; jj++) {
      const float *s = pd->b + (jq + jj) * pd->ldb + k0;
      for (int64_t p = 0; p < kc; p++) d[p * nr + jj] = s[p];
    }
    for (; jj < nr; jj++)
      for (int64_t p = 0; p < kc; p++) d[p * nr + jj] = 0.0f;
  }
}

/* ---- blocking -------------------------------------------------------------------------------- */

/* Most tile rows sharing one of the 64 L1 set indices when MR rows of kc floats, lda apart, are
 * read (4 KB of address space per set index round; lines of 16 floats) */
static int a_conflicts(int64_t lda, int64_t mr, int64_t kc) {
  int count[64] = {0}, worst = 0;
  const int64_t lines = min64((kc + 15) / 16, 64);
  for (int64_t r = 0; r < mr; r++) {
    const int64_t first = ((r * (lda % 1024)) % 1024) / 16;
    for (int64_t l = 0; l < lines; l++) {
      int c = ++count[(first + l) % 64];
      if (c > worst) worst = c;
    }
  }
  return worst > 3;
}

/* The tile split on several threads: rows in blocks of *mc (a multiple of mr), columns in blocks
 * of *nc panels (at least min_ct blocks: the L2 bound), chosen so that the busiest thread has the
 * least work when the threads take the tasks in order from the shared counter (each task to the
 * thread that is free first, simulated), then the fewest tasks. A task's work: its multiply-adds
 * per k (rows x columns) plus SPLIT_OPERAND_COST per row of A and column of B it reads (a split
 * that reads an operand twice costs memory traffic: ResNet-18's 512 x 56 x 2304 layer, whose A
 * is 4.7 MB, 1.25x slower in column halves). Fixed rules left threads idle: 128 rows in 6 tasks
 * of 24 rows, the last of 8 (2 threads: 3 tiles against 2 and a bit), 256 rows in tasks of 36,
 * the last of 4. *nc is in columns (whole panels). */
#define SPLIT_SIM_THREADS 16
#define SPLIT_OPERAND_COST 16
static void split_tiles(int64_t m, int32_t mr, int32_t nr, int64_t panels, int64_t min_ct, int32_t threads,
                        int64_t *mc, int64_t *nc) {
  const int64_t t = threads, tiles = cdiv(m, mr);
  int64_t best_load = -1, best_tasks = 0, best_pr = tiles, best_pc = cdiv(panels, min_ct);
  if (t > SPLIT_SIM_THREADS) { /* not simulated: about 4 tasks a thread */
    best_pc = cdiv(panels, max64(min_ct, min64(panels, 4 * t)));
  } else {
    for (int64_t ct = min_ct; ct <= max64(min_ct, min64(panels, 4 * t)); ct++) {
      const int64_t pc = cdiv(panels, ct), ct2 = cdiv(panels, pc);
      for (int64_t rt = 1; rt <= tiles && rt * ct2 <= 8 * t; rt++) {
        const int64_t pr = cdiv(tiles, rt), rt2 = cdiv(tiles, pr), tasks = rt2 * ct2;
        if (tasks < t && rt < tiles) continue;
        int64_t load[SPLIT_SIM_THREADS] = {0}, worst = 0;
        for (int64_t i = 0; i < tasks; i++) {
          const int64_t rb = i / ct2, cb = i % ct2;
          const int64_t rows = min64(m, (rb + 1) * pr * mr) - rb * pr * mr;
          const int64_t cols = (min64(panels, (cb + 1) * pc) - cb * pc) * nr;
          const int64_t w = rows * cols + SPLIT_OPERAND_COST * (rows + cols);
          int64_t f = 0;
          for (int64_t q = 1; q < t; q++) f = load[q] < load[f] ? q : f;
          load[f] += w;
          worst = max64(worst, load[f]);
        }
        if (best_load < 0 || worst < best_load || (worst == best_load && tasks < best_tasks)) {
          best_load = worst;
          best_tasks = tasks;
          best_pr = pr;
          best_pc = pc;
        }
      }
    }
  }
  *mc = best_pr * mr;
  *nc = best_pc * nr;
}

void oa_gemm_plan(const oa_opt_isa_t *isa, int64_t m, int64_t n, int64_t k, int64_t lda, int32_t direct,
                  int32_t threads, oa_gemm_blocking_t *out) {
  memset(out, 0, sizeof *out);
  const int64_t mr = isa->mr, nr = isa->nr;
  if (threads < 1) threads = 1;
  /* K blocks: C is read and written once per block, so larger blocks save C traffic as long as
   * an A tile (MR x kc) stays in L1: kc 512 for the 12-row AVX-512 tile (24 KB of the >= 32 KB
   * L1 of AVX-512 cores; 1024^3 on a Sapphire Rapids class Xeon: C is 4 MB, past L2, and its
   * four passes at kc 256 cost ~10%), 256 for the others (6 x 256 floats, measured on Zen 3) */
  const int64_t kc_max = isa->vw >= 16 ? KC_WIDE : KC_NARROW;
  out->nkb = k > 0 ? cdiv(k, kc_max) : 1;
  out->kc = k > 0 ? cdiv(k, out->nkb) : 0;
  out->slots = 1;
  out->mode = direct ? OA_GEMM_DIRECT : OA_GEMM_PACK_PER_TASK;
  if (m <= 0 || n <= 0 || k <= 0) return; /* nothing to pack (k == 0: bias / zeros only) */
  out->pack_a = a_conflicts(lda, mr, out->kc);
  const int64_t npad = cdiv(n, nr) * nr;
  /* AVX-512 CPUs have >= 1 MB of L2 (Skylake-SP, Zen 4/5; 2 MB on Sapphire Rapids): a B block of
   * half the L2, so each row of A is re-read as rarely as the L2 allows (1024^3 on a Sapphire
   * Rapids class Xeon, 2 MB L2: 1 MB blocks 1.03x faster than 512 KB) */
  const int64_t b_block = isa->vw >= 16 ? min64(max64(oa_opt_l2_bytes() / 2, B_BLOCK_WIDE_MIN), B_BLOCK_WIDE_MAX)
                                        : B_BLOCK_BYTES;
  int64_t nc = (b_block / (int64_t)sizeof(float) / out->kc) / nr * nr;
  nc = min64(max64(nc, nr), npad);
  out->mc = m;
  out->nc = nc;
  int64_t col_tasks = cdiv(npad, nc);
  int64_t shared = 0;
  if (direct || (threads > 1 && col_tasks < 2 * (int64_t)threads &&
                 k * npad <= PACK_ALL_MAX_BYTES / (int64_t)sizeof(float))) {
    /* tiles: row blocks x column blocks */
    if (!direct) out->mode = OA_GEMM_PACK_ALL;
    out->mc = cdiv(m, mr) * mr;
    if (threads > 1) split_tiles(m, (int32_t)mr, (int32_t)nr, npad / nr, col_tasks, threads, &out->mc, &out->nc);
    out->n_tasks = cdiv(npad, out->nc) * cdiv(m, out->mc);
    shared = direct ? 0 : k * npad;
  } else {
    if (threads > 1 && col_tasks < 2 * (int64_t)threads) {
      out->nc = max64(nr, cdiv(cdiv(npad, 2 * (int64_t)threads), nr) * nr);
    }
    out->n_tasks = cdiv(npad, out->nc);
  }
  out->slots = (int32_t)min64(threads, out->n_tasks);
  /* slots start on 64-byte boundaries (scratch itself is 64-byte aligned) */
  out->slot_floats = (SLOT_FIXED_FLOATS + (out->mode == OA_GEMM_PACK_PER_TASK ? out->kc * out->nc : 0) + 15) / 16 * 16;
  out->shared_floats = (shared + 15) / 16 * 16;
  out->scratch_floats = shared + out->slots * out->slot_floats;
}

/* ---- running --------------------------------------------------------------------------------- */

typedef struct gemm_ctx {
  const oa_opt_isa_t *isa;
  const oa_gemm_blocking_t *blk;
  const oa_gemm_args_t *g;
  float *scratch;
  int64_t npad;
#if !defined(__STDC_NO_ATOMICS__)
  atomic_llong next; /* next task to take */
#endif
} gemm_ctx_t;

/* the next task for slot s, or -1; *cursor is the slot's position in a static split */
static int64_t take_task(gemm_ctx_t *x, int64_t s, int64_t *cursor) {
#if !defined(__STDC_NO_ATOMICS__)
  (void)s;
  (void)cursor;
  const int64_t t = (int64_t)atomic_fetch_add(&x->next, 1);
  return t < x->blk->n_tasks ? t : -1;
#else
  const int64_t t1 = (s + 1) * x->blk->n_tasks / x->blk->slots;
  if (*cursor < 0) *cursor = s * x->blk->n_tasks / x->blk->slots;
  return *cursor < t1 ? (*cursor)++ : -1;
#endif
}

/* Where the micro-kernel reads rows i .. i + mcur of A (columns k0 .. k0 + kcur) and their stride:
 * in place, or copied to the compact buffer `abuf` when lda would alias in L1 (pack_a; a single
 * tile of the block was copied once already: `pack_one`). */
static inline const float *a_tile(const gemm_ctx_t *x, float *abuf, int pack_one, int64_t i, int64_t k0,
                                  int64_t kcur, int32_t mcur, int64_t *lda) {
  const oa_gemm_args_t *g = x->g;
  const float *ai = g->a + i * g->lda + k0;
  if (!pack_one && !x->blk->pack_a) {
    *lda = g->lda;
    return ai;
  }
  if (!pack_one)
    for (int32_t r = 0; r < mcur; r++) memcpy(abuf + r * A_LD, ai + r * g->lda, (size_t)kcur * sizeof(float));
  *lda = A_LD;
  return abuf;
}

/* Where virtual column j of C is stored (oa_gemm_args_t.vrow; j % vrow < vcols), or j itself */
static inline int64_t c_column(const oa_gemm_args_t *g, int64_t j) {
  return g->vrow ? j / g->vrow * g->vcols + j % g->vrow : j;
}

/* A tile of virtual columns j .. j + ncq (oa_gemm_args_t.vrow; cs_c = 1) that crosses a row end,
 * through the buffer vt (row stride NR_MAX), one run of kept columns at a time: store = 0 loads
 * C's kept columns into it (only when the kernel accumulates; the dropped columns are left as
 * they are: their sums are never stored), store = 1 writes them back. */
static void virt_tile_io(const oa_gemm_args_t *g, int64_t i, int32_t mcur, int64_t j, int32_t ncq, float *vt,
                         int store, int load) {
  if (!store && !load) return;
  for (int64_t c = 0; c < ncq;) {
    const int64_t vj = j + c, off = vj % g->vrow;
    if (off >= g->vcols) {
      c += g->vrow - off;
      continue;
    }
    const int64_t run = min64(g->vcols - off, ncq - c);
    float *col = g->c + i * g->rs_c + c_column(g, vj);
    for (int32_t r = 0; r < mcur; r++) {
      if (store)
        memcpy(col + r * g->rs_c, vt + r * NR_MAX + c, (size_t)run * sizeof(float));
      else
        memcpy(vt + r * NR_MAX + c, col + r * g->rs_c, (size_t)run * sizeof(float));
    }
    c += run;
  }
}

/* The micro-kernel call for rows i .. i + mcur (A tile ai) and columns j0 + q .. of the block
 * (K block from k0): packed panel, pre-packed panel, the zero-padded copy of a cut DIRECT panel
 * (q == qcut), or DIRECT B in place. */
static inline void one_tile(const gemm_ctx_t *x, const float *ai, int64_t lda, int64_t i, int32_t mcur, int64_t j0,
                            int64_t q, int64_t ncur, int64_t k0, int64_t kcur, const float *bp, const float *pbuf,
                            int64_t qcut, uint32_t flags) {
  const oa_gemm_args_t *g = x->g;
  const oa_opt_isa_t *isa = x->isa;
  const int32_t nr = isa->nr, pw = isa->pw, ncq = (int32_t)min64(nr, ncur - q);
  const oa_uk_epi_t epi = {g->bias ? g->bias + i : NULL, g->bias_col ? g->bias_col + j0 + q : NULL, g->act, g->lo,
                           g->hi};
  const int64_t j = j0 + q, bb = g->bblock;
  float *ci = g->c + i * g->rs_c + c_column(g, j) * g->cs_c;
  float vt[MR_MAX * NR_MAX]; /* a tile of virtual columns that crosses a row end */
  int64_t rs = g->rs_c, cs = g->cs_c;
  int virt_tile = 0;
  if (g->vrow) {
    if (j % g->vrow + ncq > g->vcols) {
      virt_tile = 1;
      virt_tile_io(g, i, mcur, j, ncq, vt, 0, (flags & OA_UK_ACCUM) != 0);
      ci = vt;
      rs = NR_MAX;
      cs = 1;
    }
  }
  if (bp) {
    isa->gemm(kcur, ai, lda, bp + (q / pw) * kcur * pw, kcur * pw, ci, rs, cs, mcur, ncq, flags, &epi);
  } else if (bb) {
    /* panels of bb = PW columns are the tile's packed layout (the next panel K * bb further);
     * wider ones (a multiple of NR) are read through row offsets */
    const float *panel = g->b + (j / bb) * g->k * bb + j % bb;
    if (bb == pw)
      isa->gemm(kcur, ai, lda, panel + k0 * bb, g->k * bb, ci, rs, cs, mcur, ncq, flags, &epi);
    else
      isa->gemm_ind(kcur, ai, lda, panel, g->boff + k0, ci, rs, cs, mcur, ncq, flags, &epi);
  } else if (q == qcut) {
    isa->gemm(kcur, ai, lda, pbuf, kcur * pw, ci, rs, cs, mcur, ncq, flags, &epi);
  } else {
    isa->gemm_ind(kcur, ai, lda, g->b + j, g->boff + k0, ci, rs, cs, mcur, ncq, flags, &epi);
  }
  if (virt_tile) virt_tile_io(g, i, mcur, j, ncq, vt, 1, 0);
}

/* Rows of the row tile at i of a block ending at ie: MR, except that fewer than MR / 2 rows are
 * not left to a tile of their own: the last MR + r rows become two tiles of about equal size. A
 * 1-row tile of the 6x16 kernel waits on its two accumulators' FMA latency (4 cycles a k step
 * for a sixth of the work); MobileNet's 7x7 maps are 49 rows: ... 6, 6, 4, 3 instead of ... 6,
 * 6, 6, 1. Every element is computed by the same operations whatever the tile's row count. */
static inline int32_t tile_rows(int64_t i, int64_t ie, int32_t mr) {
  const int64_t left = ie - i;
  if (left <= mr) return (int32_t)left;
  return left < mr + mr / 2 ? (int32_t)((left + 1) / 2) : mr;
}

/* Row tiles [i0, i1) x panels of columns [j0, j0 + ncur) for K block kb. `bp` is the first
 * packed panel (panel stride kc * NR), or NULL in DIRECT mode.
 * Loop order: row blocks of <= A_BLOCK_BYTES of A (stays in L2), then either
 *   - panels -> row tiles (BLIS): one B panel stays in L1 while the A tiles of the block pass
 *     over it; for DIRECT B larger than L1 (measured on ResNet-18 layers 1.3x faster than row
 *     tiles outside: rows of an unaligned panel span two cache lines) and packed B with few
 *     panels (7x7 outputs: 1.1-1.2x faster); without the row blocks the weights of a large
 *     layer (A) were re-read from memory for every panel;
 *   - or row tiles -> panels: the A tile stays in L1 and each C row is written as one stream,
 *     for packed B with at least half as many panels as row tiles (panels outside wrote all
 *     rows of C in 64-byte pieces: 1.2x slower on 1x1 convs with K = 16 and on 1024^3), for
 *     DIRECT B that fits in L1 (channels-last 1x1 convs with few input channels) and for DIRECT
 *     B of small depth (image stems, K <= DIRECT_SMALL_K). */
static void compute_block(const gemm_ctx_t *x, float *slot, int64_t kb, int64_t k0, int64_t kcur, const float *bp,
                          int64_t i0, int64_t i1, int64_t j0, int64_t ncur) {
  const oa_gemm_args_t *g = x->g;
  const int32_t mr = x->isa->mr, nr = x->isa->nr, pw = x->isa->pw;
  const uint32_t flags = (kb > 0 ? OA_UK_ACCUM : 0u) | (kb == x->blk->nkb - 1 ? OA_UK_LAST : 0u);
  float *abuf = slot, *pbuf = slot + MR_MAX * A_LD;
  const int64_t mc = max64(mr, A_BLOCK_BYTES / (int64_t)sizeof(float) / max64(kcur, 1) / mr * mr);
  const int pack_one = x->blk->pack_a && i1 - i0 <= mr; /* a single tile: copied once */
  if (pack_one) {
    for (int64_t r = 0; r < i1 - i0; r++)
      memcpy(abuf + r * A_LD, g->a + (i0 + r) * g->lda + k0, (size_t)kcur * sizeof(float));
  }
  /* DIRECT, the last tile of N cut: copied into zero-padded panels of PW (no read past B) */
  const int64_t qcut = !bp && !g->bblock && ncur % nr ? ncur / nr * nr : -1;
  if (qcut >= 0) {
    const int64_t ncq = ncur - qcut;
    for (int64_t p = 0; p < kcur; p++) {
      const float *src = g->b + j0 + qcut + g->boff[k0 + p];
      for (int64_t t = 0; t < nr; t++) pbuf[(t / pw) * kcur * pw + p * pw + t % pw] = t < ncq ? src[t] : 0.0f;
    }
  }
  /* Row tiles outside also for DIRECT B of small depth: the A tile (12 x 147 floats for a 7x7
   * stem: 7 KB) then stays in L1 while the panels stream past it, where panels outside cycled all
   * of A (64 x 147 floats, 38 KB) through L1 for every panel: ResNet-18's stem GEMM 1.5 -> 1.22 ms
   * on AVX-512 (AVX2: the same either way) */
  const int direct_rows_outside =
      !bp && (kcur * (ncur + nr) * (int64_t)sizeof(float) <= DIRECT_L1_BYTES || (!g->bblock && g->k <= DIRECT_SMALL_K));
  const int panels = bp || g->bblock; /* B rows contiguous (one cache line per 16 floats) */
  for (int64_t ib = i0; ib < i1; ib += mc) {
    const int64_t ie = min64(ib + mc, i1);
    if (direct_rows_outside || (panels && (2 * cdiv(ncur, nr) >= cdiv(ie - ib, mr) || kcur * nr * (int64_t)sizeof(float) > PANEL_L1_BYTES))) {
      for (int64_t i = ib; i < ie; i += tile_rows(i, ie, mr)) {
        const int32_t mcur = tile_rows(i, ie, mr);
        int64_t lda;
        const float *ai = a_tile(x, abuf, pack_one, i, k0, kcur, mcur, &lda);
        for (int64_t q = 0; q < ncur; q += nr) one_tile(x, ai, lda, i, mcur, j0, q, ncur, k0, kcur, bp, pbuf, qcut, flags);
      }
      continue;
    }
    for (int64_t q = 0; q < ncur; q += nr) {
      for (int64_t i = ib; i < ie; i += tile_rows(i, ie, mr)) {
        const int32_t mcur = tile_rows(i, ie, mr);
        int64_t lda;
        const float *ai = a_tile(x, abuf, pack_one, i, k0, kcur, mcur, &lda);
        one_tile(x, ai, lda, i, mcur, j0, q, ncur, k0, kcur, bp, pbuf, qcut, flags);
      }
    }
  }
}

/* the tasks a slot takes: column blocks (PACK_PER_TASK) or tiles */
static void run_slot(gemm_ctx_t *x, int64_t s) {
  const oa_gemm_blocking_t *blk = x->blk;
  const oa_gemm_args_t *g = x->g;
  const int32_t pw = x->isa->pw;
  float *slot = x->scratch + blk->shared_floats + s * blk->slot_floats;
  const int64_t col_tasks = cdiv(x->npad, blk->nc);
  int64_t cursor = -1;
  for (int64_t t; (t = take_task(x, s, &cursor)) >= 0;) {
    if (blk->mode == OA_GEMM_PACK_PER_TASK) {
      const int64_t j0 = t * blk->nc, ncur = min64(blk->nc, g->n - j0);
      if (ncur <= 0) continue;
      float *bp = slot + SLOT_FIXED_FLOATS;
      for (int64_t kb = 0; kb < blk->nkb; kb++) {
        const int64_t k0 = kb * blk->kc, kcur = min64(blk->kc, g->k - k0);
        g->pack(g->pack_ctx, k0, kcur, j0, ncur, pw, bp);
        compute_block(x, slot, kb, k0, kcur, bp, 0, g->m, j0, ncur);
      }
      if (g->done) g->done(g->done_ctx, 0, g->m, j0, ncur);
      continue;
    }
    const int64_t rb = t / col_tasks, cb = t % col_tasks;
    const int64_t i0 = rb * blk->mc, i1 = min64(i0 + blk->mc, g->m);
    const int64_t j0 = cb * blk->nc, ncur = min64(blk->nc, g->n - j0);
    if (i0 >= i1 || ncur <= 0) continue;
    for (int64_t kb = 0; kb < blk->nkb; kb++) {
      const int64_t k0 = kb * blk->kc, kcur = min64(blk->kc, g->k - k0);
      const float *bp = blk->mode == OA_GEMM_PACK_ALL ? x->scratch + k0 * x->npad + (j0 / pw) * kcur * pw : NULL;
      compute_block(x, slot, kb, k0, kcur, bp, i0, i1, j0, ncur);
    }
    if (g->done) g->done(g->done_ctx, i0, i1, j0, ncur);
  }
}

static void slots_fn(void *ctx, int64_t s0, int64_t s1) {
  for (int64_t s = s0; s < s1; s++) run_slot((gemm_ctx_t *)ctx, s);
}

static void pack_all_panels(void *ctx, int64_t q0, int64_t q1) {
  const gemm_ctx_t *x = (const gemm_ctx_t *)ctx;
  const oa_gemm_blocking_t *blk = x->blk;
  const oa_gemm_args_t *g = x->g;
  const int32_t pw = x->isa->pw;
  for (int64_t kb = 0; kb < blk->nkb; kb++) {
    const int64_t k0 = kb * blk->kc, kcur = min64(blk->kc, g->k - k0);
    const int64_t j0 = q0 * pw, ncur = min64(q1 * pw, g->n) - j0;
    g->pack(g->pack_ctx, k0, kcur, j0, ncur, pw, x->scratch + k0 * x->npad + q0 * kcur * pw);
  }
}

/* ---- the ISA table --------------------------------------------------------------------------- */

static const oa_opt_isa_t portable_isa = {"portable",         4, PNR, PNR, 1, oa_portable_gemm, oa_portable_gemm_ind,
                                           oa_pack_transposed, oa_portable_gemv, oa_portable_dw, oa_portable_dwc,
                                           oa_portable_dwc_row};
#if defined(OA_BUILT_AVX2)
extern const oa_opt_isa_t oa_avx2_isa;
#endif
#if defined(OA_BUILT_AVX512)
extern const oa_opt_isa_t oa_avx512_isa;
#endif
#if defined(OA_BUILT_NEON)
extern const oa_opt_isa_t oa_neon_isa;
#endif
#if defined(OA_BUILT_RVV)
extern const oa_opt_isa_t oa_rvv_isa;
#endif

const oa_opt_isa_t *oa_opt_isa(int32_t id) {
  switch (id) {
    case OA_ISA_PORTABLE: return &portable_isa;
#if defined(OA_BUILT_AVX2)
    case OA_ISA_AVX2: return &oa_avx2_isa;
#endif
#if defined(OA_BUILT_AVX512)
    case OA_ISA_AVX512: return &oa_avx512_isa;
#endif
#if defined(OA_BUILT_NEON)
    case OA_ISA_NEON: return &oa_neon_isa;
#endif
#if defined(OA_BUILT_RVV)
    case OA_ISA_RVV: return &oa_rvv_isa;
#endif
    default: return NULL;
  }
}

void oa_gemm_run(const oa_opt_isa_t *isa, const oa_gemm_blocking_t *blk, const oa_gemm_args_t *g, float *scratch,
                 struct oa_threadpool *pool) {
  if (g->m <= 0 || g->n <= 0) return;
  if (g->k <= 0) {
    oa_uk_epi_t epi = {NULL, NULL, g->act, g->lo, g->hi};
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) {
        if (g->vrow && j % g->vrow >= g->vcols) continue;
        g->c[i * g->rs_c + c_column(g, j) * g->cs_c] =
            oa_opt_act(g->bias ? g->bias[i] : (g->bias_col ? g->bias_col[j] : 0.0f), &epi);
      }
    return;
  }
  gemm_ctx_t x;
  x.isa = isa;
  x.blk = blk;
  x.g = g;
  x.scratch = scratch;
  x.npad = cdiv(g->n, isa->nr) * isa->nr;
#if !defined(__STDC_NO_ATOMICS__)
  atomic_init(&x.next, 0);
#endif
  if (blk->mode == OA_GEMM_PACK_ALL) oa_parallel_for(pool, cdiv(g->n, isa->pw), 2, pack_all_panels, &x);
  oa_parallel_for(pool, blk->slots, 1, slots_fn, &x);
}
