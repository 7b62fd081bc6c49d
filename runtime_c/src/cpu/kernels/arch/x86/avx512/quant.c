/* AVX-512 int8 micro-kernels (opt/quant.h) for CPUs without VNNI (Skylake-SP), and the parts the
 * VNNI table (quant_vnni.c) shares: the requantization on 16 lanes, the depthwise rows and the
 * weight row sums.
 *   GEMM: 8 x 32 tile on int16 pairs of consecutive k (kg 2), vpmaddwd + vpaddd (exact: two
 *         products of at most 2^14), 16 zmm accumulators, 2 B vectors, one broadcast of an A pair
 *         per row; A and B packed by the AVX2 int16-pair packers (avx2/quant.c).
 *   requant: the rule of quant_rule.h on 8 int64 lanes (twice per 16 outputs), the last partial
 *         vector masked (no scalar tail: depthwise rows of 7 or 14 outputs are common).
 * Compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma; only called when env->isas has
 * OA_CPU_ISA_AVX512. */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/opt/quant.h"
#include "kernels/arch/x86/avx512/quant_rr.h"

#define MR 8

static inline __m512i bcast_pair(const int16_t *a) {
  int32_t v;
  memcpy(&v, a, sizeof v);
  return _mm512_set1_epi32(v);
}

#define Q8_MADD(acc, x, b) acc = _mm512_add_epi32(acc, _mm512_madd_epi16(x, b))

/* A [kp/2][8][2], B [kp/2][32][2] int16 */
static inline void store_row(int32_t *c, __m512i v0, __m512i v1) {
  _mm512_storeu_si512((void *)c, v0), _mm512_storeu_si512((void *)(c + 16), v1);
}

static void q8_avx512_gemm_8x32(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int16_t *a = (const int16_t *)a_, *b = (const int16_t *)b_;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  __m512i c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  for (int64_t q = 0; q < kp; q += 2, a += 2 * MR, b += 64) {
    const __m512i b0 = _mm512_loadu_si512((const void *)b), b1 = _mm512_loadu_si512((const void *)(b + 32));
    __m512i x = bcast_pair(a);
    Q8_MADD(c00, x, b0), Q8_MADD(c01, x, b1);
    x = bcast_pair(a + 2), Q8_MADD(c10, x, b0), Q8_MADD(c11, x, b1);
    x = bcast_pair(a + 4), Q8_MADD(c20, x, b0), Q8_MADD(c21, x, b1);
    x = bcast_pair(a + 6), Q8_MADD(c30, x, b0), Q8_MADD(c31, x, b1);
    x = bcast_pair(a + 8), Q8_MADD(c40, x, b0), Q8_MADD(c41, x, b1);
    x = bcast_pair(a + 10), Q8_MADD(c50, x, b0), Q8_MADD(c51, x, b1);
    x = bcast_pair(a + 12), Q8_MADD(c60, x, b0), Q8_MADD(c61, x, b1);
    x = bcast_pair(a + 14), Q8_MADD(c70, x, b0), Q8_MADD(c71, x, b1);
  }
  store_row(c, c00, c01), store_row(c + ldc, c10, c11), store_row(c + 2 * ldc, c20, c21);
  store_row(c + 3 * ldc, c30, c31), store_row(c + 4 * ldc, c40, c41), store_row(c + 5 * ldc, c50, c51);
  store_row(c + 6 * ldc, c60, c61), store_row(c + 7 * ldc, c70, c71);
}

/* ---- requantization --------------------------------------------------------------------------- */

/* The rule of quant_rule.h on 16 outputs. Fast path (corr fits int32): v = acc + corr in int32
 * lanes (a wrapped sum is detected, (acc ^ v) & (corr ^ v) < 0, and that vector takes the exact
 * path below), the products v * mult as int64 on the even and the odd lanes (vpmuldq), the
 * rounding on the signed product: for n >= 1, round_half_even(p / 2^n) =
 * (p + 2^(n-1) - 1 + ((p >> n) & 1)) >> n with arithmetic shifts (floor(p / 2^n) = p >> n; the
 * tie goes up exactly when that quotient is odd, which is ties-to-even on either sign), then the
 * clamp to [lo - zp, hi - zp] in int64, the zero point and the narrowing in int32. Exact path:
 * the same on int64 lanes with sat_int32 first. */
typedef struct rq {
  __m512i corr64, corr32, mult, badd, i32lo, i32hi, rlo, rhi, zp64, zp32, half, one, n; /* badd: the bias's addend */
  int32_t shift, fast;
} rq_t;

static inline __m512i rq_round(const rq_t *r, __m512i p) {
  if (!r->shift) return p;
  const __m512i odd = _mm512_and_si512(_mm512_srav_epi64(p, r->n), r->one);
  return _mm512_srav_epi64(_mm512_add_epi64(_mm512_add_epi64(p, r->half), odd), r->n);
}

/* 8 outputs on int64 lanes, with sat_int32 (any corr) */
static inline __m128i rq8_exact(const rq_t *r, __m256i acc) {
  __m512i v = _mm512_add_epi64(_mm512_cvtepi32_epi64(acc), r->corr64);
  v = _mm512_min_epi64(_mm512_max_epi64(v, r->i32lo), r->i32hi);
  __m512i p = rq_round(r, _mm512_add_epi64(_mm512_mul_epi32(v, r->mult), r->badd)); /* exact: |p| < 2^63 */
  p = _mm512_min_epi64(_mm512_max_epi64(p, r->rlo), r->rhi);
  return _mm512_cvtepi64_epi8(_mm512_add_epi64(p, r->zp64)); /* in [-128, 127] */
}

static inline __m128i rq16(const rq_t *r, __m512i acc) {
  if (r->fast) {
    const __m512i v = _mm512_add_epi32(acc, r->corr32);
    /* sign of (acc ^ v) & (corr ^ v): the int32 sum wrapped */
    const __mmask16 wrapped = _mm512_movepi32_mask(_mm512_ternarylogic_epi32(acc, v, r->corr32, 0x24));
    if (!wrapped) {
      __m512i pe = rq_round(r, _mm512_add_epi64(_mm512_mul_epi32(v, r->mult), r->badd));
      __m512i po = rq_round(r, _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), r->mult), r->badd));
      pe = _mm512_min_epi64(_mm512_max_epi64(pe, r->rlo), r->rhi);
      po = _mm512_min_epi64(_mm512_max_epi64(po, r->rlo), r->rhi);
      const __m512i q = _mm512_mask_blend_epi32((__mmask16)0xaaaa, pe, _mm512_slli_epi64(po, 32));
      return _mm512_cvtepi32_epi8(_mm512_add_epi32(q, r->zp32));
    }
  }
  const __m128i lo8 = rq8_exact(r, _mm512_castsi512_si256(acc)), hi8 = rq8_exact(r, _mm512_extracti64x4_epi64(acc, 1));
  return _mm_unpacklo_epi64(lo8, hi8);
}

static void rq_init(rq_t *r, int64_t corr, int32_t mult, int32_t shift, int64_t badd, int32_t zp, int32_t lo,
                    int32_t hi) {
  r->corr64 = _mm512_set1_epi64(corr);
  r->fast = corr >= INT32_MIN && corr <= INT32_MAX;
  r->corr32 = _mm512_set1_epi32(r->fast ? (int32_t)corr : 0);
  r->mult = _mm512_set1_epi64(mult);
  r->badd = _mm512_set1_epi64(badd);
  r->i32lo = _mm512_set1_epi64(INT32_MIN), r->i32hi = _mm512_set1_epi64(INT32_MAX);
  r->rlo = _mm512_set1_epi64((int64_t)lo - zp), r->rhi = _mm512_set1_epi64((int64_t)hi - zp);
  r->zp64 = _mm512_set1_epi64(zp), r->zp32 = _mm512_set1_epi32(zp);
  r->one = _mm512_set1_epi64(1);
  r->shift = shift;
  r->n = _mm512_set1_epi64(shift);
  r->half = _mm512_set1_epi64(shift ? ((int64_t)1 << (shift - 1)) - 1 : 0);
}


/* Per-channel values, 8 outputs per vector: the exact path with per-lane multiplier and shift
 * (half 2^(n-1) - 1 and the parity bit per lane; shift 0 lanes keep the product) */
void oa_q8_avx512_requant_pc(const int32_t *acc, int64_t n, const int64_t *corr, const int32_t *mult,
                             const int8_t *shift, const int64_t *badd, int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  const __m512i i32lo = _mm512_set1_epi64(INT32_MIN), i32hi = _mm512_set1_epi64(INT32_MAX), one = _mm512_set1_epi64(1);
  const __m512i rlo = _mm512_set1_epi64((int64_t)lo - zp), rhi = _mm512_set1_epi64((int64_t)hi - zp);
  const __m512i vzp = _mm512_set1_epi64(zp), zero = _mm512_setzero_si512();
  for (int64_t j = 0; j < n; j += 8) {
    const __mmask8 k = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1u);
    __m512i v = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, acc + j)),
                                 _mm512_maskz_loadu_epi64(k, corr + j));
    v = _mm512_min_epi64(_mm512_max_epi64(v, i32lo), i32hi);
    const __m512i m = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, mult + j));
    const __m512i sh = _mm512_cvtepi8_epi64(_mm_maskz_loadu_epi8((__mmask16)k, shift + j));
    const __m512i ba = _mm512_maskz_loadu_epi64(k, badd + j);
    __m512i p = _mm512_add_epi64(_mm512_mul_epi32(v, m), ba);
    const __mmask8 rnd = _mm512_cmpneq_epi64_mask(sh, zero);
    const __m512i half = _mm512_sub_epi64(_mm512_sllv_epi64(one, _mm512_sub_epi64(sh, one)), one);
    const __m512i odd = _mm512_and_si512(_mm512_srav_epi64(p, sh), one);
    p = _mm512_mask_srav_epi64(p, rnd, _mm512_add_epi64(_mm512_add_epi64(p, half), odd), sh);
    p = _mm512_min_epi64(_mm512_max_epi64(p, rlo), rhi);
    _mm_mask_storeu_epi8(y + j, k, _mm512_cvtepi64_epi8(_mm512_add_epi64(p, vzp)));
  }
}

/* The float path of the requantization (docs/quantization.md), for real multipliers
 * m = mult / 2^shift <= 1, biases b = badd / 2^shift below 2^12 steps and sums |v| < 2^23 (v = acc
 * + corr, an integer, exact in float32). rr_rows_fields (quant_rr.h) rounds m to a float32 mf and
 * widens b into blo <= b - e, bhi >= b + e, e covering what mf moves v m wherever the output is
 * not clamped anyway, so the rule's value x = v m + b lies in [v mf + blo, v mf + bhi]; fma(v, mf,
 * blo) rounded down and fma(v, mf, bhi) rounded up bracket it, and each plus magic = 1.5 * 2^23
 * (rounded to nearest) is magic + round_half_even of it (for |t| < 2^22 the spacing there is 1 and
 * magic is even). Rounding is monotonic: when the two sums are equal they are magic + the rule's
 * rounding of x, exactly (lanes that differ, x within the bracket of a half, take the exact integer
 * path; with a 24-bit multiplier and a float32 b, blo = bhi = b and an exact tie gives both FMAs
 * the same value, rounded to even by both). bits(t) - (bits(magic) - zp) is then the result plus
 * the zero point. |x| in [2^22, 2^23 + 2^12) (clamped by the rule either way) keeps t in (2^22 -
 * 2^12, 2.5 * 2^23 + 2^12), a positive float whose bits are ordered as t: the result is at or past
 * the clamp bound of its sign, as the rule's. Larger multipliers take the exact path (m > 3 with
 * |v| < 2^22 could make t negative, whose bits do not order as t). */

typedef struct rqs {
  __m512 m, blo, bhi, magic;
  __m512i off, lo, hi; /* bits(magic) - zp; act_min, act_max */
  int32_t ok;          /* the float path applies (rr_rows_fields) */
} rqs_t;


/* |v| <= |corr| + amax (amax Q8_FLT_MAX_SUM with corr 0: the path checks |v| < 2^23 itself) */
static void rqs_init(rqs_t *s, int32_t mult, int32_t shift, int64_t badd, int64_t corr, int64_t amax, int32_t zp,
                     int32_t lo, int32_t hi) {
  float m, blo, bhi;
  const int8_t sh8 = (int8_t)shift;
  s->ok = (int32_t)(rr_rows_fields(1, &mult, &sh8, &badd, 1, &corr, amax, &m, &blo, &bhi) & 1u);
  s->m = _mm512_set1_ps(m), s->blo = _mm512_set1_ps(blo), s->bhi = _mm512_set1_ps(bhi);
  s->magic = _mm512_set1_ps(Q8_MAGIC);
  s->off = _mm512_set1_epi32(Q8_MAGIC_BITS - zp);
  s->lo = _mm512_set1_epi32(lo), s->hi = _mm512_set1_epi32(hi);
}

/* 16 outputs from v (integers as floats, |v| < 2^23); 0 when a lane's rounding is not certain */
static inline int rqs16(const rqs_t *s, __m512 v, __m128i *out) {
  __m512 tlo, thi;
  rr_t2(v, s->m, s->blo, s->bhi, s->magic, &tlo, &thi);
  if (_mm512_cmp_ps_mask(tlo, thi, _CMP_NEQ_UQ)) return 0;
  const __m512i q = _mm512_sub_epi32(_mm512_castps_si512(tlo), s->off);
  *out = _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, s->lo), s->hi));
  return 1;
}

/* lanes of int32 sums with |v| >= 2^23 */
static inline __mmask16 rqs_big_i32(__m512i v) {
  return _mm512_cmp_epu32_mask(_mm512_add_epi32(v, _mm512_set1_epi32(Q8_FLT_MAX_SUM)),
                               _mm512_set1_epi32(2 * Q8_FLT_MAX_SUM), _MM_CMPINT_NLT);
}
static inline __mmask16 rqs_big_f32(__m512 v) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps((float)Q8_FLT_MAX_SUM), _CMP_NLT_UQ);
}

/* The requantization: the float path per vector where it applies (|corr| < 2^30: then a wrapped
 * int32 sum acc + corr is at least 2^31 - 2^30 in magnitude and fails the 2^23 check), else rq16 */
void oa_q8_avx512_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                          int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rq_t r;
  rq_init(&r, corr, mult, shift, badd, zp, lo, hi);
  rqs_t s;
  rqs_init(&s, mult, shift, badd, 0, Q8_FLT_MAX_SUM, zp, lo, hi);
  const int flt = s.ok && corr > -((int64_t)1 << 30) && corr < ((int64_t)1 << 30);
  const __m512i vc = _mm512_set1_epi32(flt ? (int32_t)corr : 0);
  int64_t j = 0;
  if (flt)
    for (; j + 16 <= n; j += 16) {
      const __m512i a = _mm512_loadu_si512((const void *)(acc + j)), v = _mm512_add_epi32(a, vc);
      __m128i b;
      if (rqs_big_i32(v) || !rqs16(&s, _mm512_cvtepi32_ps(v), &b)) b = rq16(&r, a);
      _mm_storeu_si128((__m128i *)(y + j), b);
    }
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
    const __m512i a = _mm512_maskz_loadu_epi32(k, acc + j), v = _mm512_add_epi32(a, vc);
    __m128i b;
    if (!flt || rqs_big_i32(v) || !rqs16(&s, _mm512_cvtepi32_ps(v), &b)) b = rq16(&r, a);
    _mm_mask_storeu_epi8(y + j, k, b);
  }
}

/* One vector of the rows kernel below that the float path could not settle: the exact path */
__attribute__((noinline)) static void rr_exact(const int32_t *a, int64_t n, int64_t corr, int32_t mult, int32_t shift,
                                               int64_t badd, int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rq_t r;
  rq_init(&r, corr, mult, shift, badd, zp, lo, hi);
  const __mmask16 k = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
  _mm_mask_storeu_epi8(y, k, rq16(&r, _mm512_maskz_loadu_epi32(k, a)));
}

#define Q8_RR_BAD 8

/* one row; returns the number of vectors the float path could not settle, their starts in badj
 * (the first Q8_RR_BAD) */
static inline __attribute__((always_inline)) int32_t rr_row(const rr_t *row, const int32_t *a, int64_t n, int full,
                                                            int chk, int8_t *y, int64_t *badj) {
  /* a local copy: the byte stores to y may alias *row for the compiler (char), which would reload
   * every field after each store; a local whose address does not escape stays in registers */
  const rr_t local = *row, *p = &local;
  int32_t nb = 0;
  int64_t j = 0;
  __mmask16 bad;
  /* 64 at a time: four vectors packed to bytes (rr16_q; byte 16 L + 4 m + i of the packs is
   * column 16 m + 4 L + i: one dword transpose), fewer narrowing instructions than four rr16 */
  const __m512i t44 = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (; j + 64 <= n; j += 64) {
    __m512i d = _mm512_setzero_si512();
    __mmask16 kb = 0;
    const __m512i q0 = rr16_qd(p, _mm512_loadu_si512((const void *)(a + j)), chk, &d, &kb);
    const __m512i q1 = rr16_qd(p, _mm512_loadu_si512((const void *)(a + j + 16)), chk, &d, &kb);
    const __m512i q2 = rr16_qd(p, _mm512_loadu_si512((const void *)(a + j + 32)), chk, &d, &kb);
    const __m512i q3 = rr16_qd(p, _mm512_loadu_si512((const void *)(a + j + 48)), chk, &d, &kb);
    const __m512i b = rr_clamp8(p, _mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3)), full);
    _mm512_storeu_si512((void *)(y + j), _mm512_permutexvar_epi32(t44, b));
    if (_mm512_test_epi32_mask(d, d) | kb) /* rare: which of the four vectors (rr16_q's masks) */
      for (int u = 0; u < 4; u++) {
        __mmask16 bu;
        (void)rr16_q(p, _mm512_loadu_si512((const void *)(a + j + 16 * u)), full, chk, &bu);
        if (bu) {
          if (nb < Q8_RR_BAD) badj[nb] = j + 16 * u;
          nb++;
        }
      }
  }
  for (; j + 16 <= n; j += 16) {
    const __m128i b = rr16(p, _mm512_loadu_si512((const void *)(a + j)), (__mmask16)0xffff, full, chk, &bad);
    _mm_storeu_si128((__m128i *)(y + j), b);
    if (bad) {
      if (nb < Q8_RR_BAD) badj[nb] = j;
      nb++;
    }
  }
  if (j < n) {
    const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
    _mm_mask_storeu_epi8(y + j, k, rr16(p, _mm512_maskz_loadu_epi32(k, a + j), k, full, chk, &bad));
    if (bad) {
      if (nb < Q8_RR_BAD) badj[nb] = j;
      nb++;
    }
  }
  return nb;
}

/* A block of m rows, acc[r * ldc + j] -> y[r * ldy + j] (j < n), row r with corr[r], badd[r] (the bias's addend) and
 * mult[pc ? r : 0], shift[pc ? r : 0], |acc| <= amax: the float path of oa_q8_avx512_requant with
 * its setup per row only (the row's float multiplier and bias), one branch per vector (an
 * uncertain rounding, or a sum past 2^23 where |corr| + amax does not rule it out: the vector is
 * redone by the exact path after the row, no call inside the loop), and fewer clamp instructions
 * (rr16). Rows the float path does not apply to: the one-row kernel. */
void oa_q8_avx512_requant_rows(const int32_t *acc, int64_t ldc, int32_t m, int64_t n, const int64_t *corr,
                               const int32_t *mult, const int8_t *shift, const int64_t *badd, int32_t pc, int64_t amax,
                               int32_t zp, int32_t lo, int32_t hi, int8_t *y, int64_t ldy) {
  const int full = lo == -128 && hi == 127;
  rr_t p;
  p.magic = _mm512_set1_ps(Q8_MAGIC);
  p.flo = _mm512_set1_ps(Q8_MAGIC + (float)(lo - zp)), p.fhi = _mm512_set1_ps(Q8_MAGIC + (float)(hi - zp));
  p.zp8 = _mm_set1_epi8((char)zp);
  p.lo8 = _mm512_set1_epi8((char)lo), p.hi8 = _mm512_set1_epi8((char)hi);
  p.off = _mm512_set1_epi32(Q8_MAGIC_BITS - zp);
  p.big = _mm512_set1_epi32(Q8_FLT_MAX_SUM), p.big2 = _mm512_set1_epi32(2 * Q8_FLT_MAX_SUM);
  p.m = p.blo = p.bhi = _mm512_setzero_ps(), p.vc = _mm512_setzero_si512();
  int64_t badj[Q8_RR_BAD];
  float fm[OA_Q8_MR_MAX], fblo[OA_Q8_MR_MAX], fbhi[OA_Q8_MR_MAX];
  const uint32_t okm = rr_rows_fields(m, mult, shift, badd, pc, corr, amax, fm, fblo, fbhi);
  for (int32_t r = 0; r < m; r++) {
    const int32_t mu = mult[pc ? r : 0], sh = shift[pc ? r : 0];
    const int64_t bi = badd[r];
    const int64_t c = corr[r];
    const int32_t *a = acc + r * ldc;
    int8_t *yr = y + r * ldy;
    if (!((okm >> r) & 1u)) {
      oa_q8_avx512_requant(a, n, c, mu, sh, bi, zp, lo, hi, yr);
      continue;
    }
    p.m = _mm512_set1_ps(fm[r]), p.blo = _mm512_set1_ps(fblo[r]), p.bhi = _mm512_set1_ps(fbhi[r]);
    p.vc = _mm512_set1_epi32((int32_t)c);
    const int chk = (c < 0 ? -c : c) + amax >= Q8_FLT_MAX_SUM;
    int32_t nb;
    if (full) nb = chk ? rr_row(&p, a, n, 1, 1, yr, badj) : rr_row(&p, a, n, 1, 0, yr, badj);
    else nb = chk ? rr_row(&p, a, n, 0, 1, yr, badj) : rr_row(&p, a, n, 0, 0, yr, badj);
    if (nb > Q8_RR_BAD)
      oa_q8_avx512_requant(a, n, c, mu, sh, bi, zp, lo, hi, yr);
    else
      for (int32_t u = 0; u < nb; u++) rr_exact(a + badj[u], n - badj[u], c, mu, sh, bi, zp, lo, hi, yr + badj[u]);
  }
}

/* The same from float sums (exact integers below 2^24): the float depthwise path */
void oa_q8_avx512_requant_f32(const float *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                              int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rq_t r;
  rq_init(&r, corr, mult, shift, badd, zp, lo, hi);
  rqs_t s;
  rqs_init(&s, mult, shift, badd, 0, Q8_FLT_MAX_SUM, zp, lo, hi);
  const int flt = s.ok && corr > -((int64_t)1 << 22) && corr < ((int64_t)1 << 22);
  /* exact, and acc + corr is exact below 2^24 (checked below 2^23) */
  const __m512 vc = _mm512_set1_ps(flt ? (float)corr : 0.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
    const __m512 a = _mm512_maskz_loadu_ps(k, acc + j), v = _mm512_add_ps(a, vc);
    __m128i b;
    if (!flt || rqs_big_f32(v) || !rqs16(&s, v, &b)) b = rq16(&r, _mm512_cvttps_epi32(a));
    _mm_mask_storeu_epi8(y + j, k, b);
  }
}

/* d[j] = x[j] - zp as floats */
void oa_q8_avx512_to_float(const int8_t *x, int64_t n, int32_t zp, float *d) {
  const __m512i vz = _mm512_set1_epi32(zp);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
    const __m512i v = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, x + j)), vz);
    _mm512_mask_storeu_ps(d + j, k, _mm512_cvtepi32_ps(v));
  }
}

/* ---- depthwise plane (oa_q8_dwp_t) ------------------------------------------------------------ */

/* phase row(s) of input row xr (w bytes): padded columns c + pw, c < w, go to phase (c + pw) % sw
 * at column (c + pw) / sw; stride 2 splits even and odd bytes (sign-extended int16 pairs) */
static void dwp_row(const oa_q8_dwp_t *p, const int8_t *xr, float *d0, float *d1) {
  const __m512i vz = _mm512_set1_epi32(p->zin);
  if (p->sw == 1) {
    oa_q8_avx512_to_float(xr, p->w, p->zin, d0 + p->pw);
    return;
  }
  /* both phases from 64 bytes at a time: input column c is padded column c + pw, phase
   * (c + pw) % 2, column (c + pw) / 2; pw even: the even bytes go to phase 0 at pw / 2 + c / 2,
   * the odd ones to phase 1 at the same column; pw odd: the even bytes to phase 1 at
   * (pw - 1) / 2 + c / 2, the odd ones to phase 0 one column further */
  int64_t done = 0;
  {
    float *const e0 = p->pw % 2 ? d1 + (p->pw - 1) / 2 : d0 + p->pw / 2;
    float *const o0 = p->pw % 2 ? d0 + (p->pw + 1) / 2 : d1 + p->pw / 2;
    for (; done + 64 <= p->w; done += 64) {
      const __m512i v = _mm512_loadu_si512((const void *)(xr + done));
      const __m256i ev = _mm512_cvtepi16_epi8(v), od = _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8));
      float *e = e0 + done / 2, *o = o0 + done / 2;
#define DWP_F(b) _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepi8_epi32(b), vz))
      _mm512_storeu_ps(e, DWP_F(_mm256_castsi256_si128(ev))), _mm512_storeu_ps(e + 16, DWP_F(_mm256_extracti128_si256(ev, 1)));
      _mm512_storeu_ps(o, DWP_F(_mm256_castsi256_si128(od))), _mm512_storeu_ps(o + 16, DWP_F(_mm256_extracti128_si256(od, 1)));
#undef DWP_F
    }
    if (done == p->w) return;
  }
  /* phase b gets input columns 2 x + b - pw for x in [x0, x1) (from column `done` on) */
  xr += done, d0 += done / 2, d1 += done / 2;
  const int64_t wr = p->w - done;
  for (int b = 0; b < 2; b++) {
    float *d = b ? d1 : d0;
    const int64_t x0 = (p->pw - b + 1) / 2, x1 = (wr + p->pw - b + 1) / 2;
    const int8_t *src = xr + 2 * x0 + b - p->pw;
    const int64_t n = x1 - x0, nb = 2 * n - 1; /* bytes read: src[0 .. 2 n - 2] */
    for (int64_t j = 0; j < n; j += 16) {
      const int64_t left = nb - 2 * j;
      const __mmask32 m = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1u);
      const __m512i w16 = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, src + 2 * j));
      const __m512i ev = _mm512_srai_epi32(_mm512_slli_epi32(w16, 16), 16); /* even bytes, sign-extended */
      const __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
      _mm512_mask_storeu_ps(d + x0 + j, k, _mm512_cvtepi32_ps(_mm512_sub_epi32(ev, vz)));
    }
  }
}

void oa_q8_avx512_dwp(const oa_q8_dwp_t *p) {
  const int64_t hw = p->hq * p->wq;
  float *work = p->work, *grid = work + p->grid_off;
  /* the input rows into the phase planes (the padding stays zero) */
  for (int64_t r = 0; r < p->h; r++) {
    const int64_t R = r + p->ph, a = R % p->sh, yq = R / p->sh;
    float *d0 = work + (a * p->sw) * hw + yq * p->wq;
    dwp_row(p, p->x + r * p->w, d0, d0 + hw);
  }
  /* the requantization (rq16, and rqs16 where it applies) */
  rq_t r;
  rq_init(&r, p->corr, p->mult, p->shift, p->badd, p->zp, p->lo, p->hi);
  rqs_t sm;
  rqs_init(&sm, p->mult, p->shift, p->badd, p->corr, (int64_t)p->taps * 255 * 128, p->zp, p->lo, p->hi);
  const int flt = sm.ok && p->corr > -((int64_t)1 << 22) && p->corr < ((int64_t)1 << 22);
  /* every |acc + corr| below 2^23 (|acc| <= taps * 255 * 128): no per-vector check */
  const int small = flt && (p->corr < 0 ? -p->corr : p->corr) + (int64_t)p->taps * 255 * 128 < Q8_FLT_MAX_SUM;
  const __m512 vc = _mm512_set1_ps(flt ? (float)p->corr : 0.0f);
  /* grid columns, 128 at a time: 8 independent sums per tap (FMA latency x throughput) */
  const int64_t ncols = (p->oh - 1) * p->wq + p->ow;
  int64_t o = 0;
  if (p->taps == 9) { /* 3x3: the taps and their offsets in registers */
    const float *s0 = work + p->poff[0], *s1 = work + p->poff[1], *s2 = work + p->poff[2];
    const float *s3 = work + p->poff[3], *s4 = work + p->poff[4], *s5 = work + p->poff[5];
    const float *s6 = work + p->poff[6], *s7 = work + p->poff[7], *s8 = work + p->poff[8];
    const __m512 w0 = _mm512_set1_ps(p->wf[0]), w1 = _mm512_set1_ps(p->wf[1]), w2 = _mm512_set1_ps(p->wf[2]);
    const __m512 w3 = _mm512_set1_ps(p->wf[3]), w4 = _mm512_set1_ps(p->wf[4]), w5 = _mm512_set1_ps(p->wf[5]);
    const __m512 w6 = _mm512_set1_ps(p->wf[6]), w7 = _mm512_set1_ps(p->wf[7]), w8 = _mm512_set1_ps(p->wf[8]);
#define DWP_T(w, s, acc) acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(s + o + d), acc)
#define DWP_SUM(a, dd)                                                                               \
  do {                                                                                               \
    const int64_t d = (dd);                                                                          \
    a = _mm512_mul_ps(w0, _mm512_loadu_ps(s0 + o + d));                                              \
    DWP_T(w1, s1, a), DWP_T(w2, s2, a), DWP_T(w3, s3, a), DWP_T(w4, s4, a);                          \
    DWP_T(w5, s5, a), DWP_T(w6, s6, a), DWP_T(w7, s7, a), DWP_T(w8, s8, a);                          \
  } while (0)
    for (; o < ncols; o += 64) {
      __m512 a0, a1, a2, a3;
      DWP_SUM(a0, 0);
      DWP_SUM(a1, 16);
      DWP_SUM(a2, 32);
      DWP_SUM(a3, 48);
      float *g = grid + o;
      _mm512_storeu_ps(g, a0), _mm512_storeu_ps(g + 16, a1), _mm512_storeu_ps(g + 32, a2), _mm512_storeu_ps(g + 48, a3);
    }
#undef DWP_T
#undef DWP_SUM
  }
  for (; o + 64 < ncols; o += 128) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int32_t t = 0; t < p->taps; t++) {
      const float *s = work + p->poff[t] + o;
      const __m512 wv = _mm512_set1_ps(p->wf[t]);
      a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s), a0);
      a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 16), a1);
      a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 32), a2);
      a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 48), a3);
      a4 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 64), a4);
      a5 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 80), a5);
      a6 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 96), a6);
      a7 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 112), a7);
    }
    float *g = grid + o;
    _mm512_storeu_ps(g, a0), _mm512_storeu_ps(g + 16, a1), _mm512_storeu_ps(g + 32, a2);
    _mm512_storeu_ps(g + 48, a3), _mm512_storeu_ps(g + 64, a4), _mm512_storeu_ps(g + 80, a5);
    _mm512_storeu_ps(g + 96, a6), _mm512_storeu_ps(g + 112, a7);
  }
  if (o < ncols) { /* the last 64 or fewer */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t t = 0; t < p->taps; t++) {
      const float *s = work + p->poff[t] + o;
      const __m512 wv = _mm512_set1_ps(p->wf[t]);
      a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s), a0);
      a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 16), a1);
      a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 32), a2);
      a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + 48), a3);
    }
    float *g = grid + o;
    _mm512_storeu_ps(g, a0), _mm512_storeu_ps(g + 16, a1), _mm512_storeu_ps(g + 32, a2), _mm512_storeu_ps(g + 48, a3);
  }
  /* requantize the ow real columns of each grid row */
  for (int64_t oy = 0; oy < p->oh; oy++) {
    const float *g = grid + oy * p->wq;
    int8_t *y = p->y + oy * p->ow;
    for (int64_t ox = 0; ox < p->ow; ox += 16) {
      const __mmask16 k = p->ow - ox >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (p->ow - ox)) - 1u);
      const __m512 a = _mm512_maskz_loadu_ps(k, g + ox), v = _mm512_add_ps(a, vc);
      __m128i b;
      if (!flt || (!small && rqs_big_f32(v)) || !rqs16(&sm, v, &b)) b = rq16(&r, _mm512_cvttps_epi32(a));
      _mm_mask_storeu_epi8(y + ox, k, b);
    }
  }
}

/* ---- depthwise on channel blocks (oa_q8_dwc_t) -------------------------------------------------- */

/* r[i] byte j -> r[j] byte i (16 x 16 bytes): unpacks of bytes, words, dwords, qwords */
static inline void tr16x16(__m128i r[16]) {
  __m128i t[16], u[16];
  for (int i = 0; i < 8; i++)
    t[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]), t[i + 8] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  /* t[i]: rows 2i, 2i+1 interleaved, columns 0-7 (i < 8) or 8-15 (t[i + 8]) */
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 4; i++) {
      const __m128i a = t[8 * h + 2 * i], b = t[8 * h + 2 * i + 1];
      u[8 * h + i] = _mm_unpacklo_epi16(a, b), u[8 * h + i + 4] = _mm_unpackhi_epi16(a, b);
    }
  /* u[8h + i]: rows 4i..4i+3, columns 8h + 0-3 (i < 4) or 8h + 4-7 (u[8h + 4 + i]) */
  for (int g = 0; g < 4; g++) { /* g: column group of 4 (8h + 4e: g = 2h + e) */
    const __m128i *v = u + 4 * g;
    const __m128i a0 = _mm_unpacklo_epi32(v[0], v[1]), a1 = _mm_unpackhi_epi32(v[0], v[1]);
    const __m128i b0 = _mm_unpacklo_epi32(v[2], v[3]), b1 = _mm_unpackhi_epi32(v[2], v[3]);
    /* a0: rows 0-7 of columns 4g, 4g+1; a1: of 4g+2, 4g+3; b: rows 8-15 */
    r[4 * g] = _mm_unpacklo_epi64(a0, b0), r[4 * g + 1] = _mm_unpackhi_epi64(a0, b0);
    r[4 * g + 2] = _mm_unpacklo_epi64(a1, b1), r[4 * g + 3] = _mm_unpackhi_epi64(a1, b1);
  }
}

/* One block of up to 16 channels: the planes into a pixel-major float buffer (lane = channel),
 * 16 channels per FMA with the taps' weights in registers, the float requantization with per-lane
 * multipliers (rqs16's argument lane by lane: bracketing floats per lane, every |v| < 2^23 checked
 * once per block from the bias and the tap count), lanes it cannot decide by the scalar rule. */
void oa_q8_avx512_dwc(const oa_q8_dwc_t *p) {
  enum { L = OA_Q8_DWC_LANES };
  const int64_t hp = p->h + 2 * p->ph, wp = p->w + 2 * p->pw, taps = p->kh * p->kw, npix = p->oh * p->ow;
  const int64_t plane = p->h * p->w;
  int64_t br, rows;
  oa_q8_dwc_band(hp, wp, p->kh, p->dh, p->sh, p->oh, &br, &rows);
  float *buf = p->work, *wf = buf + rows * wp * L;
  int8_t *obuf = (int8_t *)(void *)(wf + taps * L);
  const __mmask16 live = (__mmask16)((1u << p->nch) - 1u);
  const __m512i vz = _mm512_set1_epi32(p->zin);
  if (br == p->oh) {
    /* one band: padding rows and columns zero, the interior x - zin (every lane written: past
     * nch, 0), 16 pixels of the 16 planes at a time (the plane as one run: rows of 7 or 14
     * pixels), one 16 x 16 byte transpose, then one float vector per pixel */
    memset(buf, 0, (size_t)(p->ph * wp * L) * sizeof(float));
    memset(buf + (p->ph + p->h) * wp * L, 0, (size_t)(p->ph * wp * L) * sizeof(float));
    if (p->pw)
      for (int64_t r = p->ph; r < p->ph + p->h; r++) {
        memset(buf + r * wp * L, 0, (size_t)(p->pw * L) * sizeof(float));
        memset(buf + (r * wp + p->pw + p->w) * L, 0, (size_t)(p->pw * L) * sizeof(float));
      }
    int64_t row = 0, col = 0;
    for (int64_t i0 = 0; i0 < plane; i0 += 16) {
      const int64_t n = plane - i0 < 16 ? plane - i0 : 16;
      const __mmask16 m = (__mmask16)((1u << n) - 1u);
      __m128i r[16];
      for (int32_t c = 0; c < L; c++)
        r[c] = c < p->nch ? _mm_maskz_loadu_epi8(m, p->x + c * plane + i0) : _mm_setzero_si128();
      tr16x16(r);
      for (int64_t k = 0; k < n; k++) {
        const __m512i v = _mm512_maskz_sub_epi32(live, _mm512_cvtepi8_epi32(r[k]), vz);
        _mm512_storeu_ps(buf + ((row + p->ph) * wp + col + p->pw) * L, _mm512_cvtepi32_ps(v));
        if (++col == p->w) col = 0, row++;
      }
    }
  }
  memset(wf, 0, (size_t)(taps * L) * sizeof(float));
  for (int32_t c = 0; c < p->nch; c++)
    for (int64_t t = 0; t < taps; t++) wf[t * L + c] = (float)p->wt[c * taps + t];
  /* per-lane requantization constants */
  float mf[L], blo[L], bhi[L], cf[L];
  int8_t sh8[L];
  int ok = 1;
  for (int32_t c = 0; c < L; c++) { /* lanes past nch: mult 0, exact (0 * anything + 0) */
    const int64_t ac = p->corr[c] < 0 ? -p->corr[c] : p->corr[c];
    ok &= ac + taps * 255 * 128 < Q8_FLT_MAX_SUM; /* float sums exact, and corr too (below 2^23) */
    sh8[c] = (int8_t)p->shift[c];                 /* 0 or 12..62 */
    cf[c] = (float)p->corr[c];
  }
  ok = ok && rr_rows_fields(L, p->mult, sh8, p->badd, 1, p->corr, taps * 255 * 128, mf, blo, bhi) == 0xffffu;
  const __m512 vm = _mm512_loadu_ps(mf), vblo = _mm512_loadu_ps(blo), vbhi = _mm512_loadu_ps(bhi);
  const __m512 vc = _mm512_loadu_ps(cf);
  const __m512 magic = _mm512_set1_ps(Q8_MAGIC);
  const __m512i off = _mm512_set1_epi32(Q8_MAGIC_BITS - p->zp);
  const __m512i qlo = _mm512_set1_epi32(p->lo), qhi = _mm512_set1_epi32(p->hi);
  const int64_t ystep = p->sh * wp * L, xstep = p->sw * L, r1 = p->dh * wp * L, r2 = 2 * r1;
  const int t9 = taps == 9 && p->dw == 1;
  /* the 3x3 taps in registers (loaded once: obuf's stores could alias wf for the compiler) */
  const __m512 w0 = _mm512_loadu_ps(wf), w1 = _mm512_loadu_ps(wf + (t9 ? 1 : 0) * L);
  const __m512 w2 = _mm512_loadu_ps(wf + (t9 ? 2 : 0) * L), w3 = _mm512_loadu_ps(wf + (t9 ? 3 : 0) * L);
  const __m512 w4 = _mm512_loadu_ps(wf + (t9 ? 4 : 0) * L), w5 = _mm512_loadu_ps(wf + (t9 ? 5 : 0) * L);
  const __m512 w6 = _mm512_loadu_ps(wf + (t9 ? 6 : 0) * L), w7 = _mm512_loadu_ps(wf + (t9 ? 7 : 0) * L);
  const __m512 w8 = _mm512_loadu_ps(wf + (t9 ? 8 : 0) * L);
  for (int64_t oy0 = 0; oy0 < p->oh; oy0 += br) {
    const int64_t oy1 = oy0 + br < p->oh ? oy0 + br : p->oh;
    if (br < p->oh) { /* this band's padded rows oy0 sh .. (oy1 - 1) sh + (kh - 1) dh, row by row */
      for (int64_t k = 0; k < (oy1 - oy0 - 1) * p->sh + (p->kh - 1) * p->dh + 1; k++) {
        const int64_t R = oy0 * p->sh + k - p->ph; /* input row */
        float *d = buf + k * wp * L;
        if (R < 0 || R >= p->h) {
          memset(d, 0, (size_t)(wp * L) * sizeof(float));
          continue;
        }
        memset(d, 0, (size_t)(p->pw * L) * sizeof(float));
        memset(d + (p->pw + p->w) * L, 0, (size_t)(p->pw * L) * sizeof(float));
        for (int64_t q0 = 0; q0 < p->w; q0 += 16) {
          const int64_t n = p->w - q0 < 16 ? p->w - q0 : 16;
          const __mmask16 m = (__mmask16)((1u << n) - 1u);
          __m128i r[16];
          for (int32_t c = 0; c < L; c++)
            r[c] = c < p->nch ? _mm_maskz_loadu_epi8(m, p->x + c * plane + R * p->w + q0) : _mm_setzero_si128();
          tr16x16(r);
          for (int64_t j = 0; j < n; j++) {
            const __m512i v = _mm512_maskz_sub_epi32(live, _mm512_cvtepi8_epi32(r[j]), vz);
            _mm512_storeu_ps(d + (p->pw + q0 + j) * L, _mm512_cvtepi32_ps(v));
          }
        }
      }
    }
    for (int64_t oy = oy0; oy < oy1; oy++) {
      for (int64_t ox = 0; ox < p->ow; ox++) {
        const float *b = buf + (oy - oy0) * ystep + ox * xstep;
        __m512 a;
        if (t9) { /* 3x3, dilation 1 across: three partial sums per row */
          __m512 a0 = _mm512_mul_ps(w0, _mm512_loadu_ps(b));
          __m512 a1 = _mm512_mul_ps(w3, _mm512_loadu_ps(b + r1));
          __m512 a2 = _mm512_mul_ps(w6, _mm512_loadu_ps(b + r2));
          a0 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(b + L), a0);
          a1 = _mm512_fmadd_ps(w4, _mm512_loadu_ps(b + r1 + L), a1);
          a2 = _mm512_fmadd_ps(w7, _mm512_loadu_ps(b + r2 + L), a2);
          a0 = _mm512_fmadd_ps(w2, _mm512_loadu_ps(b + 2 * L), a0);
          a1 = _mm512_fmadd_ps(w5, _mm512_loadu_ps(b + r1 + 2 * L), a1);
          a2 = _mm512_fmadd_ps(w8, _mm512_loadu_ps(b + r2 + 2 * L), a2);
          a = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
        } else {
          a = _mm512_setzero_ps();
          for (int64_t i = 0, t = 0; i < p->kh; i++)
            for (int64_t j = 0; j < p->kw; j++, t++)
              a = _mm512_fmadd_ps(_mm512_loadu_ps(wf + t * L), _mm512_loadu_ps(b + (i * p->dh * wp + j * p->dw) * L),
                                  a);
        }
        int8_t *o = obuf + (oy * p->ow + ox) * L;
        if (ok) {
          const __m512 v = _mm512_add_ps(a, vc);
          __m512 tlo, thi;
          rr_t2(v, vm, vblo, vbhi, magic, &tlo, &thi);
          if (!_mm512_cmp_ps_mask(tlo, thi, _CMP_NEQ_UQ)) {
            const __m512i q = _mm512_sub_epi32(_mm512_castps_si512(tlo), off);
            const __m512i qc = _mm512_min_epi32(_mm512_max_epi32(q, qlo), qhi);
            _mm_storeu_si128((__m128i *)(void *)o, _mm512_cvtepi32_epi8(qc));
            continue;
          }
        }
        float s[L];
        _mm512_storeu_ps(s, a);
        for (int32_t c = 0; c < L; c++)
          o[c] = q8_requant(p->corr[c] + (int64_t)s[c], p->mult[c], p->shift[c], p->badd[c], p->zp, p->lo, p->hi);
      }
    }
  }
  /* 16 pixels at a time, transposed back: row c holds channel c's 16 pixels */
  for (int64_t i0 = 0; i0 < npix; i0 += 16) {
    const int64_t n = npix - i0 < 16 ? npix - i0 : 16;
    const __mmask16 m = (__mmask16)((1u << n) - 1u);
    __m128i r[16];
    for (int64_t k = 0; k < L; k++)
      r[k] = k < n ? _mm_loadu_si128((const __m128i *)(const void *)(obuf + (i0 + k) * L)) : _mm_setzero_si128();
    tr16x16(r);
    for (int32_t c = 0; c < p->nch; c++) _mm_mask_storeu_epi8(p->y + c * npix + i0, m, r[c]);
  }
}

/* ---- depthwise -------------------------------------------------------------------------------- */

/* Depthwise rows, 16 outputs per zmm: taps in pairs (j, j + 1) through vpmaddwd, as the AVX2
 * kernel (arch/x86/avx2/quant.c) with twice the lanes: stride 1 interleaves the two taps' values
 * (the lanes come out in the order of _mm512_unpack*, undone once at the end), stride 2 with
 * dilation 1 has them adjacent already. |w * (x - zp)| <= 128 * 255: each pair sum is exact. */
static inline __m512i dw_wpair(const int8_t *w, int64_t j, int64_t kw) {
  const int32_t lo = (uint16_t)(int16_t)w[j], hi = j + 1 < kw ? (uint16_t)(int16_t)w[j + 1] : 0;
  return _mm512_set1_epi32((int32_t)((uint32_t)lo | ((uint32_t)hi << 16)));
}

void oa_q8_avx512_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                     int64_t dh, int64_t dw, int64_t n, int32_t *acc) {
  if (sw > 2) {
    oa_q8_dw_generic(rows, ld, w, kh, kw, sw, dh, dw, n, acc);
    return;
  }
  /* stride 1: unpacklo/hi of two 32-value rows give, per 128-bit lane L, outputs 8L..8L+3 (lo) and
   * 8L+4..8L+7 (hi) of 16-value halves: the sums land in lane order (0-3, 8-11, 16-19, 24-27 | ...)
   * for 32 outputs in two vectors; here 16 outputs: x0, x1 = 16 values each (ymm), widened */
  const __m512i order = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);
  const int64_t n16 = n / 16 * 16;
  for (int64_t o = 0; o < n16; o += 16) {
    __m512i a = _mm512_setzero_si512();
    for (int64_t i = 0; i < kh; i++) {
      const int16_t *r = rows + i * dh * ld + o * sw;
      const int8_t *wr = w + i * kw;
      if (sw == 1) {
        for (int64_t j = 0; j < kw; j += 2) {
          const __m256i x0 = _mm256_loadu_si256((const __m256i *)(r + j * dw));
          const __m256i x1 = j + 1 < kw ? _mm256_loadu_si256((const __m256i *)(r + (j + 1) * dw)) : x0;
          /* [lo(lane0) outputs 0-3, lo(lane1) 8-11 | hi(lane0) 4-7, hi(lane1) 12-15] */
          const __m512i xv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(x0, x1)),
                                                _mm256_unpackhi_epi16(x0, x1), 1);
          a = _mm512_add_epi32(a, _mm512_madd_epi16(xv, dw_wpair(wr, j, kw)));
        }
      } else if (dw == 1) { /* stride 2: the pair's values are adjacent */
        for (int64_t j = 0; j < kw; j += 2) {
          const __m512i xv = _mm512_loadu_si512((const void *)(r + j));
          a = _mm512_add_epi32(a, _mm512_madd_epi16(xv, dw_wpair(wr, j, kw)));
        }
      } else {
        for (int64_t j = 0; j < kw; j++) {
          const __m512i xv = _mm512_loadu_si512((const void *)(r + j * dw));
          a = _mm512_add_epi32(a, _mm512_madd_epi16(xv, _mm512_set1_epi32((uint16_t)(int16_t)wr[j])));
        }
      }
    }
    /* stride 1: 128-bit blocks hold outputs 0-3, 8-11, 4-7, 12-15 */
    if (sw == 1) a = _mm512_permutexvar_epi64(order, a);
    _mm512_storeu_si512((void *)(acc + o), a);
  }
  if (n16 < n) oa_q8_dw_generic(rows + n16 * sw, ld, w, kh, kw, sw, dh, dw, n - n16, acc + n16);
}

/* ---- GEMV (int16 x - zp) ---------------------------------------------------------------------- */

static inline __m512i dot32(const int8_t *w, const int16_t *x) {
  const __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)w));
  return _mm512_madd_epi16(wv, _mm512_loadu_si512((const void *)x));
}

void oa_q8_avx512_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const int16_t *x = (const int16_t *)x_;
  const int64_t k32 = k / 32 * 32;
  for (int64_t i = 0; i < m; i++) {
    const int16_t *xr = x + i * k;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
      __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t q = 0; q < k32; q += 32) {
        s0 = _mm512_add_epi32(s0, dot32(w0 + q, xr + q));
        s1 = _mm512_add_epi32(s1, dot32(w1 + q, xr + q));
        s2 = _mm512_add_epi32(s2, dot32(w2 + q, xr + q));
        s3 = _mm512_add_epi32(s3, dot32(w3 + q, xr + q));
      }
      int32_t t0 = _mm512_reduce_add_epi32(s0), t1 = _mm512_reduce_add_epi32(s1);
      int32_t t2 = _mm512_reduce_add_epi32(s2), t3 = _mm512_reduce_add_epi32(s3);
      for (int64_t q = k32; q < k; q++) {
        t0 += (int32_t)w0[q] * xr[q], t1 += (int32_t)w1[q] * xr[q];
        t2 += (int32_t)w2[q] * xr[q], t3 += (int32_t)w3[q] * xr[q];
      }
      acc[i * n + j] = t0, acc[i * n + j + 1] = t1, acc[i * n + j + 2] = t2, acc[i * n + j + 3] = t3;
    }
    for (; j < n; j++) {
      const int8_t *wr = w + j * k;
      __m512i s = _mm512_setzero_si512();
      for (int64_t q = 0; q < k32; q += 32) s = _mm512_add_epi32(s, dot32(wr + q, xr + q));
      int32_t t = _mm512_reduce_add_epi32(s);
      for (int64_t q = k32; q < k; q++) t += (int32_t)wr[q] * xr[q];
      acc[i * n + j] = t;
    }
  }
}

/* ---- add_q8, quantize, dequantize ------------------------------------------------------------- */

/* add_q8 on 16 lanes: (a - za) * ma + (b - zb) * mb as int64 on the even and the odd int32 lanes
 * (|p| < 2^41), the signed rounding of rq_round, clamp, zero point */
void oa_q8_avx512_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y) {
  const __m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb);
  const __m512i ma = _mm512_set1_epi64(p->ma), mb = _mm512_set1_epi64(p->mb);
  const __m512i zo = _mm512_set1_epi32(p->zo);
  rq_t r;
  rq_init(&r, 0, 0, p->shift, 0, p->zo, p->lo, p->hi);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
    const __m512i av = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, a + i)), za);
    const __m512i bv = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, b + i)), zb);
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(av, ma), _mm512_mul_epi32(bv, mb));
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(av, 32), ma),
                                  _mm512_mul_epi32(_mm512_srli_epi64(bv, 32), mb));
    pe = _mm512_min_epi64(_mm512_max_epi64(rq_round(&r, pe), r.rlo), r.rhi);
    po = _mm512_min_epi64(_mm512_max_epi64(rq_round(&r, po), r.rlo), r.rhi);
    const __m512i q = _mm512_mask_blend_epi32((__mmask16)0xaaaa, pe, _mm512_slli_epi64(po, 32));
    _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(_mm512_add_epi32(q, zo)));
  }
}

/* quantize on 16 lanes, the operations of the reference kernel in the same order (vrndscaleps
 * rounds to nearest even as nearbyintf does in the default rounding mode) */
void oa_q8_avx512_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y) {
  const __m512 vinv = _mm512_set1_ps(inv), vzp = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo);
  const __m512 vhi = _mm512_set1_ps(hi), big = _mm512_set1_ps(1e9f), nbig = _mm512_set1_ps(-1e9f);
  uint8_t *yp = (uint8_t *)y;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512 r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, nbig), big);
    __m512 q = _mm512_mask_mov_ps(_mm512_add_ps(r, vzp), nan, vzp);
    q = _mm512_min_ps(_mm512_max_ps(q, vlo), vhi);
    _mm_mask_storeu_epi8(yp + i, m, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q)));
  }
}

void oa_q8_avx512_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y) {
  const __m512i vzp = _mm512_set1_epi32(zp);
  const __m512 vs = _mm512_set1_ps(scale);
  const uint8_t *xp = (const uint8_t *)x;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
    const __m128i b = _mm_maskz_loadu_epi8(m, xp + i);
    const __m512i q = u8 ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, vzp)), vs));
  }
}

/* ---- weight row sums -------------------------------------------------------------------------- */

/* sum of a row through vpsadbw on w ^ 0x80 (unsigned, 8 bytes per int64 lane): sum(w) =
 * sum(w ^ 0x80) - 128 * k; the last partial vector masked (masked-off bytes load 0 and count
 * as 0x80 after the xor, subtracted with the rest). */
void oa_q8_avx512_wsum(int64_t rows, int64_t k, const int8_t *w, int64_t *sums) {
  const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
  const int64_t k64 = k / 64 * 64;
  const __mmask64 tail = k > k64 ? (~(__mmask64)0) >> (64 - (k - k64)) : 0;
  for (int64_t c = 0; c < rows; c++) {
    const int8_t *wr = w + c * k;
    __m512i s = zero;
    for (int64_t q = 0; q < k64; q += 64)
      s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512((const void *)(wr + q)), flip), zero));
    if (tail)
      s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, wr + k64), flip), zero));
    sums[c] = _mm512_reduce_add_epi64(s) - 128 * (k64 + (tail ? 64 : 0));
  }
}

const oa_q8_isa_t oa_q8_avx512_isa = {.name = "avx512", .mr = MR, .nr = 32, .kg = 2, .wide = 1,
                                      .gemm = q8_avx512_gemm_8x32,
                                      .pack = oa_q8_avx2_pack_w2, .pack_a = oa_q8_avx2_pack_a_w2,
                                      .requant = oa_q8_avx512_requant,
                                      .requant_pc = oa_q8_avx512_requant_pc,
                                      .requant_rows = oa_q8_avx512_requant_rows,
                                      .requant_f32 = oa_q8_avx512_requant_f32, .to_float = oa_q8_avx512_to_float,
                                      .dwp = oa_q8_avx512_dwp, .dwc = oa_q8_avx512_dwc,
                                      .dw = oa_q8_avx512_dw,
                                      .gemv = oa_q8_avx512_gemv, .wsum = oa_q8_avx512_wsum, .add = oa_q8_avx512_add,
                                      .quantize = oa_q8_avx512_quantize, .dequantize = oa_q8_avx512_dequantize};
#else
typedef int oa_q8_avx512_unused_t; /* not an AVX-512 build of this file */
#endif
