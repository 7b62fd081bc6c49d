/* The float path of the AVX-512 requantization (its proof: arch/x86/avx512/quant.c, above rqs_t),
 * shared by quant.c (requant_rows) and quant_vnni.c (the depthwise row kernel, which finishes its
 * sums in registers): a row's multiplier and bias as float32 (rr_row_fields), the value
 * v m + badd / 2^shift bracketed by two FMAs rounded down and up and each rounded to an integer
 * (rr_t2), and 16 outputs at a time with the lanes it could not settle (those take the exact
 * path, oa_q8_avx512_requant). Included only by AVX-512 files. */
#ifndef OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H
#define OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define Q8_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define Q8_MAGIC_BITS 0x4b400000
#define Q8_FLT_MAX_SUM (1 << 23)

static inline float f32_step(float f, int32_t d) { /* the next float toward 0 (-1) or away (+1); f > 0 */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u = (uint32_t)((int64_t)u + d);
  memcpy(&f, &u, sizeof f);
  return f;
}

/* the float32 values flo <= mult / 2^shift <= fhi next to it (equal when it is one) */
static inline void m_bracket(int32_t mult, int32_t shift, float *flo, float *fhi) {
  /* m = mult * 2^-shift, exact in double (31 significant bits; 2^-shift built from its bits: this
   * runs once per output row, where ldexp / nextafterf calls would show) */
  const uint64_t pb = (uint64_t)(1023 - shift) << 52;
  double p2;
  memcpy(&p2, &pb, sizeof p2);
  const double m = (double)mult * p2;
  const float f = (float)m;
  *flo = (double)f > m ? f32_step(f, -1) : f, *fhi = (double)f < m ? f32_step(f, 1) : f;
}

/* A row's float path fields: the float32 values mlo <= m <= mhi around m = mult / 2^shift (equal
 * when m is a float32: a multiplier of at most 24 significant bits) and bf = badd / 2^shift (the
 * bias in output steps) as float32. 0 (the row takes the exact path) unless m <= 1 and bf is exact
 * and below 2^12 in magnitude (always so for an addend from a float32 bias below 2^12 steps: it
 * has at most 24 significant bits). */
static inline int rr_row_fields(int32_t mult, int32_t shift, int64_t badd, float *mlo, float *mhi, float *bf) {
  float flo, fhi;
  m_bracket(mult, shift, &flo, &fhi);
  const uint64_t pb = (uint64_t)(1023 - shift) << 52;
  double p2;
  memcpy(&p2, &pb, sizeof p2);
  const int small = badd > -((int64_t)1 << 52) && badd < ((int64_t)1 << 52);
  const double b = (double)badd * p2; /* exact when small */
  *mlo = flo, *mhi = fhi, *bf = (float)b;
  return (double)fhi <= 1.0 && small && (double)*bf == b && b > -4096.0 && b < 4096.0;
}

/* magic + the rounding of v m + bf down (*rlo) and up (*rhi), each to an integer half to even:
 * the FMAs take the bound of m that makes v m smaller (rounded down: mlo for v >= 0, mhi for v < 0)
 * and larger (rounded up), so the exact value v m + bf lies between the two results; t ->
 * RN(t + magic) is monotonic (magic + round_half_even(t) for |t| < 2^22, spacing 1 and magic
 * even), so equal results are the rule's rounding of v m + bf, exactly. With m a float32 (mlo =
 * mhi) an exact tie gives both FMAs the same value, rounded to even by both; otherwise the bracket
 * is |v| ulp(m) wide and a value that close to a half is left to the exact path. */
static inline __attribute__((always_inline)) void rr_t2(__m512 f, __m512 mlo, __m512 mhi, __m512 bf, __m512 magic,
                                                       __m512 *rlo, __m512 *rhi) {
  const __mmask16 neg = _mm512_movepi32_mask(_mm512_castps_si512(f)); /* v < 0 (an int's float: never -0) */
  const __m512 mdn = _mm512_mask_blend_ps(neg, mlo, mhi), mup = _mm512_mask_blend_ps(neg, mhi, mlo);
  *rlo = _mm512_add_ps(_mm512_fmadd_round_ps(f, mdn, bf, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), magic);
  *rhi = _mm512_add_ps(_mm512_fmadd_round_ps(f, mup, bf, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), magic);
}

typedef struct rr {
  __m512 magic, mlo, mhi, bf, flo, fhi; /* mlo, mhi, bf: the row's (rr_row_fields); flo, fhi: magic + lo - zp, magic + hi - zp */
  __m512i off, big, big2, vc;
  __m512i lo8, hi8; /* lo, hi in every byte: rr16_qd's clamp on the packed bytes */
  __m128i zp8;
} rr_t;

/* 16 outputs of the float path; *bad: the lanes (within k) it could not settle. `chk`: test
 * |v| < 2^23 (not needed when the row's bound says so). `full` ([lo, hi] is all of int8): the
 * saturating narrowing of q = r + zp is the clamp; else the clamp is on t = magic + r in float
 * (its bounds magic + lo - zp, magic + hi - zp are exact), whose bits' low byte is then r's, and
 * the zero point is added to the bytes (r + zp in [lo, hi]: no wrap). */
static inline __attribute__((always_inline)) __m128i rr16(const rr_t *p, __m512i av, __mmask16 k, int full, int chk,
                                                          __mmask16 *bad) {
  const __m512i v = _mm512_add_epi32(av, p->vc);
  __m512 tlo, thi;
  rr_t2(_mm512_cvtepi32_ps(v), p->mlo, p->mhi, p->bf, p->magic, &tlo, &thi);
  *bad = _mm512_mask_cmp_ps_mask(k, tlo, thi, _CMP_NEQ_UQ);
  if (chk) *bad |= _mm512_mask_cmp_epu32_mask(k, _mm512_add_epi32(v, p->big), p->big2, _MM_CMPINT_NLT);
  if (full) return _mm512_cvtsepi32_epi8(_mm512_sub_epi32(_mm512_castps_si512(tlo), p->off));
  const __m512 tc = _mm512_min_ps(_mm512_max_ps(tlo, p->flo), p->fhi);
  return _mm_add_epi8(_mm512_cvtepi32_epi8(_mm512_castps_si512(tc)), p->zp8);
}

/* rr16 on 16 full lanes without the narrowing: the int32 q = r + zp, in [lo, hi] (not `full`: the
 * clamp on t as in rr16, then bits(t) - (bits(magic) - zp)) or to be saturated to int8 by the
 * caller's narrowing (`full`: that saturation is the clamp, as rr16's vpmovsdb); the caller packs
 * four such vectors with two vpackssdw and one vpacksswb (saturating each time: the same bytes). */
static inline __attribute__((always_inline)) __m512i rr16_q(const rr_t *p, __m512i av, int full, int chk,
                                                            __mmask16 *bad) {
  const __m512i v = _mm512_add_epi32(av, p->vc);
  __m512 tlo, thi;
  rr_t2(_mm512_cvtepi32_ps(v), p->mlo, p->mhi, p->bf, p->magic, &tlo, &thi);
  *bad = _mm512_cmp_ps_mask(tlo, thi, _CMP_NEQ_UQ);
  if (chk) *bad |= _mm512_cmp_epu32_mask(_mm512_add_epi32(v, p->big), p->big2, _MM_CMPINT_NLT);
  if (full) return _mm512_sub_epi32(_mm512_castps_si512(tlo), p->off);
  return _mm512_sub_epi32(_mm512_castps_si512(_mm512_min_ps(_mm512_max_ps(tlo, p->flo), p->fhi)), p->off);
}

/* rr16_q's `full` result without the mask per vector, for four vectors at a time: the int32
 * q = r + zp, unclamped (the caller's saturating packs to bytes clamp it to int8, as for `full`;
 * a clamp [lo, hi] inside int8 then follows on the packed bytes, vpmaxsb / vpminsb with lo8, hi8:
 * clamp(sat8(q)) = clamp(q), two instructions per 64 outputs instead of rr16_q's two per 16).
 * The lanes rr16_q would flag leave bits set in *d (tlo ^ thi OR-ed in, one vpternlogd: tlo and thi are finite floats, never -0.0
 * (an exact zero fma result is +0.0 under round to nearest), so their bits are equal exactly when
 * they compare equal) or, with `chk`, in *kb (the sums of 2^23 or more). One vptestmd per 64
 * outputs then replaces four compares into masks and their merging; a caller that finds a flag
 * redoes rr16_q on the four vectors to learn which ones. */
static inline __attribute__((always_inline)) __m512i rr16_qd(const rr_t *p, __m512i av, int chk, __m512i *d,
                                                             __mmask16 *kb) {
  const __m512i v = _mm512_add_epi32(av, p->vc);
  __m512 tlo, thi;
  rr_t2(_mm512_cvtepi32_ps(v), p->mlo, p->mhi, p->bf, p->magic, &tlo, &thi);
  *d = _mm512_ternarylogic_epi32(*d, _mm512_castps_si512(tlo), _mm512_castps_si512(thi), 0xf6); /* d | (lo ^ hi) */
  if (chk) *kb |= _mm512_cmp_epu32_mask(_mm512_add_epi32(v, p->big), p->big2, _MM_CMPINT_NLT);
  return _mm512_sub_epi32(_mm512_castps_si512(tlo), p->off);
}

/* rr16_qd's packed bytes clamped to [lo, hi] (nothing to do when that is all of int8) */
static inline __attribute__((always_inline)) __m512i rr_clamp8(const rr_t *p, __m512i b, int full) {
  return full ? b : _mm512_min_epi8(_mm512_max_epi8(b, p->lo8), p->hi8);
}

/* the row-independent fields for output zero point zp and clamp [lo, hi] */
static inline void rr_init(rr_t *p, int32_t zp, int32_t lo, int32_t hi) {
  p->magic = _mm512_set1_ps(Q8_MAGIC);
  p->flo = _mm512_set1_ps(Q8_MAGIC + (float)(lo - zp)), p->fhi = _mm512_set1_ps(Q8_MAGIC + (float)(hi - zp));
  p->zp8 = _mm_set1_epi8((char)zp);
  p->lo8 = _mm512_set1_epi8((char)lo), p->hi8 = _mm512_set1_epi8((char)hi);
  p->off = _mm512_set1_epi32(Q8_MAGIC_BITS - zp);
  p->big = _mm512_set1_epi32(Q8_FLT_MAX_SUM), p->big2 = _mm512_set1_epi32(2 * Q8_FLT_MAX_SUM);
  p->mlo = p->mhi = p->bf = _mm512_setzero_ps(), p->vc = _mm512_setzero_si512();
}

#endif /* OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H */
