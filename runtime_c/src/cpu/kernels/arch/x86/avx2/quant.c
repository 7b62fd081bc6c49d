/* AVX2 int8 micro-kernels (opt/quant.h). No VNNI on the targeted cores, so the products go
 * through vpmaddwd: A and B are int16 pairs of consecutive k (kg 2), one madd gives
 * w[k] * x[k] + w[k+1] * x[k+1] per int32 lane, exact (|each| <= 2^14). vpmaddubsw is avoided:
 * its int16 sums saturate. Tile 6 x 16: 12 ymm accumulators, 2 B vectors, 1 broadcast of an A
 * pair (a load-port vpbroadcastd). Both operands are widened by the packers (pack_a: a tile of W
 * rows at a time, in the task; widening W inside the tile for every column panel put two
 * shuffle-port uops per row beside each vpmaddwd pair and measured 10-20% slower on MobileNetV2,
 * ResNet-18 and GPT). The requantization runs in double precision where that is exact (rq16,
 * rqd8) and on 4 int64 lanes elsewhere (rq4), checked bit-identical with q8_requant by
 * tests/ops/test_quant_kernels.py.
 * Compiled with -mavx2 -mfma, only called when env->isas has OA_CPU_ISA_AVX2. */
#include <immintrin.h>
#include <string.h>

#include "kernels/opt/quant.h"

static inline __m256i bcast_pair(const int16_t *a) {
  int32_t v;
  memcpy(&v, a, sizeof v);
  return _mm256_set1_epi32(v);
}

/* A [kp/2][6][2], B [kp/2][16][2] int16 */
static inline void store_row(int32_t *c, __m256i v0, __m256i v1) {
  _mm256_storeu_si256((__m256i *)c, v0), _mm256_storeu_si256((__m256i *)(c + 8), v1);
}

static void q8_avx2_gemm_6x16(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int16_t *a = (const int16_t *)a_, *b = (const int16_t *)b_;
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < kp; q += 2, a += 12, b += 32) {
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
    __m256i x = bcast_pair(a);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(x, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(x, b1));
    x = bcast_pair(a + 2);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(x, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(x, b1));
    x = bcast_pair(a + 4);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(x, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(x, b1));
    x = bcast_pair(a + 6);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(x, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(x, b1));
    x = bcast_pair(a + 8);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(x, b0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(x, b1));
    x = bcast_pair(a + 10);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(x, b0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(x, b1));
  }
  store_row(c, c00, c01), store_row(c + ldc, c10, c11), store_row(c + 2 * ldc, c20, c21);
  store_row(c + 3 * ldc, c30, c31), store_row(c + 4 * ldc, c40, c41), store_row(c + 5 * ldc, c50, c51);
}

/* ---- packing: int16 pairs for vpmaddwd (the AVX2 tile, and the AVX-512 one: kg 2, wide) ------- */

/* One B panel in the tiles' layout, [kp / 2][nr][2] int16, nr a multiple of 16 (opt/quant.h:
 * value(q, j) = src[koff[q] + cb[j]], zero past k and nc). The driver's portable packer stores
 * one int16 at a time; here a K pair of 16 consecutive columns (a conv's output row: cb[j] =
 * cb[u] + j - u) is two 16-byte loads, one byte interleave and two sign extensions. Other
 * columns (gathered, linear's rows) gather the pair into bytes first. */
static inline void pair16(__m128i r0, __m128i r1, int16_t *d) {
  _mm256_storeu_si256((__m256i *)d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1)));
  _mm256_storeu_si256((__m256i *)(d + 16), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1)));
}

void oa_q8_avx2_pack_w2(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc,
                        int32_t nr, void *dst_) {
  int16_t *dst = (int16_t *)dst_;
  int run[OA_Q8_NR_MAX / 16]; /* group u / 16: 16 consecutive input bytes per k */
  for (int32_t u = 0; u < nr; u += 16) {
    int r = koff && u + 16 <= nc;
    for (int32_t j = u + 1; r && j < u + 16; j++) r = cb[j] == cb[u] + (j - u);
    run[u / 16] = r;
  }
  for (int64_t q = 0; q < kp; q += 2, dst += 2 * nr) {
    for (int32_t u = 0; u < nr; u += 16) {
      if (run[u / 16]) {
        const __m128i r0 = q < k ? _mm_loadu_si128((const __m128i *)(src + koff[q] + cb[u])) : _mm_setzero_si128();
        const __m128i r1 = q + 1 < k ? _mm_loadu_si128((const __m128i *)(src + koff[q + 1] + cb[u])) : _mm_setzero_si128();
        pair16(r0, r1, dst + 2 * u);
        continue;
      }
      int8_t t0[16] = {0}, t1[16] = {0};
      for (int32_t j = u; j < nc && j < u + 16; j++) {
        const int8_t *s = koff ? src + cb[j] : src + cb[j] + q;
        if (q < k) t0[j - u] = koff ? s[koff[q]] : s[0];
        if (q + 1 < k) t1[j - u] = koff ? s[koff[q + 1]] : s[1];
      }
      pair16(_mm_loadu_si128((const __m128i *)t0), _mm_loadu_si128((const __m128i *)t1), dst + 2 * u);
    }
  }
}

/* One A tile, [kp / 2][mr][2] int16 (mr = nr here: 6 or 8): row j (< nc, of W: src + cb[j]) pair
 * t at dst[2 mr t + 2 j]. 16 k of the rows at a time: each row widened to 8 pairs (dwords), then
 * the rows x 8 dwords transposed by unpacks into one qword (two rows) per pair and row pair. Rows
 * past nc are zero, K past k (to kp) too. Packing W pays where the tile reads the pairs from
 * memory (vpbroadcastd, a load) instead of widening them in registers for every column panel. */
static inline __m256i wrow16(const int8_t *s, int64_t n) { /* n (0..16) bytes, zero past them */
  if (n >= 16) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)s));
  int8_t t[16] = {0};
  if (n > 0) memcpy(t, s, (size_t)n);
  return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)t));
}

void oa_q8_avx2_pack_a_w2(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                          int32_t nc, int32_t nr, void *dst_) {
  (void)koff; /* A tiles: koff NULL (the driver's call) */
  const int32_t mr = nr, g2 = nr / 2;             /* rows, row pairs (3 or 4) */
  int16_t *dst = (int16_t *)dst_;
  for (int64_t q = 0; q < kp; q += 16, dst += 8 * 2 * mr) {
    __m256i r[8];
    for (int j = 0; j < 8; j++) r[j] = j < nc && j < mr && q < k ? wrow16(src + cb[j] + q, k - q) : _mm256_setzero_si256();
    /* v[4 s + g]: rows 2g, 2g + 1; s 0 (unpacklo): pairs 0-1 | 4-5, s 1 (unpackhi): pairs 2-3 | 6-7 */
    __m256i v[8];
    for (int g = 0; g < 4; g++) {
      v[g] = _mm256_unpacklo_epi32(r[2 * g], r[2 * g + 1]);
      v[4 + g] = _mm256_unpackhi_epi32(r[2 * g], r[2 * g + 1]);
    }
    const int64_t n = kp - q >= 16 ? 8 : (kp - q) / 2; /* pairs to store: kp is a multiple of 2 */
    for (int half = 0; half < 2; half++) {
      for (int s = 0; s < 2; s++) {
        const int64_t p = 4 * half + 2 * s;
        for (int g = 0; p < n && g < g2; g++) {
          const __m256i x = v[4 * s + g];
          const __m128i l = half ? _mm256_extracti128_si256(x, 1) : _mm256_castsi256_si128(x);
          _mm_storel_epi64((__m128i *)(dst + 2 * mr * p + 4 * g), l);
          if (p + 1 < n) _mm_storeh_pd((double *)(void *)(dst + 2 * mr * (p + 1) + 4 * g), _mm_castsi128_pd(l));
        }
      }
    }
  }
}

/* max(v, lo) and min(v, hi) on int64 lanes */
static inline __m256i max64(__m256i v, __m256i lo) { return _mm256_blendv_epi8(v, lo, _mm256_cmpgt_epi64(lo, v)); }
static inline __m256i min64(__m256i v, __m256i hi) { return _mm256_blendv_epi8(v, hi, _mm256_cmpgt_epi64(v, hi)); }

typedef struct rq {
  __m256i corr, mult, i32lo, i32hi, rlo, rhi, zp, half, badd; /* half: 2^(n-1) - 1; badd: the bias's addend */
  __m128i n;
  int32_t shift;
} rq_t;

/* 4 outputs: the rule of quant_rule.h on int64 lanes */
static inline __m256i rq4(const rq_t *r, __m128i acc) {
  __m256i v = _mm256_add_epi64(_mm256_cvtepi32_epi64(acc), r->corr);
  v = min64(max64(v, r->i32lo), r->i32hi);                  /* sat_int32 */
  __m256i p = _mm256_add_epi64(_mm256_mul_epi32(v, r->mult), r->badd); /* exact: |p| < 2^63 */
  if (r->shift) {                                           /* round half to even on |p| */
    const __m256i s = _mm256_cmpgt_epi64(_mm256_setzero_si256(), p);
    const __m256i u = _mm256_sub_epi64(_mm256_xor_si256(p, s), s);
    const __m256i odd = _mm256_and_si256(_mm256_srl_epi64(u, r->n), _mm256_set1_epi64x(1));
    const __m256i q = _mm256_srl_epi64(_mm256_add_epi64(_mm256_add_epi64(u, r->half), odd), r->n);
    p = _mm256_sub_epi64(_mm256_xor_si256(q, s), s);
  }
  p = min64(max64(p, r->rlo), r->rhi);                      /* clamp before the zero point */
  return _mm256_add_epi64(p, r->zp);
}

/* the low int32 of 4 int64 lanes in the low 128 bits */
static inline __m128i lo32(__m256i v) {
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

/* The rule in double precision, exactly (docs/quantization.md, "Optimized kernels"): with
 * |v| <= vmax (v = acc + corr, an int32 sum; vmax * mult < 2^52) and |badd| < 2^52, the product
 * p = v * mult + badd is an integer below 2^53, so fma(v, mult, badd) is p exactly; p * 2^-n is
 * exact too, and fma(p, 2^-n, magic) with magic = 1.5 * 2^52 rounds it once, to nearest even, at
 * spacing 1: magic + round_half_even(p / 2^n), the rule's rounding, with no bracket and no
 * fallback for ties. Clamped in double to magic + [lo - zp, hi - zp], the low dword of its bits
 * is the result. 8 outputs in about 20 instructions (the int64 emulation of rq4 took twice as
 * many: AVX2 has no 64-bit multiply-high, arithmetic shift or min / max). vmax <= 2^29 - 1 and
 * |corr| < 2^29 make a wrapped int32 acc + corr fail the range check (its magnitude is then at
 * least 2^31 - 2^29); vectors that fail it take rq4. */
typedef struct rqd {
  __m256d m, b, scale, magic, dlo, dhi, ms, bs;
  __m256i vc, vmax, zp, zp16, lo8, hi8;
  int32_t ok, narrow;
} rqd_t;

/* 2^-n as a double, built from its bits (0 <= n <= 62) */
static inline double exp2_neg(int32_t n) {
  const uint64_t b = (uint64_t)(1023 - n) << 52;
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

static void rqd_init(rqd_t *d, int64_t corr, int32_t mult, int32_t shift, int64_t badd, int32_t zp, int32_t lo,
                     int32_t hi) {
  const int64_t lim = (int64_t)1 << 52;
  int64_t vmax = ((int64_t)1 << 29) - 1;
  if (mult > 0) { /* (2^52 - 1) / 2^bits(mult) <= (2^52 - 1) / mult: no division per row */
    const int64_t v = ((lim - 1) >> (32 - __builtin_clz((unsigned)mult)));
    if (v < vmax) vmax = v;
  }
  d->ok = corr > -((int64_t)1 << 29) && corr < ((int64_t)1 << 29) && badd > -lim && badd < lim;
  const double magic = 6755399441055744.0; /* 1.5 * 2^52 */
  const double scale = exp2_neg(shift);
  d->m = _mm256_set1_pd((double)mult), d->b = _mm256_set1_pd((double)badd), d->scale = _mm256_set1_pd(scale);
  d->magic = _mm256_set1_pd(magic);
  d->dlo = _mm256_set1_pd(magic + (double)(lo - zp)), d->dhi = _mm256_set1_pd(magic + (double)(hi - zp));
  d->vc = _mm256_set1_epi32(d->ok ? (int32_t)corr : 0), d->vmax = _mm256_set1_epi32((int32_t)vmax);
  d->zp = _mm256_set1_epi32(zp);
  /* rq16: with shift >= 23 every |r| < (2^52 + |badd|) / 2^shift + 1 <= 2^30 + 1 */
  d->narrow = d->ok && shift >= 23;
  d->ms = _mm256_set1_pd((double)mult * scale), d->bs = _mm256_set1_pd((double)badd * scale);
  d->zp16 = _mm256_set1_epi16((int16_t)zp), d->lo8 = _mm256_set1_epi8((int8_t)lo), d->hi8 = _mm256_set1_epi8((int8_t)hi);
}

/* 8 sums -> 8 int32 results + zp; 0 when a lane is out of the exact range */
static inline int rqd8(const rqd_t *d, __m256i a, __m256i *out) {
  const __m256i v = _mm256_add_epi32(a, d->vc);
  if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(_mm256_abs_epi32(v), d->vmax))) return 0;
  const __m256d v0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), v1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
  __m256d t0 = _mm256_fmadd_pd(_mm256_fmadd_pd(v0, d->m, d->b), d->scale, d->magic);
  __m256d t1 = _mm256_fmadd_pd(_mm256_fmadd_pd(v1, d->m, d->b), d->scale, d->magic);
  t0 = _mm256_min_pd(_mm256_max_pd(t0, d->dlo), d->dhi), t1 = _mm256_min_pd(_mm256_max_pd(t1, d->dlo), d->dhi);
  /* the low dwords: per 128-bit lane t0.0 t0.1 t1.0 t1.1 | t0.2 t0.3 t1.2 t1.3, then in order */
  const __m256 lo = _mm256_shuffle_ps(_mm256_castpd_ps(t0), _mm256_castpd_ps(t1), _MM_SHUFFLE(2, 0, 2, 0));
  const __m256i q = _mm256_permute4x64_epi64(_mm256_castps_si256(lo), _MM_SHUFFLE(3, 1, 2, 0));
  *out = _mm256_add_epi32(q, d->zp); /* the low dwords of magic + r are r (magic's are 0) */
  return 1;
}

/* 16 sums -> 16 bytes, when every result fits int32 (rqd_t.narrow); 0 when a lane is out of the
 * exact range. fma(v, mult 2^-n, badd 2^-n) is p / 2^n exactly (p < 2^53, the scales powers of
 * two), and vcvtpd2dq rounds it half to even, as the rule does. The clamp is done on the bytes:
 * int16 and int8 saturation are monotone and [lo, hi] lies inside both, so saturating packs,
 * a saturating add of zp and a byte max / min give clamp(r + zp, lo, hi). About 17 instructions
 * per 8 outputs (rqd8 and its packing: 24). */
static inline __m128i rq16_bytes(const rqd_t *d, __m256i v0, __m256i v1) {
#define RQ_HALF(v, h) \
  _mm256_cvtpd_epi32(_mm256_fmadd_pd( \
      _mm256_cvtepi32_pd(h ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v)), d->ms, d->bs))
  const __m256i q0 = _mm256_set_m128i(RQ_HALF(v0, 1), RQ_HALF(v0, 0)), q1 = _mm256_set_m128i(RQ_HALF(v1, 1), RQ_HALF(v1, 0));
#undef RQ_HALF
  /* in-lane packs: int16 outputs 0-3 8-11 | 4-7 12-15, put in order by the qword permute */
  const __m256i w = _mm256_adds_epi16(_mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), _MM_SHUFFLE(3, 1, 2, 0)), d->zp16);
  const __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  return _mm_min_epi8(_mm_max_epi8(b, _mm256_castsi256_si128(d->lo8)), _mm256_castsi256_si128(d->hi8));
}

static inline int rq16(const rqd_t *d, __m256i a0, __m256i a1, __m128i *out) {
  const __m256i v0 = _mm256_add_epi32(a0, d->vc), v1 = _mm256_add_epi32(a1, d->vc);
  const __m256i big = _mm256_max_epu32(_mm256_abs_epi32(v0), _mm256_abs_epi32(v1));
  if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(big, d->vmax))) return 0; /* |v| >= 2^31 reads as > vmax too */
  *out = rq16_bytes(d, v0, v1);
  return 1;
}

/* 8 sums through the int64 path (rq4): the lanes rqd8 cannot take. Out of line and set up per
 * call (rare), so the row loop keeps only rqd8's fields in registers. */
static __attribute__((noinline)) __m256i rq8_exact(__m256i a, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                                                   int32_t zp, int32_t lo, int32_t hi) {
  rq_t r;
  r.corr = _mm256_set1_epi64x(corr);
  r.mult = _mm256_set1_epi64x(mult);
  r.i32lo = _mm256_set1_epi64x(INT32_MIN), r.i32hi = _mm256_set1_epi64x(INT32_MAX);
  r.rlo = _mm256_set1_epi64x((int64_t)lo - zp), r.rhi = _mm256_set1_epi64x((int64_t)hi - zp);
  r.zp = _mm256_set1_epi64x(zp);
  r.shift = shift;
  r.n = _mm_cvtsi32_si128(shift);
  r.half = _mm256_set1_epi64x(shift ? ((int64_t)1 << (shift - 1)) - 1 : 0);
  r.badd = _mm256_set1_epi64x(badd);
  const __m128i v0 = lo32(rq4(&r, _mm256_castsi256_si128(a))), v1 = lo32(rq4(&r, _mm256_extracti128_si256(a, 1)));
  return _mm256_set_m128i(v1, v0);
}

/* 8 results in [-128, 127] as 8 bytes (the packs are exact) */
static inline __m128i bytes8(__m256i q) {
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  return _mm_packs_epi16(w16, w16);
}

/* y[0, j) by rq16 from int32 sums (ai) or float ones (af, exact integers: truncated), until the
 * end or a block with a lane out of range; returns j (0 when the row is not narrow) */
static inline int64_t rq16_run(const rqd_t *d, const int32_t *ai, const float *af, int64_t n, int8_t *y) {
  int64_t j = 0;
  for (; d->narrow && j + 16 <= n; j += 16) {
    const __m256i a0 = af ? _mm256_cvttps_epi32(_mm256_loadu_ps(af + j)) : _mm256_loadu_si256((const __m256i *)(ai + j));
    const __m256i a1 =
        af ? _mm256_cvttps_epi32(_mm256_loadu_ps(af + j + 8)) : _mm256_loadu_si256((const __m256i *)(ai + j + 8));
    __m128i b;
    if (!rq16(d, a0, a1, &b)) break;
    _mm_storeu_si128((__m128i *)(y + j), b);
  }
  return j;
}

void oa_q8_avx2_requant(const int32_t *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                        int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rqd_t d;
  rqd_init(&d, corr, mult, shift, badd, zp, lo, hi);
  int64_t j = rq16_run(&d, acc, NULL, n, y);
  for (; j + 8 <= n; j += 8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(acc + j));
    __m256i q;
    if (!d.ok || !rqd8(&d, a, &q)) q = rq8_exact(a, corr, mult, shift, badd, zp, lo, hi);
    _mm_storel_epi64((__m128i *)(y + j), bytes8(q));
  }
  if (j < n) { /* the tail (depthwise rows of 7 or 14): lanes past it read as 0, not stored */
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i a = _mm256_maskload_epi32(acc + j, _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(n - j)), lane));
    __m256i q;
    if (!d.ok || !rqd8(&d, a, &q)) q = rq8_exact(a, corr, mult, shift, badd, zp, lo, hi);
    int8_t t[16];
    _mm_storeu_si128((__m128i *)(void *)t, bytes8(q));
    memcpy(y + j, t, (size_t)(n - j));
  }
}

/* The float depthwise path's sums (exact integers below 2^24, opt/quant.c P_DWF): truncation
 * converts them exactly; rq16 where it applies, else the int32 path through a small buffer. */
void oa_q8_avx2_requant_f32(const float *acc, int64_t n, int64_t corr, int32_t mult, int32_t shift, int64_t badd,
                            int32_t zp, int32_t lo, int32_t hi, int8_t *y) {
  rqd_t d;
  rqd_init(&d, corr, mult, shift, badd, zp, lo, hi);
  int64_t j = rq16_run(&d, NULL, acc, n, y);
  int32_t t[64];
  for (; j < n; j += 64) {
    const int64_t m = n - j < 64 ? n - j : 64;
    for (int64_t i = 0; i < m; i++) t[i] = (int32_t)acc[j + i];
    oa_q8_avx2_requant(t, m, corr, mult, shift, badd, zp, lo, hi, y + j);
  }
}

/* d[j] = x[j] - zp as float (the float depthwise path's padded plane) */
void oa_q8_avx2_to_float(const int8_t *x, int64_t n, int32_t zp, float *d) {
  const __m256 z = _mm256_set1_ps((float)zp);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(d + j, _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x + j)))), z));
  for (; j < n; j++) d[j] = (float)x[j] - (float)zp;
}

/* A finished tile block's m rows (oa_q8_requant_rows_fn): a row whose bound |acc| <= amax
 * keeps every v = acc + corr inside rq16's exact range (|v| < 2^31, |v| mult < 2^52, shift >= 23)
 * runs rq16 without its range check and with its setup hoisted; other rows and the last n % 16
 * columns take the one-row kernel. */
void oa_q8_avx2_requant_rows(const int32_t *acc, int64_t ldc, int32_t m, int64_t n, const int64_t *corr,
                             const int32_t *mult, const int8_t *shift, const int64_t *badd, int32_t pc, int64_t amax,
                             int32_t zp, int32_t lo, int32_t hi, int8_t *y, int64_t ldy) {
  const int64_t lim52 = (int64_t)1 << 52, lim31 = (int64_t)1 << 31;
  rqd_t d; /* only the fields rq16_bytes reads: zp16, lo8, hi8 here, ms and bs per row */
  d.zp16 = _mm256_set1_epi16((int16_t)zp), d.lo8 = _mm256_set1_epi8((int8_t)lo), d.hi8 = _mm256_set1_epi8((int8_t)hi);
  for (int32_t r = 0; r < m; r++) {
    const int32_t mu = mult[pc ? r : 0], sh = shift[pc ? r : 0];
    const int64_t c = corr[r], bi = badd[r], vb = amax + (c < 0 ? -c : c), am = mu < 0 ? -(int64_t)mu : mu;
    const int32_t *a = acc + r * ldc;
    int8_t *yr = y + r * ldy;
    int64_t j = 0;
    if (sh >= 23 && vb < lim31 && vb * am < lim52 && bi > -lim52 && bi < lim52) {
      const double scale = exp2_neg(sh);
      d.ms = _mm256_set1_pd((double)mu * scale), d.bs = _mm256_set1_pd((double)bi * scale);
      const __m256i vc = _mm256_set1_epi32((int32_t)c);
      for (; j + 16 <= n; j += 16) {
        const __m256i v0 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(a + j)), vc);
        const __m256i v1 = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(a + j + 8)), vc);
        _mm_storeu_si128((__m128i *)(yr + j), rq16_bytes(&d, v0, v1));
      }
    }
    if (j < n) oa_q8_avx2_requant(a + j, n - j, c, mu, sh, bi, zp, lo, hi, yr + j);
  }
}

/* Depthwise rows, 8 outputs per ymm: taps in pairs (j, j + 1) through vpmaddwd, with the input
 * values of the two taps interleaved (stride 1) or already adjacent (stride 2, dilation 1: output
 * o reads x[2o + j] and x[2o + j + 1]); a lone last tap pairs with weight 0. |w * (x - zp)| <=
 * 128 * 255, so each pair sum is exact. Other strides: the portable row. */
static inline __m256i wpair(const int8_t *w, int64_t j, int64_t kw) {
  const int32_t lo = (uint16_t)(int16_t)w[j], hi = j + 1 < kw ? (uint16_t)(int16_t)w[j + 1] : 0;
  return _mm256_set1_epi32((int32_t)((uint32_t)lo | ((uint32_t)hi << 16)));
}

void oa_q8_avx2_dw(const int16_t *rows, int64_t ld, const int8_t *w, int64_t kh, int64_t kw, int64_t sw,
                       int64_t dh, int64_t dw, int64_t n, int32_t *acc) {
  if (sw > 2) {
    oa_q8_dw_generic(rows, ld, w, kh, kw, sw, dh, dw, n, acc);
    return;
  }
  const int64_t n8 = n / 8 * 8;
  for (int64_t o = 0; o < n8; o += 8) {
    __m256i a = _mm256_setzero_si256();
    for (int64_t i = 0; i < kh; i++) {
      const int16_t *r = rows + i * dh * ld + o * sw;
      const int8_t *wr = w + i * kw;
      if (sw == 1) {
        for (int64_t j = 0; j < kw; j += 2) {
          const __m128i x0 = _mm_loadu_si128((const __m128i *)(r + j * dw));
          const __m128i x1 = j + 1 < kw ? _mm_loadu_si128((const __m128i *)(r + (j + 1) * dw)) : x0;
          const __m256i xv = _mm256_set_m128i(_mm_unpackhi_epi16(x0, x1), _mm_unpacklo_epi16(x0, x1));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(xv, wpair(wr, j, kw)));
        }
      } else if (dw == 1) { /* stride 2: the pair's values are adjacent */
        for (int64_t j = 0; j < kw; j += 2) {
          const __m256i xv = _mm256_loadu_si256((const __m256i *)(r + j));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(xv, wpair(wr, j, kw)));
        }
      } else {
        for (int64_t j = 0; j < kw; j++) {
          const __m256i xv = _mm256_loadu_si256((const __m256i *)(r + j * dw));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(xv, _mm256_set1_epi32((uint16_t)(int16_t)wr[j])));
        }
      }
    }
    _mm256_storeu_si256((__m256i *)(acc + o), a);
  }
  if (n8 < n) oa_q8_dw_generic(rows + n8 * sw, ld, w, kh, kw, sw, dh, dw, n - n8, acc + n8);
}

/* ---- add_q8, quantize, dequantize ------------------------------------------------------------- */

/* add_q8 on 8 lanes: the products (a - za) * ma, (b - zb) * mb as int64 on the even and the odd
 * int32 lanes (vpmuldq), |p| < 2^41. AVX2 has no 64-bit arithmetic shift: for shift <= 41 the sum
 * is offset by 2^42 (a multiple of 2^shift, so floor and parity are unchanged) and shifted
 * logically; shift >= 42 rounds every |p| < 2^41 to 0. Then clamp to [lo - zo, hi - zo], zo. */
static inline __m256i add_round(__m256i p, __m256i off, __m256i half, __m256i one, __m128i n, __m256i back) {
  const __m256i u = _mm256_add_epi64(p, off);
  const __m256i odd = _mm256_and_si256(_mm256_srl_epi64(u, n), one);
  return _mm256_sub_epi64(_mm256_srl_epi64(_mm256_add_epi64(_mm256_add_epi64(u, half), odd), n), back);
}

void oa_q8_avx2_add(const int8_t *a, const int8_t *b, int64_t n, const oa_q8_add_t *p, int8_t *y) {
  int64_t i = 0;
  if (p->shift <= 41) {
    const __m256i za = _mm256_set1_epi32(p->za), zb = _mm256_set1_epi32(p->zb);
    const __m256i ma = _mm256_set1_epi64x(p->ma), mb = _mm256_set1_epi64x(p->mb);
    const __m256i rlo = _mm256_set1_epi64x((int64_t)p->lo - p->zo), rhi = _mm256_set1_epi64x((int64_t)p->hi - p->zo);
    const __m256i zo = _mm256_set1_epi32(p->zo), one = _mm256_set1_epi64x(p->shift ? 1 : 0); /* shift 0: exact */
    const __m256i off = _mm256_set1_epi64x((int64_t)1 << 42), back = _mm256_set1_epi64x((int64_t)1 << (42 - p->shift));
    const __m256i half = _mm256_set1_epi64x(p->shift ? ((int64_t)1 << (p->shift - 1)) - 1 : 0);
    const __m128i sh = _mm_cvtsi32_si128(p->shift);
    for (; i + 8 <= n; i += 8) {
      const __m256i av = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(a + i))), za);
      const __m256i bv = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + i))), zb);
      __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(av, ma), _mm256_mul_epi32(bv, mb));
      __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(av, 32), ma),
                                    _mm256_mul_epi32(_mm256_srli_epi64(bv, 32), mb));
      pe = min64(max64(add_round(pe, off, half, one, sh, back), rlo), rhi);
      po = min64(max64(add_round(po, off, half, one, sh, back), rlo), rhi);
      const __m256i q = _mm256_add_epi32(_mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xaa), zo);
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64((__m128i *)(y + i), _mm_packs_epi16(w16, w16)); /* in [-128, 127]: exact */
    }
  }
  for (; i < n; i++) y[i] = oa_q8_add1(a[i], b[i], p);
}

/* quantize on 8 lanes, the reference kernel's operations in its order (vroundps to nearest even:
 * nearbyintf in the default rounding mode) */
void oa_q8_avx2_quantize(const float *x, int64_t n, float inv, float zp, float lo, float hi, void *y) {
  const __m256 vinv = _mm256_set1_ps(inv), vzp = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo);
  const __m256 vhi = _mm256_set1_ps(hi), big = _mm256_set1_ps(1e9f), nbig = _mm256_set1_ps(-1e9f);
  uint8_t *yp = (uint8_t *)y;
  const int u8 = lo >= 0.0f && hi > 127.0f;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, nbig), big);
    __m256 q = _mm256_blendv_ps(_mm256_add_ps(r, vzp), vzp, nan);
    q = _mm256_min_ps(_mm256_max_ps(q, vlo), vhi);
    const __m256i qi = _mm256_cvttps_epi32(q);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
    _mm_storel_epi64((__m128i *)(yp + i), u8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16));
  }
  for (; i < n; i++) yp[i] = (uint8_t)(int32_t)oa_q8_quantize1(x[i], inv, zp, lo, hi);
}

void oa_q8_avx2_dequantize(const void *x, int64_t n, int32_t u8, int32_t zp, float scale, float *y) {
  const __m256i vzp = _mm256_set1_epi32(zp);
  const __m256 vs = _mm256_set1_ps(scale);
  const uint8_t *xp = (const uint8_t *)x;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64((const __m128i *)(xp + i));
    const __m256i q = u8 ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, vzp)), vs));
  }
  for (; i < n; i++) y[i] = (float)((u8 ? (int32_t)xp[i] : (int32_t)(int8_t)xp[i]) - zp) * scale;
}

/* sums of W rows through vpsadbw on w ^ 0x80: sum(w) = sum(w ^ 0x80) - 128 * 32 per vector */
void oa_q8_avx2_wsum(int64_t rows, int64_t k, const int8_t *w, int64_t *sums) {
  const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
  const int64_t k32 = k / 32 * 32;
  for (int64_t c = 0; c < rows; c++) {
    const int8_t *wr = w + c * k;
    __m256i s = zero;
    for (int64_t q = 0; q < k32; q += 32)
      s = _mm256_add_epi64(s, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wr + q)), flip),
                                              zero));
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    int64_t t = _mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1) - 128 * k32;
    for (int64_t q = k32; q < k; q++) t += wr[q];
    sums[c] = t;
  }
}

/* 16 k of a W row against 16 int16 of x: 8 int32 partial sums */
static inline __m256i dot16(const int8_t *w, const int16_t *x) {
  const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w));
  return _mm256_madd_epi16(wv, _mm256_loadu_si256((const __m256i *)x));
}

static inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

/* 4 W rows at a time against one x row; (x - zp) * w <= 255 * 128: madd pairs exact */
void oa_q8_avx2_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const int16_t *x = (const int16_t *)x_;
  const int64_t k16 = k / 16 * 16;
  for (int64_t i = 0; i < m; i++) {
    const int16_t *xr = x + i * k;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
      __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t q = 0; q < k16; q += 16) {
        s0 = _mm256_add_epi32(s0, dot16(w0 + q, xr + q));
        s1 = _mm256_add_epi32(s1, dot16(w1 + q, xr + q));
        s2 = _mm256_add_epi32(s2, dot16(w2 + q, xr + q));
        s3 = _mm256_add_epi32(s3, dot16(w3 + q, xr + q));
      }
      int32_t t0 = hsum(s0), t1 = hsum(s1), t2 = hsum(s2), t3 = hsum(s3);
      for (int64_t q = k16; q < k; q++) {
        t0 += (int32_t)w0[q] * xr[q], t1 += (int32_t)w1[q] * xr[q];
        t2 += (int32_t)w2[q] * xr[q], t3 += (int32_t)w3[q] * xr[q];
      }
      acc[i * n + j] = t0, acc[i * n + j + 1] = t1, acc[i * n + j + 2] = t2, acc[i * n + j + 3] = t3;
    }
    for (; j < n; j++) {
      const int8_t *wr = w + j * k;
      __m256i s = _mm256_setzero_si256();
      for (int64_t q = 0; q < k16; q += 16) s = _mm256_add_epi32(s, dot16(wr + q, xr + q));
      int32_t t = hsum(s);
      for (int64_t q = k16; q < k; q++) t += (int32_t)wr[q] * xr[q];
      acc[i * n + j] = t;
    }
  }
}

const oa_q8_isa_t oa_q8_avx2_isa = {.name = "avx2", .mr = 6, .nr = 16, .kg = 2, .wide = 1, .gemm = q8_avx2_gemm_6x16,
                                    .requant = oa_q8_avx2_requant,
                                    .requant_rows = oa_q8_avx2_requant_rows, .requant_f32 = oa_q8_avx2_requant_f32,
                                    .to_float = oa_q8_avx2_to_float, .pack = oa_q8_avx2_pack_w2, .pack_a = oa_q8_avx2_pack_a_w2,
                                    .dw = oa_q8_avx2_dw, .gemv = oa_q8_avx2_gemv, .wsum = oa_q8_avx2_wsum,
                                    .add = oa_q8_avx2_add,
                                    .quantize = oa_q8_avx2_quantize, .dequantize = oa_q8_avx2_dequantize};
