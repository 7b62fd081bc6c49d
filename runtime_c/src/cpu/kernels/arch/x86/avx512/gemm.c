/* AVX-512 micro-kernels: the 12x32 GEMM tile (24 zmm accumulators, 2 B vectors, 1 broadcast of A
 * per row and k), its in-place-B twin, the transposing packer for 16-wide panels and the GEMV of
 * `linear` for a few rows. Cut tiles are masked (__mmask16 loads and stores of the first nr
 * columns); a tile of at most 16 columns runs the 16-wide half alone. Compiled with -mavx512f
 * -mavx512bw -mavx512dq -mavx512vl -mfma; only called after the CPU reported avx512f/bw/dq/vl and
 * fma (env->isas has OA_CPU_ISA_AVX512, isa.h).
 *
 * Tile choice. The 16-wide tiles do 1 B load + MR broadcasts per MR FMAs, the 32-wide ones 2 + MR
 * per 2 MR FMAs: at about two loads a cycle the 16-wide ones stop near 90% of the FMA peak, the
 * 32-wide ones near 97%. Measured alone (kc = 256, GFLOP/s, thread CPU time, best of 30):
 *   Zen 5 (peak 233-240):               14x16 214.6, 8x16 209.5, 6x32 235.9, 7x32 240.1, 8x32 236.5
 *   Intel Xeon, Sapphire Rapids class   14x16 163-176 (B in L1) / 156-157 (16 panels in L2);
 *   (peak 222 quiet, 183-215 loaded):   8x32 192 / 175; 12x32 188 / 189; 6x32 185 / 164
 * so 12x32: the most rows per B load keeps it at the same speed with B streamed from L2 (1024^3
 * runs every panel from L2). The packed panels stay 16 wide (OA_CPU_PANEL_BLOCK: the export-time
 * linear_packed, conv_nhwc and mbconv weights and the Winograd weight blocks, read unchanged):
 * the tile reads its two halves from two panels bs floats apart (opt.h). 12 rows use 24 of the
 * 32 zmm registers; the rows of A are read through four pointers and two index registers (base +
 * index * scale), fourteen pointers did not fit the 15 general registers (gcc kept them on the
 * stack: 125 instead of 135-150 GFLOP/s in the first measurement of the 14x16 tile). */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#define OA_SIMD_AVX512 1
#include <immintrin.h>

#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

void oa_avx512_dw(const oa_dw_plane_t *p);
void oa_avx512_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1);
void oa_avx512_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr);

#define MR 12

/* relu / clamp keeping NaN: max_ps(a, b) returns b when either is NaN */
static inline __m512 act16(__m512 v, const oa_uk_epi_t *e) {
  if (e->act == 1) return _mm512_max_ps(_mm512_setzero_ps(), v);
  if (e->act == 2) return _mm512_min_ps(_mm512_set1_ps(e->hi), _mm512_max_ps(_mm512_set1_ps(e->lo), v));
  return v;
}

/* Columns [0, nr) of tile row i (nr <= 16 * NV): accumulate or bias, activation, store; masked
 * loads and stores where the row is cut (nothing past column nr is read or written). */
static inline void store_row(float *c, __m512 x0, __m512 x1, int NV, int32_t nr, uint32_t flags,
                             const oa_uk_epi_t *e, int32_t i) {
  const __mmask16 m0 = vf_mask_(nr), m1 = vf_mask_(nr - 16);
  if (flags & OA_UK_ACCUM) {
    x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, c));
    if (NV > 1) x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, c + 16));
  } else if (e->bias) {
    const __m512 b = _mm512_set1_ps(e->bias[i]);
    x0 = _mm512_add_ps(x0, b);
    if (NV > 1) x1 = _mm512_add_ps(x1, b);
  } else if (e->bias_col) {
    x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, e->bias_col));
    if (NV > 1) x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, e->bias_col + 16));
  }
  if (flags & OA_UK_LAST) {
    x0 = act16(x0, e);
    if (NV > 1) x1 = act16(x1, e);
  }
  _mm512_mask_storeu_ps(c, m0, x0);
  if (NV > 1) _mm512_mask_storeu_ps(c + 16, m1, x1);
}

/* The tile loop for exactly R rows and NV vectors of columns (compile-time constants: unused
 * accumulators and rows compile away). Row p of B: the first 16 columns at BROW(p), the next 16
 * b2 floats further (the second panel, or the next 16 floats of a row read in place). The rows
 * of A are read at a shared index (one add per k step for all rows). */
#define OA_ACC2(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps()
#define OA_GEMM_TILE(R, NV, BROW, BSTEP)                                                                     \
  /* row r of A at p<3 (r / 3)>[k + (r % 3) lda]: four pointers and two index registers (base + \
   * index * scale addressing) instead of twelve pointers */                                    \
  const float *p0 = a, *p3 = a + 3 * lda, *p6 = a + 6 * lda, *p9 = a + 9 * lda; /* rows >= R: never read */ \
  const int64_t l1 = lda, l2 = 2 * lda;                                                                \
  OA_ACC2(0);                                                                                                \
  OA_ACC2(1);                                                                                                \
  OA_ACC2(2);                                                                                                \
  OA_ACC2(3);                                                                                                \
  OA_ACC2(4);                                                                                                \
  OA_ACC2(5);                                                                                                \
  OA_ACC2(6);                                                                                                \
  OA_ACC2(7);                                                                                                \
  OA_ACC2(8);                                                                                                \
  OA_ACC2(9);                                                                                                \
  OA_ACC2(10);                                                                                               \
  OA_ACC2(11);                                                                                               \
  int64_t q = 0;                                                                                             \
  for (; q + 2 <= kc; q += 2) {                                                                              \
    OA_STEP(R, NV, BROW(0), 0);                                                                              \
    OA_STEP(R, NV, BROW(1), 1);                                                                              \
    BSTEP(2);                                                                                                \
    p0 += 2, p3 += 2, p6 += 2, p9 += 2;                                                                      \
  }                                                                                                          \
  if (q < kc) {                                                                                              \
    OA_STEP(R, NV, BROW(0), 0);                                                                              \
  }                                                                                                          \
  if (cs_c == 1) {                                                                                           \
    store_row(c, c00, c01, NV, nr, flags, epi, 0);                                                           \
    if (R > 1) store_row(c + rs_c, c10, c11, NV, nr, flags, epi, 1);                                         \
    if (R > 2) store_row(c + 2 * rs_c, c20, c21, NV, nr, flags, epi, 2);                                     \
    if (R > 3) store_row(c + 3 * rs_c, c30, c31, NV, nr, flags, epi, 3);                                     \
    if (R > 4) store_row(c + 4 * rs_c, c40, c41, NV, nr, flags, epi, 4);                                     \
    if (R > 5) store_row(c + 5 * rs_c, c50, c51, NV, nr, flags, epi, 5);                                     \
    if (R > 6) store_row(c + 6 * rs_c, c60, c61, NV, nr, flags, epi, 6);                                     \
    if (R > 7) store_row(c + 7 * rs_c, c70, c71, NV, nr, flags, epi, 7);                                     \
    if (R > 8) store_row(c + 8 * rs_c, c80, c81, NV, nr, flags, epi, 8);                                     \
    if (R > 9) store_row(c + 9 * rs_c, c90, c91, NV, nr, flags, epi, 9);                                     \
    if (R > 10) store_row(c + 10 * rs_c, c100, c101, NV, nr, flags, epi, 10);                                \
    if (R > 11) store_row(c + 11 * rs_c, c110, c111, NV, nr, flags, epi, 11);                                \
    return;                                                                                                  \
  }                                                                                                          \
  /* a strided C (no caller of this build has cs_c != 1): the shared scalar epilogue */                      \
  float tmp[MR * 32];                                                                                        \
  const __m512 acc_[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},      \
                              {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {c100, c101}, {c110, c111}}; \
  for (int r_ = 0; r_ < R; r_++) {                                                                           \
    _mm512_storeu_ps(tmp + 32 * r_, acc_[r_][0]);                                                            \
    _mm512_storeu_ps(tmp + 32 * r_ + 16, acc_[r_][1]);                                                       \
  }                                                                                                          \
  oa_uk_store_tile(tmp, 32, c, rs_c, cs_c, R, nr, flags, epi)

/* one k step of rows r < R: NV B vectors, a broadcast of A per row */
#define OA_ROW(R, NV, r, pr, off, o, cr0, cr1)     \
  if (R > r) {                                     \
    const __m512 av = _mm512_set1_ps((pr)[(o) + (off)]); \
    cr0 = _mm512_fmadd_ps(av, b0, cr0);            \
    if (NV > 1) cr1 = _mm512_fmadd_ps(av, b1, cr1); \
  }
#define OA_STEP(R, NV, brow, o)                                                \
  do {                                                                         \
    const float *bq = (brow);                                                  \
    const __m512 b0 = _mm512_loadu_ps(bq);                                     \
    const __m512 b1 = NV > 1 ? _mm512_loadu_ps(bq + b2) : _mm512_setzero_ps(); \
    OA_ROW(R, NV, 0, p0, 0, o, c00, c01)                                       \
    OA_ROW(R, NV, 1, p0, l1, o, c10, c11)                                      \
    OA_ROW(R, NV, 2, p0, l2, o, c20, c21)                                      \
    OA_ROW(R, NV, 3, p3, 0, o, c30, c31)                                       \
    OA_ROW(R, NV, 4, p3, l1, o, c40, c41)                                      \
    OA_ROW(R, NV, 5, p3, l2, o, c50, c51)                                      \
    OA_ROW(R, NV, 6, p6, 0, o, c60, c61)                                       \
    OA_ROW(R, NV, 7, p6, l1, o, c70, c71)                                      \
    OA_ROW(R, NV, 8, p6, l2, o, c80, c81)                                      \
    OA_ROW(R, NV, 9, p9, 0, o, c90, c91)                                       \
    OA_ROW(R, NV, 10, p9, l1, o, c100, c101)                                   \
    OA_ROW(R, NV, 11, p9, l2, o, c110, c111)                                   \
  } while (0)

/* packed panels: row p at b + 16 p (the second half bs further). The rows PF_ROWS ahead (2 KB of
 * each half) are prefetched: panels streamed from memory (ResNet-18's 512-channel Winograd
 * weights, 16.8 MB a layer) reached 9 GB/s on the hardware prefetchers alone, 1.3x faster with
 * these (1.8 -> 1.4 ms a layer); panels in L1 / L2 run at the same speed either way. */
#define PACKED_ROW(o) (b + (o) * 16)
#define PF_ROWS 32
#define PACKED_STEP(n)                                                   \
  do {                                                                   \
    _mm_prefetch((const char *)(b + 16 * PF_ROWS), _MM_HINT_T0);         \
    _mm_prefetch((const char *)(b + 16 * PF_ROWS + 16), _MM_HINT_T0);    \
    _mm_prefetch((const char *)(b + b2 + 16 * PF_ROWS), _MM_HINT_T0);    \
    _mm_prefetch((const char *)(b + b2 + 16 * PF_ROWS + 16), _MM_HINT_T0); \
    b += 16 * (n);                                                       \
  } while (0)
/* in place: row p at b + boff[p] (the second half right after) */
#define IND_ROW(o) (b + boff[o])
#define IND_STEP(n) (boff += (n))

typedef void (*tile_fn)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t b2, const int64_t *boff,
                        float *c, int64_t rs_c, int64_t cs_c, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi);
#define OA_TILE_FNS(R, NV)                                                                                    \
  static void tile_p##R##x##NV(int64_t kc, const float *a, int64_t lda, const float *b, int64_t b2,           \
                               const int64_t *boff, float *c, int64_t rs_c, int64_t cs_c, int32_t nr,         \
                               uint32_t flags, const oa_uk_epi_t *epi) {                                      \
    (void)boff;                                                                                               \
    OA_GEMM_TILE(R, NV, PACKED_ROW, PACKED_STEP);                                                             \
  }                                                                                                           \
  static void tile_i##R##x##NV(int64_t kc, const float *a, int64_t lda, const float *b, int64_t b2,           \
                               const int64_t *boff, float *c, int64_t rs_c, int64_t cs_c, int32_t nr,         \
                               uint32_t flags, const oa_uk_epi_t *epi) {                                      \
    OA_GEMM_TILE(R, NV, IND_ROW, IND_STEP);                                                                   \
  }
#define OA_TILE_ROWS(R) OA_TILE_FNS(R, 1) OA_TILE_FNS(R, 2)
OA_TILE_ROWS(1)
OA_TILE_ROWS(2)
OA_TILE_ROWS(3)
OA_TILE_ROWS(4)
OA_TILE_ROWS(5)
OA_TILE_ROWS(6)
OA_TILE_ROWS(7)
OA_TILE_ROWS(8)
OA_TILE_ROWS(9)
OA_TILE_ROWS(10)
OA_TILE_ROWS(11)
OA_TILE_ROWS(12)

/* [in place][nr > 16][mr - 1] */
#define OA_TILE_LIST(k, NV)                                                                                  \
  {tile_##k##1x##NV, tile_##k##2x##NV, tile_##k##3x##NV, tile_##k##4x##NV, tile_##k##5x##NV, tile_##k##6x##NV, \
   tile_##k##7x##NV, tile_##k##8x##NV, tile_##k##9x##NV, tile_##k##10x##NV, tile_##k##11x##NV, tile_##k##12x##NV}
static const tile_fn tiles[2][2][MR] = {{OA_TILE_LIST(p, 1), OA_TILE_LIST(p, 2)},
                                        {OA_TILE_LIST(i, 1), OA_TILE_LIST(i, 2)}};

void oa_avx512_gemm_12x32(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                          int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  if (mr == MR && nr == 32) {
    tile_p12x2(kc, a, lda, b, bs, NULL, c, rs_c, cs_c, nr, flags, epi);
    return;
  }
  tiles[0][nr > 16][mr - 1](kc, a, lda, b, bs, NULL, c, rs_c, cs_c, nr, flags, epi);
}

void oa_avx512_gemm_12x32_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                              int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags,
                              const oa_uk_epi_t *epi) {
  if (mr == MR && nr == 32) {
    tile_i12x2(kc, a, lda, b, 16, boff, c, rs_c, cs_c, nr, flags, epi);
    return;
  }
  tiles[1][nr > 16][mr - 1](kc, a, lda, b, 16, boff, c, rs_c, cs_c, nr, flags, epi);
}

/* Four weight rows against one input row: 2 accumulators per row over K in steps of 32, then 16,
 * then a masked tail (masked-off lanes are not read). */
static inline void dot4(int64_t k, const float *x, const float *w0, const float *w1, const float *w2,
                        const float *w3, float out[4]) {
  __m512 s00 = _mm512_setzero_ps(), s01 = _mm512_setzero_ps(), s10 = _mm512_setzero_ps(), s11 = _mm512_setzero_ps();
  __m512 s20 = _mm512_setzero_ps(), s21 = _mm512_setzero_ps(), s30 = _mm512_setzero_ps(), s31 = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + p), x1 = _mm512_loadu_ps(x + p + 16);
    s00 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + p), x0, s00);
    s01 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + p + 16), x1, s01);
    s10 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + p), x0, s10);
    s11 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + p + 16), x1, s11);
    s20 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + p), x0, s20);
    s21 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + p + 16), x1, s21);
    s30 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + p), x0, s30);
    s31 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + p + 16), x1, s31);
  }
  if (p + 16 <= k) {
    const __m512 x0 = _mm512_loadu_ps(x + p);
    s00 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + p), x0, s00);
    s10 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + p), x0, s10);
    s20 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + p), x0, s20);
    s30 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + p), x0, s30);
    p += 16;
  }
  if (p < k) {
    const __mmask16 m = vf_mask_(k - p);
    const __m512 x0 = _mm512_maskz_loadu_ps(m, x + p);
    s01 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + p), x0, s01);
    s11 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + p), x0, s11);
    s21 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + p), x0, s21);
    s31 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + p), x0, s31);
  }
  out[0] = vf_hsum(_mm512_add_ps(s00, s01));
  out[1] = vf_hsum(_mm512_add_ps(s10, s11));
  out[2] = vf_hsum(_mm512_add_ps(s20, s21));
  out[3] = vf_hsum(_mm512_add_ps(s30, s31));
}

void oa_avx512_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, const float *bias,
                    float *y, int64_t ldy, const oa_uk_epi_t *epi) {
  float s[4];
  int64_t j = 0;
  /* weight rows outside, input rows inside: four weight rows stay in L1 for every input row */
  for (; j + 4 <= n; j += 4) {
    const float *w0 = w + j * k;
    for (int64_t i = 0; i < m; i++) {
      dot4(k, x + i * ldx, w0, w0 + k, w0 + 2 * k, w0 + 3 * k, s);
      float *yr = y + i * ldy + j;
      for (int r = 0; r < 4; r++) yr[r] = oa_opt_act(bias ? s[r] + bias[j + r] : s[r], epi);
    }
  }
  if (j < n) {
    /* 1 to 3 rows left: repeat the last one (computed, not stored) */
    const float *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + (j + r < n ? j + r : n - 1) * k;
    for (int64_t i = 0; i < m; i++) {
      dot4(k, x + i * ldx, wr[0], wr[1], wr[2], wr[3], s);
      float *yr = y + i * ldy + j;
      for (int r = 0; j + r < n; r++) yr[r] = oa_opt_act(bias ? s[r] + bias[j + r] : s[r], epi);
    }
  }
}

/* oa_pack_transposed for NR = 16: B[k][j] = b[j * ldb + k], 16 x 16 blocks transposed in
 * registers; the last k < 16 with masked loads (nothing past row k0 + kc is read) */
static void pack_t16(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  const oa_pack_dense_t *pd = (const oa_pack_dense_t *)ctx;
  const int64_t ldb = pd->ldb;
  for (int64_t q = 0; q * 16 < nc; q++) {
    const int64_t jq = j0 + q * 16;
    float *d = dst + q * kc * 16;
    if (nc - q * 16 < 16) { /* a cut panel: the portable packer (zero padding) */
      oa_pack_transposed(ctx, k0, kc, jq, nc - q * 16, nr, d);
      continue;
    }
    const float *s = pd->b + jq * ldb + k0;
    for (int64_t p = 0; p < kc; p += 16) {
      const int64_t n = kc - p < 16 ? kc - p : 16;
      const __mmask16 m = vf_mask_(n);
      __m512 r[16];
      for (int t = 0; t < 16; t++) r[t] = _mm512_maskz_loadu_ps(m, s + t * ldb + p);
      vf_transpose16_(r);
      for (int t = 0; t < n; t++) _mm512_storeu_ps(d + (p + t) * 16, r[t]);
    }
  }
}

/* The GEMV of `linear` with a few rows streams its weights once: bound by memory, not by the FMA
 * width. The AVX2 one (8 floats a load) measured 1.05-1.18x faster than the 16-lane one above on
 * the zoo's MLP on a Sapphire Rapids class Xeon (784-512-512-10, batch 1: 66 against 72 us warm,
 * 111 against 131 us in the benchmark's interleaved runs), so it serves AVX-512 too where built. */
#if defined(OA_HAVE_AVX2)
void oa_avx2_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, const float *bias,
                  float *y, int64_t ldy, const oa_uk_epi_t *epi);
#define OA_AVX512_GEMV oa_avx2_gemv
#else
#define OA_AVX512_GEMV oa_avx512_gemv
#endif

const oa_opt_isa_t oa_avx512_isa = {"avx512",       MR, 32, 16, 16, oa_avx512_gemm_12x32, oa_avx512_gemm_12x32_ind,
                                    pack_t16,       OA_AVX512_GEMV, oa_avx512_dw, oa_avx512_dwc,
                                    oa_avx512_dwc_row};
#else
typedef int oa_avx512_gemm_unused_t; /* not an AVX-512 build of this file */
#endif
