/* The optimized dense kernels (GEMM, convolution, depthwise convolution): one blocked driver in
 * portable C, per-ISA micro-kernels behind a small table (oa_opt_isa_t, one per ISA of isa.h).
 *
 *   opt/gemm.c         blocking, packing of B, threading, the ISA table
 *   opt/matmul.c       linear / linear_packed / matmul / addmm on it (prepare + run)
 *   opt/conv.c         conv2d (NCHW: direct, im2col, 1x1, depthwise) and conv2d_nhwc (channels-last:
 *                      1x1 as one GEMM, others strips or im2col rows + GEMM, depthwise)
 *   opt/winograd.c     conv2d_winograd (F(4x4, 3x3)); transforms in winograd_transform.inc
 *   opt/mbconv.c       mbconv_nhwc: expand -> depthwise -> project fused, row band by row band
 *   opt/dwconv.inc, opt/dwconv_nhwc.inc   depthwise planes (planar, channels-last) on simd/vec.h
 *   arch/portable/     the portable micro-kernels' instances (any CPU)
 *   arch/x86/avx2/     6x16 AVX2+FMA micro-kernel, GEMV, depthwise, Winograd transforms (compiled
 *                      with -mavx2 -mfma, only ever called when env->isas has OA_CPU_ISA_AVX2)
 *   arch/arm/neon/     8x8 (aarch64) / 4x8 (armv7) NEON micro-kernels, GEMV, depthwise, Winograd
 *   arch/riscv/rvv/    7x16 RVV 1.0 micro-kernel (LMUL 4, vl 16 at every VLEN), GEMV, packing,
 *                      depthwise (rv64gcv builds with OA_HAVE_RVV; Winograd: the portable transforms)
 *
 * GEMM convention: C[M, N] = A[M, K] * B[K, N]. A is read in place (row-major, stride lda; the
 * constant side for convs: their weights are never copied at run time). B is packed at run time
 * into panels of NR columns, K-major ([kc][NR]), zero-padded to NR (W^T for `linear`, matmul's
 * right operand, 1x1 conv inputs, im2col panels), or read in place through a per-row offset table
 * (DIRECT: the zero-padded, phase-split conv input). C is written through (row stride, column
 * stride); bias per row (conv) or per column (linear) and the activation are fused in the
 * micro-kernel's epilogue.
 *
 * Determinism: outputs are partitioned between threads (never K), and the K blocking depends on
 * the shape only, so results do not depend on the thread count. */
#ifndef OA_KERNELS_OPT_H
#define OA_KERNELS_OPT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "kernels/kernel.h"

struct oa_threadpool;

/* ---- micro-kernels ------------------------------------------------------------------------ */

/* flags of a micro-kernel call */
#define OA_UK_ACCUM 1u /* C += A*B (a later K block); otherwise C = A*B + bias */
#define OA_UK_LAST 2u  /* the last K block: apply the activation */

typedef struct oa_uk_epi {
  const float *bias;     /* bias of the tile's first row (bias[i] for row i), or NULL */
  const float *bias_col; /* bias of the tile's first column (bias_col[j] for column j), or NULL */
  int32_t act;       /* 0 none, 1 relu (keeps NaN), 2 clamp to [lo, hi] (keeps NaN) */
  float lo, hi;
} oa_uk_epi_t;

/* Fill ceil(nc / nr) panels of B (columns j0 .. j0 + nc, rows k0 .. k0 + kc), each [kc][nr],
 * one after the other, columns past nc zero. */
typedef void (*oa_pack_fn)(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst);

/* One MR x NR tile: acc = A[0:mr, 0:kc] * B[0:kc, 0:NR]; rows >= mr of A are never read
 * (kernels re-read row mr - 1 or skip them), columns >= nr are zero padding; only [mr, nr] is
 * stored, at c + i * rs_c + j * cs_c. B is packed in panels of the ISA's PW columns ([kc][PW]
 * each): B[p][j] = b[(j / PW) * bs + p * PW + j % PW]. PW = NR except on AVX-512, whose 32-wide
 * tile reads two 16-wide panels bs floats apart (the export-time panels are 16 wide); a tile
 * with nr <= PW reads only the first panel. */
typedef void (*oa_ukernel_fn)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c,
                              int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags,
                              const oa_uk_epi_t *epi);

/* The same with B read in place: row p of the NR columns is at b + boff[p] (unaligned). */
typedef void (*oa_ukernel_ind_fn)(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff,
                                  float *c, int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags,
                                  const oa_uk_epi_t *epi);

/* y[i * ldy + j] (j < n, i < m) = act(bias[j] + dot(x[i, 0:k], w[j, 0:k])): GEMV-like `linear`
 * for a few rows, reading the [N, K] weights in place. */
typedef void (*oa_gemv_fn)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w,
                           const float *bias, float *y, int64_t ldy, const oa_uk_epi_t *epi);

/* Depthwise plane: see dwconv.inc. */
typedef struct oa_dw_plane {
  const float *pad;  /* zero-padded input plane, rows of pad_w floats */
  int64_t pad_w;
  const float *w;    /* kh * kw taps */
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t oh, ow;    /* output plane */
  float *out;        /* oh * ow */
  float bias;
  oa_uk_epi_t epi;   /* act, lo, hi (bias unused) */
} oa_dw_plane_t;
typedef void (*oa_dw_fn)(const oa_dw_plane_t *p);

/* Channels-last depthwise convolution (dwconv_nhwc.inc): rows t0 .. t1 of the n * oh
 * output rows (t = image * oh + output row). */
typedef struct oa_dwc {
  const float *x;       /* [n][h][w_in][c] */
  const float *w;       /* [kh][kw][c] */
  const float *bias;    /* [c], or NULL */
  float *y;             /* [n][oh][ow][c] */
  int64_t h, w_in, c, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int64_t ow_lo, ow_hi; /* output columns [ow_lo, ow_hi) read no padding */
  oa_uk_epi_t epi;      /* act, lo, hi */
} oa_dwc_t;
typedef void (*oa_dwc_fn)(const oa_dwc_t *p, int64_t t0, int64_t t1);
/* Set ow_lo / ow_hi from the geometry: output columns whose every tap is inside the row. */
static inline void oa_dwc_interior(oa_dwc_t *p) {
  const int64_t lo = (p->pw + p->sw - 1) / p->sw, last = p->w_in - 1 + p->pw - (p->kw - 1) * p->dw;
  const int64_t hi = last < 0 ? lo : (last / p->sw + 1 < p->ow ? last / p->sw + 1 : p->ow);
  p->ow_lo = lo < p->ow ? lo : p->ow;
  p->ow_hi = hi > p->ow_lo ? hi : p->ow_lo;
}
/* One output row yr from the input rows of its kernel rows (rows[kh], NULL outside the image). */
typedef void (*oa_dwc_row_fn)(const oa_dwc_t *p, const float *const *rows, float *yr);
/* kernel heights the channels-last depthwise kernels take (taller ones: the reference kernel) */
#define OA_DWC_MAX_KH 16

typedef struct oa_opt_isa {
  const char *name;
  int32_t mr, nr;    /* micro-tile */
  int32_t pw;        /* width of the packed B panels the tile reads (NR, or a divisor of NR) */
  int32_t vw;        /* vector width in floats (depthwise padding) */
  oa_ukernel_fn gemm;
  oa_ukernel_ind_fn gemm_ind;
  oa_pack_fn pack_t; /* oa_pack_transposed for this NR, vectorized (or the portable one) */
  oa_gemv_fn gemv;
  oa_dw_fn dw;
  oa_dwc_fn dwc;     /* channels-last depthwise */
  oa_dwc_row_fn dwc_row;
} oa_opt_isa_t;

/* The micro-kernel table of an ISA, NULL when this build does not have it. */
const oa_opt_isa_t *oa_opt_isa(int32_t id);

/* Shared scalar epilogue of partial tiles: tmp is an MR x NR tile (row stride ld_tmp). */
void oa_uk_store_tile(const float *tmp, int64_t ld_tmp, float *c, int64_t rs_c, int64_t cs_c, int32_t mr,
                      int32_t nr, uint32_t flags, const oa_uk_epi_t *epi);

static inline float oa_opt_act(float v, const oa_uk_epi_t *e) {
  if (e->act == 1) return v < 0.0f ? 0.0f : v;
  if (e->act == 2) return v < e->lo ? e->lo : (v > e->hi ? e->hi : v);
  return v;
}

/* ---- the GEMM driver ---------------------------------------------------------------------- */


typedef struct oa_gemm_args {
  int64_t m, n, k;
  const float *a;
  int64_t lda;
  oa_pack_fn pack;      /* B packed by pack(pack_ctx, ...), or (DIRECT) */
  const void *pack_ctx;
  const float *b;       /* DIRECT: B[p][j] = b[boff[p] + j] for p < k, j < n; or, with bblock > 0,
                         * B pre-packed in panels: B[p][j] = b[(j / bblock) * k * bblock + boff[p] +
                         * j % bblock], boff[p] = p * bblock (zero-padded past n) */
  const int64_t *boff;
  int64_t bblock;       /* panel width of pre-packed B (a multiple of the ISA's NR), or 0 */
  float *c;
  int64_t rs_c, cs_c;
  /* vrow > 0 (with cs_c 1): C's columns are "virtual", vrow per row of an image of which the first vcols are
   * kept: column j is stored at (j / vrow) * vcols + j % vrow when j % vrow < vcols, else dropped
   * (the direct conv's padded rows: tiles inside one row are stored in place, the others go
   * through a small buffer) */
  int64_t vrow, vcols;
  const float *bias;     /* per row of C, or NULL */
  const float *bias_col; /* per column of C, or NULL */
  int32_t act;
  float lo, hi;
  /* or NULL: called by the thread that finished C's rows [i0, i1) x columns [j0, j0 + nc) (all K
   * blocks), while they are still in its caches (the direct conv drops its virtual columns) */
  void (*done)(const void *ctx, int64_t i0, int64_t i1, int64_t j0, int64_t nc);
  const void *done_ctx;
} oa_gemm_args_t;

enum { OA_GEMM_PACK_PER_TASK = 1, OA_GEMM_PACK_ALL = 2, OA_GEMM_DIRECT = 3 };

typedef struct oa_gemm_blocking {
  int64_t kc, nkb;   /* K block and number of K blocks (depends on the shape only) */
  int64_t nc, mc;    /* column / row block of a task */
  int64_t n_tasks;
  int32_t mode;      /* OA_GEMM_PACK_* */
  int32_t slots;     /* threads sharing the tasks statically, each with a scratch slot */
  int32_t pack_a;    /* copy A tiles to a compact buffer first (lda aliases in L1) */
  int64_t shared_floats, slot_floats, scratch_floats; /* scratch = shared + slots * slot */
} oa_gemm_blocking_t;

/* Blocking of one GEMM shape for `threads` threads; deterministic (prepare and run agree). */
/* The L2 size of this CPU in bytes (0: unknown; gemm.c), detected on the first call (a prepare,
 * never the execute path: plans are made in prepare before any run) and kept: a fact about the
 * machine, the same for every device and call. Kernels size their blocks by it, never which
 * operations compute an output. */
int64_t oa_opt_l2_bytes(void);

void oa_gemm_plan(const oa_opt_isa_t *isa, int64_t m, int64_t n, int64_t k, int64_t lda, int32_t direct,
                  int32_t threads, oa_gemm_blocking_t *out);

/* Run one GEMM with the blocking from oa_gemm_plan; scratch holds blk->scratch_floats floats,
 * 64-byte aligned. */
void oa_gemm_run(const oa_opt_isa_t *isa, const oa_gemm_blocking_t *blk, const oa_gemm_args_t *g, float *scratch,
                 struct oa_threadpool *pool);

/* Packers: row-major B[k][j] = b[k * ldb + j] and transposed B[k][j] = b[j * ldb + k]. */
typedef struct oa_pack_dense {
  const float *b;
  int64_t ldb;
} oa_pack_dense_t;
void oa_pack_rowmajor(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst);
void oa_pack_transposed(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst);

/* Number of threads of the pool (1 for NULL). */
int32_t oa_opt_threads(const struct oa_threadpool *pool);

/* Portable kernels (any CPU). */
void oa_portable_gemm(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                      int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi);
void oa_portable_gemm_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                          int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi);
void oa_portable_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w,
                      const float *bias, float *y, int64_t ldy, const oa_uk_epi_t *epi);
void oa_portable_dw(const oa_dw_plane_t *p);
void oa_portable_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1);
void oa_portable_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr);

/* ---- Winograd convolution (opt/winograd.c; transforms in winograd_transform.inc) ---------------- */

/* One band of one image: its tiles t0 .. t1 in raster order (tile (ty, tx) is t = ty * tw + tx;
 * whole tile rows, or any run of tiles: a thread's equal share). V (the GEMM's A operand, tiles x
 * channels) and M (its output, tiles x output channels) hold tile t at row t - t0. The band's
 * tile rows are ty0 = t0 / tw .. ty1 = ceil(t1 / tw). */
typedef struct oa_wino_band {
  const float *x;        /* the image's input planes [c][h][w] */
  int64_t c, h, w, ph, pw;
  int64_t m, tw, t0, t1, ty0, ty1;
  float *v;              /* V[xi][t][ch] at v + xi * sv + t * ldv + ch */
  int64_t sv, ldv;
  const float *mm;       /* M[xi][t][k] at mm + xi * sm + t * ldm + k */
  int64_t sm, ldm;
  float *y;              /* the image's output planes [k][oh][ow] */
  const float *addend;   /* laid out as y, or NULL */
  const float *bias;     /* [k], or NULL */
  int64_t k, oh, ow;
  oa_uk_epi_t epi;       /* act, lo, hi */
} oa_wino_band_t;

/* Input transform of the band's tiles in its tile rows r0 .. r1 (relative to ty0) into V, every
 * channel (V's columns c .. ldv get zeros); output transform of those tiles from M, with bias,
 * addend and activation. `work`: (m + 2) * (tw * m + 2) * vw + 36 * vw floats. */
typedef void (*oa_wino_in_fn)(const oa_wino_band_t *b, int64_t r0, int64_t r1, float *work);
typedef void (*oa_wino_out_fn)(const oa_wino_band_t *b, int64_t r0, int64_t r1, float *work);
typedef struct oa_wino_isa {
  int32_t vw;
  oa_wino_in_fn input;
  oa_wino_out_fn output;
} oa_wino_isa_t;

#endif /* OA_KERNELS_OPT_H */
