/* Portable int8 micro-kernels (opt/quant.h): a 4x8 int16 tile (the compiler vectorises its
 * column loop where it can), the requantization of one output row with the rule itself, the
 * depthwise row and the GEMV. Any CPU; also the fall-backs of the SIMD tables. */
#include <stddef.h>

#include "kernels/opt/quant.h"

/* A [kp][4], B [kp][8] int16 (kg 1) */
static void q8_portable_gemm_4x8(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int16_t *a = (const int16_t *)a_, *b = (const int16_t *)b_;
  int32_t acc[4][8] = {{0}};
  for (int64_t q = 0; q < kp; q++, a += 4, b += 8) {
    for (int i = 0; i < 4; i++) {
      const int32_t av = a[i];
      for (int j = 0; j < 8; j++) acc[i][j] += av * (int32_t)b[j];
    }
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) c[i * ldc + j] = acc[i][j];
}

void oa_q8_portable_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                            int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  for (int64_t j = 0; j < n; j++) y[j] = q8_requant(corr + acc[j], mult, shift, badd, zp, lo, hi);
}

void oa_q8_portable_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                       int64_t dh, int64_t dw, int64_t n, int32_t *acc) {
  oa_q8_dw_generic(rows, ld, w, kh, kw, sw, dh, dw, n, acc);
}

void oa_q8_portable_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const int16_t *x = (const int16_t *)x_;
  for (int64_t i = 0; i < m; i++) {
    const int16_t *xr = x + i * k;
    for (int64_t j = 0; j < n; j++) {
      const int8_t *wr = w + j * k;
      int32_t s = 0;
      for (int64_t q = 0; q < k; q++) s += (int32_t)wr[q] * xr[q];
      acc[i * n + j] = s;
    }
  }
}

void oa_q8_portable_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y) {
  for (int64_t i = 0; i < n; i++) y[i] = oa_q8_add1(a[i], b[i], p);
}

void oa_q8_portable_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y) {
  uint8_t *yp = (uint8_t *)y; /* the low byte of the value: int8 and uint8 outputs alike */
  for (int64_t i = 0; i < n; i++) yp[i] = (uint8_t)(int32_t)oa_q8_quantize1(x[i], inv, zp, lo, hi);
}

void oa_q8_portable_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y) {
  if (u8) {
    const uint8_t *xp = (const uint8_t *)x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)xp[i] - zp) * scale;
  } else {
    const int8_t *xp = (const int8_t *)x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)xp[i] - zp) * scale;
  }
}

const oa_q8_isa_t oa_q8_portable_isa = {.name = "portable", .mr = 4, .nr = 8, .kg = 1, .wide = 1,
                                        .gemm = q8_portable_gemm_4x8, .requant = oa_q8_portable_requant,
                                        .dw = oa_q8_portable_dw, .gemv = oa_q8_portable_gemv,
                                        .add = oa_q8_portable_add, .quantize = oa_q8_portable_quantize,
                                        .dequantize = oa_q8_portable_dequantize};
