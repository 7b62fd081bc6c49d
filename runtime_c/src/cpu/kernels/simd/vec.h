/* The one SIMD layer of the CPU kernels: a float vector type `vf` of VW lanes and its operations,
 * used by the SIMD-family templates (opt/simd_kernels.inc and the family .inc files), the
 * depthwise templates (opt/dwconv.inc, opt/dwconv_nhwc.inc) and the Winograd transforms
 * (opt/winograd_transform.inc). Exactly one backend is chosen by the including file under arch/:
 *   OA_SIMD_AVX2   8 lanes, AVX2 + FMA (arch/x86/avx2/, built with -mavx2 -mfma)
 *   OA_SIMD_NEON   4 lanes, Advanced SIMD (arch/arm/neon/: aarch64, and armv7 with NEON)
 *   OA_SIMD_RVV    8 lanes, RVV 1.0 at LMUL 2, vl 8 (arch/riscv/rvv/: rv64gcv, built by clang)
 *   (neither)      1 lane, plain C11 (arch/portable/: every target)
 * so one kernel source gives every variant, with the same algorithm and nearly the same numerics.
 *
 * Semantics every backend keeps (the kernels rely on them):
 *   vf_fma(a, b, c)      a * b + c (fused where the ISA has it: AVX2+FMA, aarch64, armv7 VFPv4)
 *   vf_fnma(a, b, c)     c - a * b (same)
 *   vf_max_keep(x, k)    max(x, k) for a non-NaN bound k; a NaN x stays NaN
 *   vf_min_keep(x, k)    min(x, k), same
 *   vf_max_nan(a, b)     max, NaN if either is NaN (max pooling)
 *   vf_select(m, a, b)   m ? a : b per lane (m from the vf_lt / vf_le / vf_gt / vf_ge compares;
 *                        compares with a NaN are false)
 *   vf_round_small(x)    x rounded to the nearest integer, ties to even, for |x| < 2^22
 *   vf_to_int(x)         an integral x (|x| < 2^22, or NaN: any value) to int32 lanes
 *   vf_pow2(n)           2^n as floats for int lanes n in [-126, 127]; n = -127 gives +0
 *   vf_even(a, b)        the even lanes of a then of b: {a0, a2, ..., b0, b2, ...}
 *   vf_hsum / vf_hmax    horizontal sum (fixed order) / max of the lanes
 *   vf_load_part(p, n, fill) / vf_store_part(p, n, v)   the first n <= VW lanes only (tails: the
 *                        same vector code computes them, so tails have the body's numerics)
 *   vf_store_interleaved(dst, r[VW]) / vf_load_interleaved(src, r[VW])   VW vectors as VW x VW
 *                        lane-interleaved floats (dst[q * VW + l] = r[l][q]; the store may clobber r)
 * armv7 NEON flushes subnormal results to zero; nothing here depends on subnormals. */
#ifndef OA_KERNELS_SIMD_VEC_H
#define OA_KERNELS_SIMD_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(OA_SIMD_AVX2)
/* ---------------------------------------------------------------- AVX2 + FMA, 8 lanes ---- */
#include <immintrin.h>

#define VW 8
#define OA_SIMD_HAS_DIV 1
typedef __m256 vf;
typedef __m256 vm;
typedef __m256i vi;

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vf_set1(float f) { return _mm256_set1_ps(f); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vf_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
/* maxps / minps return the second operand when either is NaN */
static inline vf vf_max_keep(vf x, vf k) { return _mm256_max_ps(k, x); }
static inline vf vf_min_keep(vf x, vf k) { return _mm256_min_ps(k, x); }
static inline vf vf_max_nan(vf a, vf b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
static inline vf vf_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vf_signbit(vf a) { return _mm256_and_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vf_or(vf a, vf b) { return _mm256_or_ps(a, b); }
static inline vf vf_xor(vf a, vf b) { return _mm256_xor_ps(a, b); }
static inline vm vf_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vm vf_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
static inline vm vf_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vm vf_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vf vf_select(vm m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
static inline vf vf_round_small(vf x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vi vf_to_int(vf x) { return _mm256_cvtps_epi32(x); }
static inline vi vi_half(vi n) { return _mm256_srai_epi32(n, 1); }
static inline vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vf vf_pow2(vi n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}
static inline vf vf_even(vf a, vf b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline __m256i vf_mask_(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* the first n (<= VW) lanes; masked-off lanes are not read / written (no fault past the end) */
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
  const __m256i m = vf_mask_(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void vf_store_part(float *p, int64_t n, vf v) { _mm256_maskstore_ps(p, vf_mask_(n), v); }
static inline float vf_hsum(vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline float vf_hmax(vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* VW vectors lane-interleaved: store dst[q * VW + l] = r[l][q] (r is clobbered), load
 * r[l][q] = src[q * VW + l]; an 8 x 8 register transpose */
static inline void vf_transpose8_(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
static inline void vf_store_interleaved(float *dst, vf r[VW]) {
  vf_transpose8_(r);
  /* eight stores written out (a store loop here became a rep movs copy through the stack) */
  _mm256_storeu_ps(dst, r[0]);
  _mm256_storeu_ps(dst + 8, r[1]);
  _mm256_storeu_ps(dst + 16, r[2]);
  _mm256_storeu_ps(dst + 24, r[3]);
  _mm256_storeu_ps(dst + 32, r[4]);
  _mm256_storeu_ps(dst + 40, r[5]);
  _mm256_storeu_ps(dst + 48, r[6]);
  _mm256_storeu_ps(dst + 56, r[7]);
}
static inline void vf_load_interleaved(const float *src, vf r[VW]) {
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * 8);
  vf_transpose8_(r);
}

#elif defined(OA_SIMD_NEON)
/* ---------------------------------------------------------------- NEON, 4 lanes ------------- */
#include <arm_neon.h>

#define VW 4
typedef float32x4_t vf;
typedef uint32x4_t vm;
typedef int32x4_t vi;

static inline vf vf_load(const float *p) { return vld1q_f32(p); }
static inline void vf_store(float *p, vf v) { vst1q_f32(p, v); }
static inline vf vf_set1(float f) { return vdupq_n_f32(f); }
static inline vf vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
static inline vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
static inline vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
#if defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
static inline vf vf_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
static inline vf vf_fnma(vf a, vf b, vf c) { return vfmsq_f32(c, a, b); }
#else
static inline vf vf_fma(vf a, vf b, vf c) { return vmlaq_f32(c, a, b); }
static inline vf vf_fnma(vf a, vf b, vf c) { return vmlsq_f32(c, a, b); }
#endif
#if defined(__aarch64__)
#define OA_SIMD_HAS_DIV 1
static inline vf vf_div(vf a, vf b) { return vdivq_f32(a, b); }
#else
/* armv7 has no vector division: a * 1/b with the reciprocal estimate refined by two Newton steps
 * (vrecps treats inf * 0 as 2, so 1/inf = 0): about 2 ulp. Used by the activations only (never
 * for `div`, which declines on armv7). */
static inline vf vf_div(vf a, vf b) {
  float32x4_t r = vrecpeq_f32(b);
  r = vmulq_f32(vrecpsq_f32(b, r), r);
  r = vmulq_f32(vrecpsq_f32(b, r), r);
  return vmulq_f32(a, r);
}
#endif
/* vmaxq / vminq return NaN when either operand is NaN */
static inline vf vf_max_keep(vf x, vf k) { return vmaxq_f32(x, k); }
static inline vf vf_min_keep(vf x, vf k) { return vminq_f32(x, k); }
static inline vf vf_max_nan(vf a, vf b) { return vmaxq_f32(a, b); }
static inline vf vf_abs(vf a) { return vabsq_f32(a); }
static inline vf vf_signbit(vf a) {
  return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x80000000u)));
}
static inline vf vf_or(vf a, vf b) {
  return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
static inline vf vf_xor(vf a, vf b) {
  return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
static inline vm vf_lt(vf a, vf b) { return vcltq_f32(a, b); }
static inline vm vf_le(vf a, vf b) { return vcleq_f32(a, b); }
static inline vm vf_gt(vf a, vf b) { return vcgtq_f32(a, b); }
static inline vm vf_ge(vf a, vf b) { return vcgeq_f32(a, b); }
static inline vf vf_select(vm m, vf a, vf b) { return vbslq_f32(m, a, b); }
#if defined(__aarch64__)
static inline vf vf_round_small(vf x) { return vrndnq_f32(x); }
#else
static inline vf vf_round_small(vf x) { /* 1.5 * 2^23: the sum rounds to an integer */
  const float32x4_t magic = vdupq_n_f32(12582912.0f);
  return vsubq_f32(vaddq_f32(x, magic), magic);
}
#endif
static inline vi vf_to_int(vf x) { return vcvtq_s32_f32(x); }
/* the first n (<= VW) lanes */
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
  if (n >= 4) return vld1q_f32(p);
  vf v = vdupq_n_f32(fill);
  if (n > 0) v = vld1q_lane_f32(p, v, 0);
  if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
  if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
  return v;
}
static inline void vf_store_part(float *p, int64_t n, vf v) {
  if (n >= 4) {
    vst1q_f32(p, v);
    return;
  }
  if (n > 0) vst1q_lane_f32(p, v, 0);
  if (n > 1) vst1q_lane_f32(p + 1, v, 1);
  if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}
static inline vi vi_half(vi n) { return vshrq_n_s32(n, 1); }
static inline vi vi_sub(vi a, vi b) { return vsubq_s32(a, b); }
static inline vf vf_pow2(vi n) { return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n, vdupq_n_s32(127)), 23)); }
#if defined(__aarch64__)
static inline vf vf_even(vf a, vf b) { return vuzp1q_f32(a, b); }
static inline float vf_hsum(vf v) { return vaddvq_f32(v); }
static inline float vf_hmax(vf v) { return vmaxvq_f32(v); }
#else
static inline vf vf_even(vf a, vf b) { return vuzpq_f32(a, b).val[0]; }
static inline float vf_hsum(vf v) {
  float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpadd_f32(s, s), 0);
}
static inline float vf_hmax(vf v) {
  float32x2_t s = vmax_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpmax_f32(s, s), 0);
}
#endif

/* VW vectors lane-interleaved (vst4 / vld4): store dst[q * VW + l] = r[l][q], load
 * r[l][q] = src[q * VW + l] */
static inline void vf_store_interleaved(float *dst, vf r[VW]) {
  float32x4x4_t t;
  t.val[0] = r[0];
  t.val[1] = r[1];
  t.val[2] = r[2];
  t.val[3] = r[3];
  vst4q_f32(dst, t);
}
static inline void vf_load_interleaved(const float *src, vf r[VW]) {
  const float32x4x4_t t = vld4q_f32(src);
  r[0] = t.val[0];
  r[1] = t.val[1];
  r[2] = t.val[2];
  r[3] = t.val[3];
}

#elif defined(OA_SIMD_RVV)
/* ---------------------------------------------------------------- RVV 1.0, 8 lanes ---------- */
/* vfloat32m2_t at a fixed vl of 8: LMUL 2 holds at least 8 floats at every VLEN >= 128 (the V
 * extension's minimum), so vl is 8 on every RVV CPU and the templates' lane order, tails and
 * sums are the same at every vector length (results bit-identical across VLEN). RVV types are
 * sizeless (no arrays, no struct members): the lane-interleaved load / store (Winograd) are not
 * provided; those kernels use the portable transforms. Old (clang 14) intrinsic names. */
#include <riscv_vector.h>

#define VW 8
#define OA_SIMD_HAS_DIV 1
#define OA_RVV_VL_ 8
typedef vfloat32m2_t vf;
typedef vbool16_t vm;
typedef vint32m2_t vi;

static inline vf vf_load(const float *p) { return vle32_v_f32m2(p, OA_RVV_VL_); }
static inline void vf_store(float *p, vf v) { vse32_v_f32m2(p, v, OA_RVV_VL_); }
static inline vf vf_set1(float f) { return vfmv_v_f_f32m2(f, OA_RVV_VL_); }
static inline vf vf_zero(void) { return vfmv_v_f_f32m2(0.0f, OA_RVV_VL_); }
static inline vf vf_add(vf a, vf b) { return vfadd_vv_f32m2(a, b, OA_RVV_VL_); }
static inline vf vf_sub(vf a, vf b) { return vfsub_vv_f32m2(a, b, OA_RVV_VL_); }
static inline vf vf_mul(vf a, vf b) { return vfmul_vv_f32m2(a, b, OA_RVV_VL_); }
static inline vf vf_div(vf a, vf b) { return vfdiv_vv_f32m2(a, b, OA_RVV_VL_); }
static inline vf vf_fma(vf a, vf b, vf c) { return vfmacc_vv_f32m2(c, a, b, OA_RVV_VL_); }
static inline vf vf_fnma(vf a, vf b, vf c) { return vfnmsac_vv_f32m2(c, a, b, OA_RVV_VL_); }
static inline vm vf_lt(vf a, vf b) { return vmflt_vv_f32m2_b16(a, b, OA_RVV_VL_); }
static inline vm vf_le(vf a, vf b) { return vmfle_vv_f32m2_b16(a, b, OA_RVV_VL_); }
static inline vm vf_gt(vf a, vf b) { return vmfgt_vv_f32m2_b16(a, b, OA_RVV_VL_); }
static inline vm vf_ge(vf a, vf b) { return vmfge_vv_f32m2_b16(a, b, OA_RVV_VL_); }
/* m ? a : b */
static inline vf vf_select(vm m, vf a, vf b) { return vmerge_vvm_f32m2(m, b, a, OA_RVV_VL_); }
/* vfmax / vfmin return the other operand for a NaN one (IEEE maximumNumber): compares instead */
static inline vf vf_max_keep(vf x, vf k) { return vf_select(vf_lt(x, k), k, x); }
static inline vf vf_min_keep(vf x, vf k) { return vf_select(vf_gt(x, k), k, x); }
static inline vm vf_isnan_(vf a) { return vmfne_vv_f32m2_b16(a, a, OA_RVV_VL_); }
static inline vf vf_max_nan(vf a, vf b) {
  const vf m = vfmax_vv_f32m2(a, b, OA_RVV_VL_);
  return vf_select(vmor_mm_b16(vf_isnan_(a), vf_isnan_(b), OA_RVV_VL_), vf_add(a, b), m);
}
static inline vf vf_abs(vf a) { return vfabs_v_f32m2(a, OA_RVV_VL_); }
static inline vuint32m2_t vf_u_(vf a) { return vreinterpret_v_f32m2_u32m2(a); }
static inline vf vf_f_(vuint32m2_t u) { return vreinterpret_v_u32m2_f32m2(u); }
static inline vf vf_signbit(vf a) { return vf_f_(vand_vx_u32m2(vf_u_(a), 0x80000000u, OA_RVV_VL_)); }
static inline vf vf_or(vf a, vf b) { return vf_f_(vor_vv_u32m2(vf_u_(a), vf_u_(b), OA_RVV_VL_)); }
static inline vf vf_xor(vf a, vf b) { return vf_f_(vxor_vv_u32m2(vf_u_(a), vf_u_(b), OA_RVV_VL_)); }
/* 1.5 * 2^23: the sum rounds to an integer (ties to even; independent of frm) */
static inline vf vf_round_small(vf x) {
  return vfsub_vf_f32m2(vfadd_vf_f32m2(x, 12582912.0f, OA_RVV_VL_), 12582912.0f, OA_RVV_VL_);
}
/* an integral x: any rounding mode gives x (the dynamic one: qemu 7.2 asserts while translating
 * the static-rtz vfcvt.rtz.x.f.v, gitlab.com/qemu-project/qemu/-/issues/1441) */
static inline vi vf_to_int(vf x) { return vfcvt_x_f_v_i32m2(x, OA_RVV_VL_); }
static inline vi vi_half(vi n) { return vsra_vx_i32m2(n, 1, OA_RVV_VL_); }
static inline vi vi_sub(vi a, vi b) { return vsub_vv_i32m2(a, b, OA_RVV_VL_); }
static inline vf vf_pow2(vi n) {
  return vreinterpret_v_i32m2_f32m2(vsll_vx_i32m2(vadd_vx_i32m2(n, 127, OA_RVV_VL_), 23, OA_RVV_VL_));
}
/* the even lanes of a then of b: both stored, then one strided load */
static inline vf vf_even(vf a, vf b) {
  float t[2 * VW];
  vse32_v_f32m2(t, a, OA_RVV_VL_);
  vse32_v_f32m2(t + VW, b, OA_RVV_VL_);
  return vlse32_v_f32m2(t, 2 * sizeof(float), OA_RVV_VL_);
}
/* the first n (<= VW) lanes: a masked load (masked-off lanes are not read, they get fill), a
 * store of vl n */
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
  const vbool16_t m = vmsltu_vx_u32m2_b16(vid_v_u32m2(OA_RVV_VL_), (uint32_t)(n > 0 ? n : 0), OA_RVV_VL_);
  return vle32_v_f32m2_m(m, vf_set1(fill), p, OA_RVV_VL_);
}
static inline void vf_store_part(float *p, int64_t n, vf v) {
  if (n > 0) vse32_v_f32m2(p, v, (size_t)(n < VW ? n : VW));
}
/* fixed order: the ordered reduction (lane 0 first) */
static inline float vf_hsum(vf v) {
  return vfmv_f_s_f32m1_f32(vfredosum_vs_f32m2_f32m1(vfmv_v_f_f32m1(0.0f, 1), v, vfmv_v_f_f32m1(0.0f, 1), OA_RVV_VL_));
}
/* NaN if a lane is NaN (vfredmax would skip it) */
static inline float vf_hmax(vf v) {
  if (vfirst_m_b16(vf_isnan_(v), OA_RVV_VL_) >= 0) return NAN;
  return vfmv_f_s_f32m1_f32(vfredmax_vs_f32m2_f32m1(vfmv_v_f_f32m1(0.0f, 1), v, vfmv_v_f_f32m1(-INFINITY, 1), OA_RVV_VL_));
}
#else
/* ---------------------------------------------------------------- portable C, 1 lane -------- */
#define VW 1
#define OA_SIMD_HAS_DIV 1
typedef float vf;
typedef int vm;
typedef int32_t vi;

static inline vf vf_load(const float *p) { return *p; }
static inline void vf_store(float *p, vf v) { *p = v; }
static inline vf vf_set1(float f) { return f; }
static inline vf vf_zero(void) { return 0.0f; }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_div(vf a, vf b) { return a / b; }
#if defined(FP_FAST_FMAF)
static inline vf vf_fma(vf a, vf b, vf c) { return fmaf(a, b, c); }
static inline vf vf_fnma(vf a, vf b, vf c) { return fmaf(-a, b, c); }
#else
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
static inline vf vf_fnma(vf a, vf b, vf c) { return c - a * b; }
#endif
static inline vf vf_max_keep(vf x, vf k) { return x < k ? k : x; }
static inline vf vf_min_keep(vf x, vf k) { return x > k ? k : x; }
static inline vf vf_max_nan(vf a, vf b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
static inline vf vf_abs(vf a) { return fabsf(a); }
static inline uint32_t vf_bits_(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float vf_from_bits_(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline vf vf_signbit(vf a) { return vf_from_bits_(vf_bits_(a) & 0x80000000u); }
static inline vf vf_or(vf a, vf b) { return vf_from_bits_(vf_bits_(a) | vf_bits_(b)); }
static inline vf vf_xor(vf a, vf b) { return vf_from_bits_(vf_bits_(a) ^ vf_bits_(b)); }
static inline vm vf_lt(vf a, vf b) { return a < b; }
static inline vm vf_le(vf a, vf b) { return a <= b; }
static inline vm vf_gt(vf a, vf b) { return a > b; }
static inline vm vf_ge(vf a, vf b) { return a >= b; }
static inline vf vf_select(vm m, vf a, vf b) { return m ? a : b; }
static inline vf vf_round_small(vf x) { return (x + 12582912.0f) - 12582912.0f; } /* 1.5 * 2^23 */
static inline vi vf_to_int(vf x) { return x != x ? 0 : (int32_t)x; }
static inline vi vi_half(vi n) { return n / 2; }
static inline vi vi_sub(vi a, vi b) { return a - b; }
static inline vf vf_pow2(vi n) { return vf_from_bits_((uint32_t)(n + 127) << 23); }
static inline vf vf_even(vf a, vf b) {
  (void)b;
  return a;
}
static inline float vf_hsum(vf v) { return v; }
static inline float vf_hmax(vf v) { return v; }
/* one lane: a partial vector is empty */
static inline vf vf_load_part(const float *p, int64_t n, float fill) { return n > 0 ? *p : fill; }
static inline void vf_store_part(float *p, int64_t n, vf v) {
  if (n > 0) *p = v;
}
/* one lane: interleaving is a copy */
static inline void vf_store_interleaved(float *dst, vf r[VW]) { dst[0] = r[0]; }
static inline void vf_load_interleaved(const float *src, vf r[VW]) { r[0] = src[0]; }
#endif

static inline vf vf_neg(vf a) { return vf_xor(a, vf_set1(-0.0f)); }

#endif /* OA_KERNELS_SIMD_VEC_H */
