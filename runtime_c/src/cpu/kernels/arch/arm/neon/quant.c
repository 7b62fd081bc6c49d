/* NEON int8 micro-kernels (opt/quant.h).
 *   aarch64: 8x8 tile on int16 operands (kg 1), 16 int32x4 accumulators, widening
 *            multiply-accumulate by lane (vmlal_laneq_s16 / vmlal_high_laneq_s16);
 *            with the dot-product extension (the CPU reports dotprod: selected inside the NEON
 *            variant, opt/quant.c) an 8x8 tile on raw int8 quads (kg 4): vdotq_laneq_s32, 4
 *            products per lane per instruction, compiled for armv8.2-a+dotprod by a function
 *            attribute, so a plain armv8-a build still has it;
 *   armv7:   4x8 tile on int16 operands, 8 q accumulators, vmlal_lane_s16.
 * Every product is exact in int32 (|w * x| <= 2^14, K <= 65536). The requantization runs on
 * int64x2 lanes: vqmovn_s64 is sat_int32, then the multiply, round half to even on the
 * magnitude, clamp; checked bit-identical with q8_requant by tests/ops/test_quant_kernels.py. */
#include <stddef.h>

#include "kernels/opt/quant.h"

#if defined(__ARM_NEON)
#include <arm_neon.h>

#if defined(__aarch64__)
#define MR 8
/* A [kp][8], B [kp][8] int16 */
static void q8_neon_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int16_t *a = (const int16_t *)a_, *b = (const int16_t *)b_;
  int32x4_t acc[8][2];
  for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = vdupq_n_s32(0);
  for (int64_t q = 0; q < kp; q++, a += 8, b += 8) {
    const int16x8_t av = vld1q_s16(a), bv = vld1q_s16(b);
    const int16x4_t bl = vget_low_s16(bv);
#define ROW(i)                                                  \
  acc[i][0] = vmlal_laneq_s16(acc[i][0], bl, av, i);            \
  acc[i][1] = vmlal_high_laneq_s16(acc[i][1], bv, av, i);
    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
  }
  for (int i = 0; i < 8; i++) {
    vst1q_s32(c + i * ldc, acc[i][0]);
    vst1q_s32(c + i * ldc + 4, acc[i][1]);
  }
}

/* A [kp/4][8][4], B [kp/4][8][4] int8 (raw values) */
__attribute__((target("arch=armv8.2-a+dotprod"))) static void q8_neon_gemm_sdot(int64_t kp, const void *a_,
                                                                               const void *b_, int32_t *c, int64_t ldc) {
  const int8_t *a = (const int8_t *)a_, *b = (const int8_t *)b_;
  int32x4_t acc[8][2];
  for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = vdupq_n_s32(0);
  for (int64_t q = 0; q < kp; q += 4, a += 32, b += 32) {
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16), b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16);
#define ROW(i, av, l)                                        \
  acc[i][0] = vdotq_laneq_s32(acc[i][0], b0, av, l);         \
  acc[i][1] = vdotq_laneq_s32(acc[i][1], b1, av, l);
    ROW(0, a0, 0) ROW(1, a0, 1) ROW(2, a0, 2) ROW(3, a0, 3) ROW(4, a1, 0) ROW(5, a1, 1) ROW(6, a1, 2) ROW(7, a1, 3)
#undef ROW
  }
  for (int i = 0; i < 8; i++) {
    vst1q_s32(c + i * ldc, acc[i][0]);
    vst1q_s32(c + i * ldc + 4, acc[i][1]);
  }
}
#else
#define MR 4
/* A [kp][4], B [kp][8] int16 */
static void q8_neon_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int16_t *a = (const int16_t *)a_, *b = (const int16_t *)b_;
  int32x4_t acc[4][2];
  for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = vdupq_n_s32(0);
  for (int64_t q = 0; q < kp; q++, a += 4, b += 8) {
    const int16x4_t av = vld1_s16(a);
    const int16x8_t bv = vld1q_s16(b);
    const int16x4_t bl = vget_low_s16(bv), bh = vget_high_s16(bv);
#define ROW(i)                                        \
  acc[i][0] = vmlal_lane_s16(acc[i][0], bl, av, i);   \
  acc[i][1] = vmlal_lane_s16(acc[i][1], bh, av, i);
    ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
  }
  for (int i = 0; i < 4; i++) {
    vst1q_s32(c + i * ldc, acc[i][0]);
    vst1q_s32(c + i * ldc + 4, acc[i][1]);
  }
}
#endif

typedef struct rq {
  int64x2_t corr, half, badd, negn; /* half: 2^(n-1) - 1; badd: the bias's addend */
  int32x2_t mult, rlo, rhi, zp;
  int32_t shift;
} rq_t;

/* 2 outputs: the rule of quant_rule.h on int64 lanes */
static inline int32x2_t rq2(const rq_t *r, int32x2_t acc) {
  const int32x2_t v = vqmovn_s64(vaddw_s32(r->corr, acc)); /* sat_int32 */
  int64x2_t p = vaddq_s64(vmull_s32(v, r->mult), r->badd); /* exact: |p| < 2^63 */
  if (r->shift) { /* round half to even on |p| */
    const int64x2_t s = vshrq_n_s64(p, 63);
    const uint64x2_t u = vreinterpretq_u64_s64(vsubq_s64(veorq_s64(p, s), s));
    const uint64x2_t odd = vandq_u64(vshlq_u64(u, r->negn), vdupq_n_u64(1));
    const uint64x2_t q = vshlq_u64(vaddq_u64(vaddq_u64(u, vreinterpretq_u64_s64(r->half)), odd), r->negn);
    p = vsubq_s64(veorq_s64(vreinterpretq_s64_u64(q), s), s);
  }
  /* |p| may exceed int32: narrowing with saturation keeps it beyond the clamp bounds */
  const int32x2_t n = vmin_s32(vmax_s32(vqmovn_s64(p), r->rlo), r->rhi);
  return vadd_s32(n, r->zp);
}

static void q8_neon_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                            int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rq_t r;
  r.corr = vdupq_n_s64(corr);
  r.half = vdupq_n_s64(shift ? ((int64_t)1 << (shift - 1)) - 1 : 0);
  r.badd = vdupq_n_s64(badd);
  r.negn = vdupq_n_s64(-(int64_t)shift);
  r.mult = vdup_n_s32(mult);
  r.rlo = vdup_n_s32(lo - zp), r.rhi = vdup_n_s32(hi - zp), r.zp = vdup_n_s32(zp);
  r.shift = shift;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int32x4_t a0 = vld1q_s32(acc + j), a1 = vld1q_s32(acc + j + 4);
    const int32x4_t v0 = vcombine_s32(rq2(&r, vget_low_s32(a0)), rq2(&r, vget_high_s32(a0)));
    const int32x4_t v1 = vcombine_s32(rq2(&r, vget_low_s32(a1)), rq2(&r, vget_high_s32(a1)));
    vst1_s8(y + j, vmovn_s16(vcombine_s16(vmovn_s32(v0), vmovn_s32(v1)))); /* values in [-128, 127] */
  }
  for (; j < n; j++) y[j] = q8_requant(corr + acc[j], mult, shift, badd, zp, lo, hi);
}

static void q8_neon_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                       int64_t dh, int64_t dw, int64_t n, int32_t *acc) {
  oa_q8_dw_generic(rows, ld, w, kh, kw, sw, dh, dw, n, acc);
}

static inline int32_t hsum(int32x4_t v) {
#if defined(__aarch64__)
  return vaddvq_s32(v);
#else
  const int32x2_t s = vadd_s32(vget_low_s32(v), vget_high_s32(v));
  return vget_lane_s32(vpadd_s32(s, s), 0);
#endif
}

/* 8 k of a W row times 8 int16 of x, accumulated */
static inline int32x4_t dot8(int32x4_t s, const int8_t *w, const int16_t *x) {
  const int16x8_t wv = vmovl_s8(vld1_s8(w)), xv = vld1q_s16(x);
  s = vmlal_s16(s, vget_low_s16(wv), vget_low_s16(xv));
  return vmlal_s16(s, vget_high_s16(wv), vget_high_s16(xv));
}

static void q8_neon_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const int16_t *x = (const int16_t *)x_;
  const int64_t k8 = k / 8 * 8;
  for (int64_t i = 0; i < m; i++) {
    const int16_t *xr = x + i * k;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
      int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t q = 0; q < k8; q += 8) {
        s0 = dot8(s0, w0 + q, xr + q);
        s1 = dot8(s1, w1 + q, xr + q);
        s2 = dot8(s2, w2 + q, xr + q);
        s3 = dot8(s3, w3 + q, xr + q);
      }
      int32_t t0 = hsum(s0), t1 = hsum(s1), t2 = hsum(s2), t3 = hsum(s3);
      for (int64_t q = k8; q < k; q++) {
        t0 += (int32_t)w0[q] * xr[q], t1 += (int32_t)w1[q] * xr[q];
        t2 += (int32_t)w2[q] * xr[q], t3 += (int32_t)w3[q] * xr[q];
      }
      acc[i * n + j] = t0, acc[i * n + j + 1] = t1, acc[i * n + j + 2] = t2, acc[i * n + j + 3] = t3;
    }
    for (; j < n; j++) {
      const int8_t *wr = w + j * k;
      int32x4_t s = vdupq_n_s32(0);
      for (int64_t q = 0; q < k8; q += 8) s = dot8(s, wr + q, xr + q);
      int32_t t = hsum(s);
      for (int64_t q = k8; q < k; q++) t += (int32_t)wr[q] * xr[q];
      acc[i * n + j] = t;
    }
  }
}

const oa_q8_isa_t oa_q8_neon_isa = {.name = "neon", .mr = MR, .nr = 8, .kg = 1, .wide = 1, .gemm = q8_neon_gemm,
                                    .requant = q8_neon_requant, .dw = q8_neon_dw, .gemv = q8_neon_gemv,
                                    .add = oa_q8_portable_add, .quantize = oa_q8_portable_quantize,
                                    .dequantize = oa_q8_portable_dequantize};

#if defined(__aarch64__)
static const oa_q8_isa_t q8_neon_sdot_isa = {.name = "neon", .mr = 8, .nr = 8, .kg = 4, .wide = 0,
                                             .gemm = q8_neon_gemm_sdot, .requant = q8_neon_requant,
                                             .dw = q8_neon_dw, .gemv = q8_neon_gemv, .add = oa_q8_portable_add,
                                             .quantize = oa_q8_portable_quantize,
                                             .dequantize = oa_q8_portable_dequantize};
const oa_q8_isa_t *oa_q8_neon_sdot_isa(void) { return &q8_neon_sdot_isa; }
#else
const oa_q8_isa_t *oa_q8_neon_sdot_isa(void) { return NULL; }
#endif

#if defined(__aarch64__) && defined(OA_HAVE_I8MM)
/* the i8mm (smmla) tile of neon/quant_i8mm.c, the only file built with +i8mm: 8x8, kg 8, raw int8
 * (A tiles packed by the driver's K-step packer, akg 8: the same [kp/8][8][8] layout); the plan is
 * named "neon_i8mm" (opt/quant.c) */
void oa_q8_i8mm_gemm(int64_t kp, const void *a, const void *b, int32_t *c, int64_t ldc);
void oa_q8_i8mm_pack(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc,
                     int32_t nr, void *dst);
static const oa_q8_isa_t q8_neon_i8mm_isa = {.name = "neon", .mr = 8, .nr = 8, .kg = 8, .wide = 0,
                                             .gemm = oa_q8_i8mm_gemm, .requant = q8_neon_requant,
                                             .dw = q8_neon_dw, .gemv = q8_neon_gemv, .pack = oa_q8_i8mm_pack,
                                             .variant = "neon_i8mm", .akg = 8, .add = oa_q8_portable_add,
                                             .quantize = oa_q8_portable_quantize,
                                             .dequantize = oa_q8_portable_dequantize};
const oa_q8_isa_t *oa_q8_neon_i8mm_isa(void) { return &q8_neon_i8mm_isa; }
#else
const oa_q8_isa_t *oa_q8_neon_i8mm_isa(void) { return NULL; }
#endif

#endif /* __ARM_NEON */
