/* AVX-VNNI int8 micro-kernels (opt/quant.h): the VEX-encoded vpdpbusd on ymm (Alder Lake and
 * later client cores, Zen 5; also Sapphire Rapids), for CPUs with AVX-VNNI but no AVX-512 (or
 * with AVX-512 disabled). Same scheme as the AVX512-VNNI table (arch/x86/avx512/quant_vnni.c):
 * the activations as x ^ 0x80 = x + 128 (u8; the driver subtracts (input_zp + 128) * sum W), W
 * the signed operand, 4 consecutive k of a row per dword broadcast, exact int32 sums (vpdpbusd,
 * not vpdpbusds).
 *   GEMM: 6 x 16 tile, 12 ymm accumulators, 2 B vectors, one W dword broadcast per row per 4 k;
 *         W read in place or from packed tiles.
 *   B packing: 16 columns x 4 k per 64 bytes; a chunk of 16 consecutive input bytes is one
 *         load, other chunks are gathered byte by byte (no masked byte loads before AVX-512).
 *   GEMV: 32 k per instruction against x ^ 0x80, 4 W rows at once.
 * The requantization and depthwise rows are the AVX2 ones (quant.c). Compiled with -mavx2 -mfma
 * -mavxvnni; only called when the CPU reports avx_vnni and env->isas has OA_CPU_ISA_AVX2 and
 * OA_CPU_ISA_VNNI (opt/quant.c), so the AVX2 build still runs on CPUs without it (Zen 3). */
#if defined(__x86_64__) && defined(__AVX2__) && defined(__AVXVNNI__)
#include <immintrin.h>
#include <string.h>

#include "kernels/opt/quant.h"

#define MR 6
#define NR 16

static inline int32_t load32(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* the first n (< 4) bytes of p, zero above */
static inline int32_t load_part(const int8_t *p, int64_t n) {
  uint32_t v = 0;
  for (int64_t i = 0; i < n; i++) v |= (uint32_t)(uint8_t)p[i] << (8 * i);
  return (int32_t)v;
}

#define DP(acc, b, a) acc = _mm256_dpbusd_avx_epi32(acc, b, a)
#define TILE_BODY(AV0, AV1, AV2, AV3, AV4, AV5)                                                                 \
  do {                                                                                                          \
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 32)); \
    __m256i x = _mm256_set1_epi32(AV0);                                                                         \
    DP(c00, b0, x), DP(c01, b1, x);                                                                             \
    x = _mm256_set1_epi32(AV1), DP(c10, b0, x), DP(c11, b1, x);                                                 \
    x = _mm256_set1_epi32(AV2), DP(c20, b0, x), DP(c21, b1, x);                                                 \
    x = _mm256_set1_epi32(AV3), DP(c30, b0, x), DP(c31, b1, x);                                                 \
    x = _mm256_set1_epi32(AV4), DP(c40, b0, x), DP(c41, b1, x);                                                 \
    x = _mm256_set1_epi32(AV5), DP(c50, b0, x), DP(c51, b1, x);                                                 \
  } while (0)
#define STORE_ROW(p, v0, v1) _mm256_storeu_si256((__m256i *)(p), v0), _mm256_storeu_si256((__m256i *)((p) + 8), v1)
#define STORE_TILE(c)                                                                                           \
  do {                                                                                                          \
    STORE_ROW(c, c00, c01), STORE_ROW(c + ldc, c10, c11), STORE_ROW(c + 2 * ldc, c20, c21);                     \
    STORE_ROW(c + 3 * ldc, c30, c31), STORE_ROW(c + 4 * ldc, c40, c41), STORE_ROW(c + 5 * ldc, c50, c51);       \
  } while (0)

/* A [kp/4][6][4] int8, B [kp/4][16][4] uint8 */
static void q8_avxvnni_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int8_t *a = (const int8_t *)a_;
  const uint8_t *b = (const uint8_t *)b_;
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < kp; q += 4, a += 4 * MR, b += 4 * NR)
    TILE_BODY(load32(a), load32(a + 4), load32(a + 8), load32(a + 12), load32(a + 16), load32(a + 20));
  STORE_TILE(c);
}

/* W in place: rows w + i * ldw (i < mr; the rows past mr repeat the last); the last group of a K
 * that is not a multiple of 4 is read byte by byte (nothing past a row) */
static void q8_avxvnni_gemm_rows(int64_t k, const int8_t *w, int64_t ldw, int32_t mr, const void *b_, int32_t *c,
                                 int64_t ldc) {
  const uint8_t *b = (const uint8_t *)b_;
  const int8_t *w0 = w, *w1 = w + (mr > 1 ? 1 : 0) * ldw, *w2 = w + (mr > 2 ? 2 : mr - 1) * ldw;
  const int8_t *w3 = w + (mr > 3 ? 3 : mr - 1) * ldw, *w4 = w + (mr > 4 ? 4 : mr - 1) * ldw;
  const int8_t *w5 = w + (mr > 5 ? 5 : mr - 1) * ldw;
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int64_t k4 = k / 4 * 4;
  int64_t q = 0;
  for (; q < k4; q += 4, b += 4 * NR)
    TILE_BODY(load32(w0 + q), load32(w1 + q), load32(w2 + q), load32(w3 + q), load32(w4 + q), load32(w5 + q));
  if (q < k) {
    const int64_t r = k - q;
    TILE_BODY(load_part(w0 + q, r), load_part(w1 + q, r), load_part(w2 + q, r), load_part(w3 + q, r),
              load_part(w4 + q, r), load_part(w5 + q, r));
  }
  STORE_TILE(c);
}

/* ---- B packing -------------------------------------------------------------------------------- */

/* 4 rows of 16 columns -> 16 x [4 k] bytes, in two ymm */
static inline void interleave4(__m128i r0, __m128i r1, __m128i r2, __m128i r3, __m256i *lo, __m256i *hi) {
  const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
  *lo = _mm256_set_m128i(_mm_unpackhi_epi16(t0, t2), _mm_unpacklo_epi16(t0, t2));
  *hi = _mm256_set_m128i(_mm_unpackhi_epi16(t1, t3), _mm_unpacklo_epi16(t1, t3));
}

static void q8_avxvnni_pack(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                            int32_t nc, int32_t nr, void *dst_) {
  uint8_t *dst = (uint8_t *)dst_;
  if (!koff) { /* linear: column j is the row src + cb[j], 4 consecutive k are one dword */
    const uint32_t flip = 0x80808080u;
    const int64_t k4 = k / 4 * 4;
    for (int64_t q = 0; q < kp; q += 4) {
      uint8_t *d = dst + q * nr;
      for (int32_t j = 0; j < nr; j++) {
        uint32_t v = 0;
        if (j < nc && q < k4) {
          v = (uint32_t)load32(src + cb[j] + q) ^ flip;
        } else if (j < nc && q < k) {
          v = (uint32_t)load_part(src + cb[j] + q, k - q) ^ ((uint32_t)(((uint64_t)1 << (8 * (k - q))) - 1u) & flip);
        }
        memcpy(d + 4 * j, &v, sizeof v);
      }
    }
    return;
  }
  for (int32_t u = 0; u < nr; u += 16) {
    const int32_t end = nc < u + 16 ? nc : u + 16;
    int run = end == u + 16; /* 16 consecutive input bytes: one load per k */
    for (int32_t j = u + 1; run && j < end; j++) run = cb[j] == cb[u] + (j - u);
    uint8_t *d = dst + 4 * u;
    for (int64_t q = 0; q < kp; q += 4, d += 4 * nr) {
      __m128i r[4];
      for (int i = 0; i < 4; i++) {
        if (q + i >= k) {
          r[i] = _mm_setzero_si128();
        } else if (run) {
          r[i] = _mm_loadu_si128((const __m128i *)(src + koff[q + i] + cb[u]));
        } else {
          int8_t tmp[16] = {0};
          const int8_t *s = src + koff[q + i];
          for (int32_t j = u; j < end; j++) tmp[j - u] = s[cb[j]];
          r[i] = _mm_loadu_si128((const __m128i *)tmp);
        }
      }
      const int64_t valid = k - q;
      const uint32_t m = valid >= 4 ? 0x80808080u : (uint32_t)(((uint64_t)1 << (8 * valid)) - 1u) & 0x80808080u;
      const __m256i flip = _mm256_set1_epi32((int32_t)m);
      __m256i lo, hi;
      interleave4(r[0], r[1], r[2], r[3], &lo, &hi);
      _mm256_storeu_si256((__m256i *)d, _mm256_xor_si256(lo, flip));
      _mm256_storeu_si256((__m256i *)(d + 32), _mm256_xor_si256(hi, flip));
    }
  }
}

/* ---- GEMV and weight sums --------------------------------------------------------------------- */

/* x ^ 0x80 as uint8 [m][k] (input_zp -128: x - zp, no correction); 4 W rows at a time, 32 k per
 * step, the last k one by one */
static void q8_avxvnni_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const uint8_t *x = (const uint8_t *)x_;
  const int64_t k32 = k / 32 * 32;
  for (int64_t i = 0; i < m; i++) {
    const uint8_t *xr = x + i * k;
    for (int64_t j = 0; j < n; j += 4) {
      const int64_t nb = n - j < 4 ? n - j : 4;
      const int8_t *w0 = w + j * k, *w1 = w0 + (nb > 1 ? k : 0), *w2 = w0 + (nb > 2 ? 2 * k : 0);
      const int8_t *w3 = w0 + (nb > 3 ? 3 * k : 0);
      __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t q = 0; q < k32; q += 32) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xr + q));
        s0 = _mm256_dpbusd_avx_epi32(s0, xv, _mm256_loadu_si256((const __m256i *)(w0 + q)));
        s1 = _mm256_dpbusd_avx_epi32(s1, xv, _mm256_loadu_si256((const __m256i *)(w1 + q)));
        s2 = _mm256_dpbusd_avx_epi32(s2, xv, _mm256_loadu_si256((const __m256i *)(w2 + q)));
        s3 = _mm256_dpbusd_avx_epi32(s3, xv, _mm256_loadu_si256((const __m256i *)(w3 + q)));
      }
      /* horizontal sums of the 4 rows at once */
      const __m256i h01 = _mm256_hadd_epi32(s0, s1), h23 = _mm256_hadd_epi32(s2, s3);
      const __m256i h = _mm256_hadd_epi32(h01, h23); /* per 128-bit lane: rows 0, 1, 2, 3 */
      const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      int32_t tv[4];
      _mm_storeu_si128((__m128i *)tv, t);
      const int8_t *wr[4] = {w0, w1, w2, w3};
      for (int64_t r = 0; r < nb; r++) {
        int32_t s = tv[r];
        for (int64_t q = k32; q < k; q++) s += (int32_t)wr[r][q] * (int32_t)xr[q];
        acc[i * n + j + r] = s;
      }
    }
  }
}



const oa_q8_isa_t oa_q8_avx_vnni_isa = {.name = "avx_vnni", .mr = MR, .nr = NR, .kg = 4, .wide = 0,
                                        .gemm = q8_avxvnni_gemm, .gemm_rows = q8_avxvnni_gemm_rows,
                                        .requant = oa_q8_avx2_requant, .requant_rows = oa_q8_avx2_requant_rows,
                                        .dw = oa_q8_avx2_dw,
                                        .gemv = oa_q8_avx2_gemv, .gemv_u8 = q8_avxvnni_gemv, .u8 = 1,
                                        .pack = q8_avxvnni_pack,
                                        .wsum = oa_q8_avx2_wsum, .variant = "avx_vnni", .add = oa_q8_avx2_add,
                                        .quantize = oa_q8_avx2_quantize, .dequantize = oa_q8_avx2_dequantize};
#else
typedef int oa_q8_avx_vnni_unused_t; /* not an AVX-VNNI build of this file */
#endif
