/* AVX2+FMA micro-kernels: the 6x16 GEMM tile (12 ymm accumulators, 2 B vectors, 1 broadcast of
 * A per row and k: the MLAS / XNNPACK shape for 16-register AVX2) and the GEMV of `linear` for
 * a few rows. Compiled with -mavx2 -mfma; only called after the CPU reported avx2 and fma
 * (env->isas has OA_CPU_ISA_AVX2, isa.h). */
#include <immintrin.h>

#include "kernels/opt/opt.h"

void oa_avx2_dw(const oa_dw_plane_t *p);
void oa_avx2_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1);
void oa_avx2_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr);

/* relu / clamp keeping NaN: max_ps(a, b) returns b when either is NaN */
static inline __m256 act8(__m256 v, const oa_uk_epi_t *e) {
  if (e->act == 1) return _mm256_max_ps(_mm256_setzero_ps(), v);
  if (e->act == 2) return _mm256_min_ps(_mm256_set1_ps(e->hi), _mm256_max_ps(_mm256_set1_ps(e->lo), v));
  return v;
}

/* the first n (0..8) lanes */
static inline __m256i lanes(int32_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Columns [0, nr) of tile row i (nr <= 8 * NV; x1 unused when NV == 1): accumulate or bias,
 * activation, store. Full rows use plain loads and stores, cut ones masked ones (nothing past
 * column nr is read or written). */
static inline void store_row(float *c, __m256 x0, __m256 x1, int NV, int32_t nr, uint32_t flags,
                             const oa_uk_epi_t *e, int32_t i) {
  if (nr == 8 * NV) {
    if (flags & OA_UK_ACCUM) {
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(c));
      if (NV > 1) x1 = _mm256_add_ps(x1, _mm256_loadu_ps(c + 8));
    } else if (e->bias) {
      const __m256 b = _mm256_set1_ps(e->bias[i]);
      x0 = _mm256_add_ps(x0, b);
      if (NV > 1) x1 = _mm256_add_ps(x1, b);
    } else if (e->bias_col) {
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(e->bias_col));
      if (NV > 1) x1 = _mm256_add_ps(x1, _mm256_loadu_ps(e->bias_col + 8));
    }
    if (flags & OA_UK_LAST) {
      x0 = act8(x0, e);
      if (NV > 1) x1 = act8(x1, e);
    }
    _mm256_storeu_ps(c, x0);
    if (NV > 1) _mm256_storeu_ps(c + 8, x1);
    return;
  }
  const __m256i m0 = lanes(nr < 8 ? nr : 8), m1 = lanes(nr > 8 ? nr - 8 : 0);
  if (flags & OA_UK_ACCUM) {
    x0 = _mm256_add_ps(x0, _mm256_maskload_ps(c, m0));
    if (NV > 1) x1 = _mm256_add_ps(x1, _mm256_maskload_ps(c + 8, m1));
  } else if (e->bias) {
    const __m256 b = _mm256_set1_ps(e->bias[i]);
    x0 = _mm256_add_ps(x0, b);
    if (NV > 1) x1 = _mm256_add_ps(x1, b);
  } else if (e->bias_col) {
    x0 = _mm256_add_ps(x0, _mm256_maskload_ps(e->bias_col, m0));
    if (NV > 1) x1 = _mm256_add_ps(x1, _mm256_maskload_ps(e->bias_col + 8, m1));
  }
  if (flags & OA_UK_LAST) {
    x0 = act8(x0, e);
    if (NV > 1) x1 = act8(x1, e);
  }
  _mm256_maskstore_ps(c, m0, x0);
  if (NV > 1) _mm256_maskstore_ps(c + 8, m1, x1);
}

/* 8x8 transpose of r0..r7 (in place) */
static inline void transpose8(__m256 *r) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* A full 6x16 tile stored transposed (row stride 1, column stride cs_c: `linear` writes Y^T):
 * two 8x8 transposes, then column j of the tile is 6 consecutive floats at c + j * cs_c. The
 * arithmetic is the one of store_row (accumulate or bias, then the activation). */
static inline void store_transposed(float *c, int64_t cs_c, __m256 *lo, __m256 *hi, uint32_t flags,
                                    const oa_uk_epi_t *e) {
  const __m256i m6 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
  const __m256 bias = (!(flags & OA_UK_ACCUM) && e->bias) ? _mm256_maskload_ps(e->bias, m6) : _mm256_setzero_ps();
  transpose8(lo);
  transpose8(hi);
  for (int h = 0; h < 2; h++) {
    __m256 *r = h ? hi : lo;
    for (int j = 0; j < 8; j++) {
      float *cj = c + (h * 8 + j) * cs_c;
      __m256 v = r[j];
      if (flags & OA_UK_ACCUM) v = _mm256_add_ps(v, _mm256_maskload_ps(cj, m6));
      else if (e->bias) v = _mm256_add_ps(v, bias);
      if (flags & OA_UK_LAST) v = act8(v, e);
      _mm256_maskstore_ps(cj, m6, v);
    }
  }
}

/* The tile loop for exactly MR rows and NV vectors of columns (compile-time constants: the
 * unused accumulators and rows compile away), with B row p at BROW(p). Cut tiles (the last rows
 * of M, the last 8 or fewer columns of N) used to run the full 6x16 tile and a scalar store:
 * MobileNet's 7x7 maps (49 rows) and 24-channel layers spent up to a third of a GEMM there. */
#define OA_GEMM_TILE(MR, NV, BROW, BSTEP)                                                                    \
  const float *a0 = a, *a1 = a + 1 * lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda,           \
              *a5 = a + 5 * lda; /* rows >= MR: never read */                                                \
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();                                               \
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();                                               \
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();                                               \
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();                                               \
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();                                               \
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();                                               \
  /* two k steps per iteration: unrolled by 4, gcc 12 kept two accumulators on the stack (12                 \
   * accumulators + 2 B + 1 broadcast leave one spare ymm register), 1.2x slower on 1x1 GEMMs.               \
   * The rows of A are read at a shared index (base + index addressing): one add per iteration               \
   * for all six rows instead of one each, which the FMAs left no slots for. */                              \
  int64_t q = 0;                                                                                             \
  for (; q + 2 <= kc; q += 2) {                                                                              \
    OA_STEP(MR, NV, BROW(0), q);                                                                             \
    OA_STEP(MR, NV, BROW(1), q + 1);                                                                         \
    BSTEP(2);                                                                                                \
  }                                                                                                          \
  if (q < kc) {                                                                                              \
    OA_STEP(MR, NV, BROW(0), q);                                                                             \
  }                                                                                                          \
  if (cs_c == 1) {                                                                                           \
    store_row(c, c00, c01, NV, nr, flags, epi, 0);                                                           \
    if (MR > 1) store_row(c + rs_c, c10, c11, NV, nr, flags, epi, 1);                                        \
    if (MR > 2) store_row(c + 2 * rs_c, c20, c21, NV, nr, flags, epi, 2);                                    \
    if (MR > 3) store_row(c + 3 * rs_c, c30, c31, NV, nr, flags, epi, 3);                                    \
    if (MR > 4) store_row(c + 4 * rs_c, c40, c41, NV, nr, flags, epi, 4);                                    \
    if (MR > 5) store_row(c + 5 * rs_c, c50, c51, NV, nr, flags, epi, 5);                                    \
    return;                                                                                                  \
  }                                                                                                          \
  if (MR == 6 && NV == 2 && nr == 16 && rs_c == 1 && !epi->bias_col) {                                      \
    __m256 lo[8] = {c00, c10, c20, c30, c40, c50, _mm256_setzero_ps(), _mm256_setzero_ps()};                  \
    __m256 hi[8] = {c01, c11, c21, c31, c41, c51, _mm256_setzero_ps(), _mm256_setzero_ps()};                  \
    store_transposed(c, cs_c, lo, hi, flags, epi);                                                           \
    return;                                                                                                  \
  }                                                                                                          \
  float tmp[6 * 16];                                                                                         \
  _mm256_storeu_ps(tmp, c00);                                                                                \
  _mm256_storeu_ps(tmp + 8, c01);                                                                            \
  _mm256_storeu_ps(tmp + 16, c10);                                                                           \
  _mm256_storeu_ps(tmp + 24, c11);                                                                           \
  _mm256_storeu_ps(tmp + 32, c20);                                                                           \
  _mm256_storeu_ps(tmp + 40, c21);                                                                           \
  _mm256_storeu_ps(tmp + 48, c30);                                                                           \
  _mm256_storeu_ps(tmp + 56, c31);                                                                           \
  _mm256_storeu_ps(tmp + 64, c40);                                                                           \
  _mm256_storeu_ps(tmp + 72, c41);                                                                           \
  _mm256_storeu_ps(tmp + 80, c50);                                                                           \
  _mm256_storeu_ps(tmp + 88, c51);                                                                           \
  oa_uk_store_tile(tmp, 16, c, rs_c, cs_c, MR, nr, flags, epi)

/* one k step of rows r < MR: NV B vectors, a broadcast of A per row (8 general registers, 12
 * accumulators + 2 B + 1 broadcast = 15 ymm registers) */
#define OA_ROW(MR, NV, r, ar, o, cr0, cr1)         \
  if (MR > r) {                                    \
    const __m256 av = _mm256_broadcast_ss(ar + (o)); \
    cr0 = _mm256_fmadd_ps(av, b0, cr0);            \
    if (NV > 1) cr1 = _mm256_fmadd_ps(av, b1, cr1); \
  }
#define OA_STEP(MR, NV, brow, o)                                            \
  do {                                                                      \
    const float *bq = (brow);                                               \
    const __m256 b0 = _mm256_loadu_ps(bq);                                  \
    const __m256 b1 = NV > 1 ? _mm256_loadu_ps(bq + 8) : _mm256_setzero_ps(); \
    OA_ROW(MR, NV, 0, a0, o, c00, c01)                                      \
    OA_ROW(MR, NV, 1, a1, o, c10, c11)                                      \
    OA_ROW(MR, NV, 2, a2, o, c20, c21)                                      \
    OA_ROW(MR, NV, 3, a3, o, c30, c31)                                      \
    OA_ROW(MR, NV, 4, a4, o, c40, c41)                                      \
    OA_ROW(MR, NV, 5, a5, o, c50, c51)                                      \
  } while (0)

/* packed panel: row p at b + 16 p */
#define PACKED_ROW(o) (b + (o) * 16)
#define PACKED_STEP(n) (b += 16 * (n))
/* in place: row p at b + boff[p] */
#define IND_ROW(o) (b + boff[o])
#define IND_STEP(n) (boff += (n))

/* one function per tile shape (MR rows x NV vectors), packed and in-place B */
typedef void (*tile_fn)(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                        int64_t rs_c, int64_t cs_c, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi);
#define OA_TILE_FNS(MR, NV)                                                                                  \
  static void tile_p##MR##x##NV(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, \
                                float *c, int64_t rs_c, int64_t cs_c, int32_t nr, uint32_t flags,            \
                                const oa_uk_epi_t *epi) {                                                    \
    (void)boff;                                                                                              \
    OA_GEMM_TILE(MR, NV, PACKED_ROW, PACKED_STEP);                                                           \
  }                                                                                                          \
  static void tile_i##MR##x##NV(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, \
                                float *c, int64_t rs_c, int64_t cs_c, int32_t nr, uint32_t flags,            \
                                const oa_uk_epi_t *epi) {                                                    \
    OA_GEMM_TILE(MR, NV, IND_ROW, IND_STEP);                                                                 \
  }
OA_TILE_FNS(1, 1)
OA_TILE_FNS(2, 1)
OA_TILE_FNS(3, 1)
OA_TILE_FNS(4, 1)
OA_TILE_FNS(5, 1)
OA_TILE_FNS(6, 1)
OA_TILE_FNS(1, 2)
OA_TILE_FNS(2, 2)
OA_TILE_FNS(3, 2)
OA_TILE_FNS(4, 2)
OA_TILE_FNS(5, 2)
OA_TILE_FNS(6, 2)

/* [in place][two vectors][mr - 1] */
static const tile_fn tiles[2][2][6] = {
    {{tile_p1x1, tile_p2x1, tile_p3x1, tile_p4x1, tile_p5x1, tile_p6x1},
     {tile_p1x2, tile_p2x2, tile_p3x2, tile_p4x2, tile_p5x2, tile_p6x2}},
    {{tile_i1x1, tile_i2x1, tile_i3x1, tile_i4x1, tile_i5x1, tile_i6x1},
     {tile_i1x2, tile_i2x2, tile_i3x2, tile_i4x2, tile_i5x2, tile_i6x2}}};

void oa_avx2_gemm_6x16(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                       int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  (void)bs; /* PW = NR: one panel */
  if (mr == 6 && nr == 16) {
    tile_p6x2(kc, a, lda, b, NULL, c, rs_c, cs_c, nr, flags, epi);
    return;
  }
  tiles[0][nr > 8][mr - 1](kc, a, lda, b, NULL, c, rs_c, cs_c, nr, flags, epi);
}

void oa_avx2_gemm_6x16_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                           int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  if (mr == 6 && nr == 16) {
    tile_i6x2(kc, a, lda, b, boff, c, rs_c, cs_c, nr, flags, epi);
    return;
  }
  tiles[1][nr > 8][mr - 1](kc, a, lda, b, boff, c, rs_c, cs_c, nr, flags, epi);
}

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* mask of the first n (0..7) lanes */
static inline __m256i tail_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

/* Four weight rows against one input row: 2 accumulators per row over K in steps of 16, then 8,
 * then a masked tail (masked-off lanes are not read). */
static inline void dot4(int64_t k, const float *x, const float *w0, const float *w1, const float *w2,
                        const float *w3, float out[4]) {
  __m256 s00 = _mm256_setzero_ps(), s01 = _mm256_setzero_ps(), s10 = _mm256_setzero_ps(), s11 = _mm256_setzero_ps();
  __m256 s20 = _mm256_setzero_ps(), s21 = _mm256_setzero_ps(), s30 = _mm256_setzero_ps(), s31 = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + p), x1 = _mm256_loadu_ps(x + p + 8);
    s00 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + p), x0, s00);
    s01 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + p + 8), x1, s01);
    s10 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + p), x0, s10);
    s11 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + p + 8), x1, s11);
    s20 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + p), x0, s20);
    s21 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + p + 8), x1, s21);
    s30 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + p), x0, s30);
    s31 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + p + 8), x1, s31);
  }
  if (p + 8 <= k) {
    const __m256 x0 = _mm256_loadu_ps(x + p);
    s00 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + p), x0, s00);
    s10 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + p), x0, s10);
    s20 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + p), x0, s20);
    s30 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + p), x0, s30);
    p += 8;
  }
  if (p < k) {
    const __m256i m = tail_mask(k - p);
    const __m256 x0 = _mm256_maskload_ps(x + p, m);
    s01 = _mm256_fmadd_ps(_mm256_maskload_ps(w0 + p, m), x0, s01);
    s11 = _mm256_fmadd_ps(_mm256_maskload_ps(w1 + p, m), x0, s11);
    s21 = _mm256_fmadd_ps(_mm256_maskload_ps(w2 + p, m), x0, s21);
    s31 = _mm256_fmadd_ps(_mm256_maskload_ps(w3 + p, m), x0, s31);
  }
  out[0] = hsum8(_mm256_add_ps(s00, s01));
  out[1] = hsum8(_mm256_add_ps(s10, s11));
  out[2] = hsum8(_mm256_add_ps(s20, s21));
  out[3] = hsum8(_mm256_add_ps(s30, s31));
}

void oa_avx2_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, const float *bias,
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

/* oa_pack_transposed for NR = 16: B[k][j] = b[j * ldb + k], 8 x 8 blocks transposed in registers */
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
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      for (int h = 0; h < 2; h++) {
        __m256 r[8];
        for (int t = 0; t < 8; t++) r[t] = _mm256_loadu_ps(s + (h * 8 + t) * ldb + p);
        transpose8(r);
        for (int t = 0; t < 8; t++) _mm256_storeu_ps(d + (p + t) * 16 + h * 8, r[t]);
      }
    }
    for (; p < kc; p++)
      for (int t = 0; t < 16; t++) d[p * 16 + t] = s[t * ldb + p];
  }
}

const oa_opt_isa_t oa_avx2_isa = {"avx2", 6, 16, 16, 8, oa_avx2_gemm_6x16, oa_avx2_gemm_6x16_ind, pack_t16, oa_avx2_gemv,
                                   oa_avx2_dw, oa_avx2_dwc,
                                   oa_avx2_dwc_row};
