/* The float path of the AVX-512 requantization (its proof: arch/x86/avx512/quant.c, above rqs_t),
 * shared by quant.c (requant_rows) and quant_vnni.c (the depthwise row kernel, which finishes its
 * sums in registers): a row's multiplier and bias as float32 (rr_rows_fields), the value
 * v mult / 2^shift + badd / 2^shift bracketed by two FMAs rounded down and up and each rounded
 * to an integer (rr_t2), and 16 outputs at a time with the lanes it could not settle (those take the exact
 * path, oa_q8_avx512_requant). Included only by AVX-512 files. */
#ifndef OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H
#define OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define Q8_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define Q8_MAGIC_BITS 0x4b400000
#define Q8_FLT_MAX_SUM (1 << 23)

/* |x| beyond which every output is clamped: r + zp with |zp| <= 128 leaves int8 once |r| > 256 */
#define Q8_RR_RANGE 512.0

/* The float path fields of the m rows of a block (m <= 32; eight rows a vector of doubles), row r
 * with mult[pc ? r : 0], shift[pc ? r : 0], badd[r] and sums |v| <= vmax = min(|corr[r]| + amax,
 * 2^23): m = mult / 2^shift rounded to a float32
 * (exact for multipliers of at most 24 significant bits) and blo <= b - e, bhi >= b + e as
 * float32, where b = badd / 2^shift is the bias in output steps and e = w |mult / 2^shift - m|
 * the most the rounded m moves v m for |v| <= w: the rule's value x = v mult / 2^shift + b then
 * lies in [v m + blo, v m + bhi]. w is vmax, or less: a lane with |v| > (Q8_RR_RANGE + |b|) / m
 * has |v m + b| > Q8_RR_RANGE, and the rounded m moves v m by at most |v| 2^-24 m, less than 1/2
 * (m <= 1, |v| < 2^23), so that lane is clamped either way: its bracket need not hold. So a
 * 31-bit multiplier costs a bracket of about (512 + |b|) 2^-24 steps, no instruction per vector.
 * With m exact and b a float32, blo = bhi = b (an exact tie then gives both FMAs the same value).
 * Returns the rows the float path takes (bit r): m <= 1, |b| < 2^12, e < 2^-6 and |corr| < 2^30;
 * the others take the exact path. One computation for every caller (one row: m = 1). */
static inline uint32_t rr_rows_fields(int32_t m, const int32_t *mult, const int8_t *shift, const int64_t *badd,
                                      int32_t pc, const int64_t *corr, int64_t amax, float *mf, float *blo,
                                      float *bhi) {
  uint32_t okm = 0;
  const __m512i one023 = _mm512_set1_epi64(1023), c30 = _mm512_set1_epi64((int64_t)1 << 30);
  const __m512d zero = _mm512_setzero_pd();
  for (int32_t r0 = 0; r0 < m; r0 += 8) {
    const __mmask8 k = m - r0 >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (m - r0)) - 1u);
    const __m512i mu = pc ? _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, mult + r0)) : _mm512_set1_epi64(mult[0]);
    const __m512i sh = pc ? _mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8((__mmask16)k, shift + r0))
                          : _mm512_set1_epi64(shift[0]);
    const __m512d p2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_sub_epi64(one023, sh), 52)); /* 2^-shift */
    const __m512d me = _mm512_mul_pd(_mm512_cvtepi64_pd(mu), p2); /* exact */
    const __m256 mf8 = _mm512_cvtpd_ps(me);
    const __m512d mfd = _mm512_cvtps_pd(mf8);
    const __m512d dm = _mm512_abs_pd(_mm512_sub_pd(me, mfd));
    const __m512i ba = _mm512_maskz_loadu_epi64(k, badd + r0);
    const __mmask8 small = _mm512_cmplt_epi64_mask(_mm512_abs_epi64(ba), _mm512_set1_epi64((int64_t)1 << 52));
    const __m512d b = _mm512_mul_pd(_mm512_cvtepi64_pd(ba), p2), ab = _mm512_abs_pd(b);
    /* 2^(1 - floor(log2 mf)) >= 1 / m; mf = 0: getexp -inf, the bound +inf, w = vmax below */
    const __m512d inv = _mm512_scalef_pd(_mm512_set1_pd(2.0), _mm512_sub_pd(zero, _mm512_getexp_pd(mfd)));
    const __m512d need = _mm512_add_pd(_mm512_mul_pd(_mm512_add_pd(_mm512_set1_pd(Q8_RR_RANGE), ab), inv),
                                       _mm512_set1_pd(1.0));
    const __m512i ac = _mm512_abs_epi64(_mm512_maskz_loadu_epi64(k, corr + r0));
    const __m512i vm = _mm512_min_epi64(_mm512_add_epi64(ac, _mm512_set1_epi64(amax)), _mm512_set1_epi64(Q8_FLT_MAX_SUM));
    const __m512d e = _mm512_mul_pd(_mm512_min_pd(_mm512_cvtepi64_pd(vm), need), dm);
    const __m512d E = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(e, e), _mm512_mul_pd(ab, _mm512_set1_pd(0x1p-21))),
                                    _mm512_set1_pd(0x1p-60));
    const __m256 bf = _mm512_cvtpd_ps(b);
    const __mmask8 exact = _mm512_cmp_pd_mask(e, zero, _CMP_EQ_OQ) & _mm512_cmp_pd_mask(_mm512_cvtps_pd(bf), b, _CMP_EQ_OQ);
    const __m256 lo = _mm256_mask_blend_ps(exact, _mm512_cvtpd_ps(_mm512_sub_pd(b, E)), bf);
    const __m256 hi = _mm256_mask_blend_ps(exact, _mm512_cvtpd_ps(_mm512_add_pd(b, E)), bf);
    const __mmask8 ok = k & small & _mm512_cmp_pd_mask(mfd, _mm512_set1_pd(1.0), _CMP_LE_OQ) &
                        _mm512_cmp_pd_mask(ab, _mm512_set1_pd(4096.0), _CMP_LT_OQ) &
                        _mm512_cmp_pd_mask(e, _mm512_set1_pd(0.015625), _CMP_LT_OQ) & _mm512_cmplt_epi64_mask(ac, c30);
    _mm256_mask_storeu_ps(mf + r0, k, mf8), _mm256_mask_storeu_ps(blo + r0, k, lo), _mm256_mask_storeu_ps(bhi + r0, k, hi);
    okm |= (uint32_t)ok << r0;
  }
  return okm;
}

/* magic + the rounding of v m + blo down (*rlo) and of v m + bhi up (*rhi), each to an integer
 * half to even: the rule's value x lies between the two FMA results (rr_rows_fields), and t ->
 * RN(t + magic) is monotonic (magic + round_half_even(t) for |t| < 2^22, spacing 1 and magic
 * even), so equal results are the rule's rounding of x, exactly. */
static inline __attribute__((always_inline)) void rr_t2(__m512 f, __m512 m, __m512 blo, __m512 bhi, __m512 magic,
                                                       __m512 *rlo, __m512 *rhi) {
  *rlo = _mm512_add_ps(_mm512_fmadd_round_ps(f, m, blo, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), magic);
  *rhi = _mm512_add_ps(_mm512_fmadd_round_ps(f, m, bhi, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), magic);
}

typedef struct rr {
  __m512 magic, m, blo, bhi, flo, fhi; /* m, blo, bhi: the row's (rr_rows_fields); flo, fhi: magic + lo - zp, magic + hi - zp */
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
  rr_t2(_mm512_cvtepi32_ps(v), p->m, p->blo, p->bhi, p->magic, &tlo, &thi);
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
  rr_t2(_mm512_cvtepi32_ps(v), p->m, p->blo, p->bhi, p->magic, &tlo, &thi);
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
  rr_t2(_mm512_cvtepi32_ps(v), p->m, p->blo, p->bhi, p->magic, &tlo, &thi);
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
  p->m = p->blo = p->bhi = _mm512_setzero_ps(), p->vc = _mm512_setzero_si512();
}

#endif /* OA_KERNELS_ARCH_X86_AVX512_QUANT_RR_H */
