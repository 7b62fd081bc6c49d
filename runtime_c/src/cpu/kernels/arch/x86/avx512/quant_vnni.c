/* AVX512-VNNI int8 micro-kernels (opt/quant.h): vpdpbusd multiplies 4 unsigned bytes by 4 signed
 * bytes and adds the 4 products to an int32 lane, 64 products per zmm instruction. W (signed) is
 * the broadcast operand, 4 consecutive k of one row; the activations go in as unsigned x ^ 0x80 =
 * x + 128 (the table's u8: the driver subtracts (input_zp + 128) * sum W in the correction).
 * |w| * 255 * K < 2^31 for K <= 65536 and vpdpbusd (not the saturating vpdpbusds) wraps nothing:
 * every sum is exact, the bytes are the reference kernel's.
 *   GEMM: MR x NR tile (Q8V_MR rows of W x Q8V_NV zmm of 16 columns), K in groups of 4: per group
 *         Q8V_NV loads of B and one broadcast of a W dword per row; W read in place (4
 *         consecutive k of a row are contiguous: no A packing at all) or from packed tiles.
 *   B packing: 16 columns x 4 k per 64-byte store, the columns gathered as runs of consecutive
 *         (or stride-2) input bytes with masked loads (no read past a run), interleaved by
 *         unpack, flipped by one xor.
 *   GEMV: 64 k per instruction against x ^ 0x80, 4 W rows at once, the last vector masked.
 * The requantization, depthwise rows and weight sums are the AVX-512 ones (quant.c). Compiled
 * with the AVX-512 flags and -mavx512vnni; only called when the CPU reports avx512_vnni and
 * env->isas has OA_CPU_ISA_AVX512 and OA_CPU_ISA_VNNI (opt/quant.c). */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#include <immintrin.h>
#include <string.h>

#include "kernels/opt/quant.h"
#include "kernels/arch/x86/avx512/quant_rr.h"

#ifndef Q8V_MR
#define Q8V_MR 8 /* rows of W per tile: 1-12 */
#endif
#ifndef Q8V_NV
#define Q8V_NV 2 /* zmm of 16 columns per tile: 1-3 */
#endif
#define Q8V_NR (16 * Q8V_NV)

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

/* The tile, written out per row and column vector (accumulators in named variables: an array of
 * them made gcc copy every accumulator each step). ROWS(X) expands X(i) for the tile's rows, COLS
 * for its vectors. */
#define Q8V_R0(X)
#define Q8V_R1(X) X(0)
#define Q8V_R2(X) Q8V_R1(X) X(1)
#define Q8V_R3(X) Q8V_R2(X) X(2)
#define Q8V_R4(X) Q8V_R3(X) X(3)
#define Q8V_R5(X) Q8V_R4(X) X(4)
#define Q8V_R6(X) Q8V_R5(X) X(5)
#define Q8V_R7(X) Q8V_R6(X) X(6)
#define Q8V_R8(X) Q8V_R7(X) X(7)
#define Q8V_R9(X) Q8V_R8(X) X(8)
#define Q8V_R10(X) Q8V_R9(X) X(9)
#define Q8V_R11(X) Q8V_R10(X) X(10)
#define Q8V_R12(X) Q8V_R11(X) X(11)
#define Q8V_CAT(a, b) a##b
#define Q8V_XCAT(a, b) Q8V_CAT(a, b)
#define ROWS(X) Q8V_XCAT(Q8V_R, Q8V_MR)(X)

#if Q8V_NV == 1
#define COLS(X, i) X(i, 0)
#elif Q8V_NV == 2
#define COLS(X, i) X(i, 0) X(i, 1)
#else
#define COLS(X, i) X(i, 0) X(i, 1) X(i, 2)
#endif
#define ZERO1(i, v) __m512i c##i##_##v = _mm512_setzero_si512();
#define ZERO(i) COLS(ZERO1, i)
#define DP1(i, v) c##i##_##v = _mm512_dpbusd_epi32(c##i##_##v, b##v, a##i);
#define STORE1(i, v) _mm512_storeu_si512((void *)(c + (i) * ldc + 16 * (v)), c##i##_##v);
#define STORE(i) COLS(STORE1, i)
#define LOADB1(i, v) const __m512i b##v = _mm512_loadu_si512((const void *)(b + 64 * (v)));
/* one group of 4 k: the B vectors, then per row the broadcast of its W dword AV(i) */
#define STEP1(i) {                                 \
    const __m512i a##i = _mm512_set1_epi32(AV(i)); \
    COLS(DP1, i)                                   \
  }
#define STEP()            \
  do {                    \
    COLS(LOADB1, 0)       \
    ROWS(STEP1)           \
  } while (0)

/* A [kp/4][MR][4] int8, B [kp/4][NR][4] uint8 */
static void q8_vnni_gemm(int64_t kp, const void *a_, const void *b_, int32_t *c, int64_t ldc) {
  const int8_t *a = (const int8_t *)a_;
  const uint8_t *b = (const uint8_t *)b_;
  ROWS(ZERO)
#define AV(i) load32(a + 4 * (i))
  for (int64_t q = 0; q < kp; q += 4, a += 4 * Q8V_MR, b += 4 * Q8V_NR) STEP();
#undef AV
  ROWS(STORE)
}

/* W in place: rows w + i * ldw (i < mr; the rows past mr repeat the last, their sums unused). The
 * last group of a K that is not a multiple of 4 is read byte by byte (nothing past a row), in a
 * second call on the stored tile: a second copy of the step after the loop made gcc move every
 * accumulator between two registers at each step of the loop. */
#define ROWPTR(i) const int8_t *r##i = w + ((i) < mr ? (i) : mr - 1) * ldw;
#define LOADC1(i, v) __m512i c##i##_##v = _mm512_loadu_si512((const void *)(c + (i) * ldc + 16 * (v)));
#define LOADC(i) COLS(LOADC1, i)
__attribute__((noinline)) static void q8_vnni_tail(int64_t q, int64_t k, const int8_t *w, int64_t ldw, int32_t mr,
                                                  const uint8_t *b, int32_t *c, int64_t ldc) {
  ROWS(ROWPTR)
  ROWS(LOADC)
#define AV(i) load_part(r##i + q, k - q)
  STEP();
#undef AV
  ROWS(STORE)
}

static void q8_vnni_gemm_rows(int64_t k, const int8_t *w, int64_t ldw, int32_t mr, const void *b_, int32_t *c,
                              int64_t ldc) {
  const uint8_t *b = (const uint8_t *)b_;
  ROWS(ROWPTR)
  ROWS(ZERO)
  const int64_t k4 = k / 4 * 4;
#define AV(i) load32(r##i + q)
  for (int64_t q = 0; q < k4; q += 4, b += 4 * Q8V_NR) STEP();
#undef AV
  ROWS(STORE)
  if (k4 < k) q8_vnni_tail(k4, k, w, ldw, mr, b, c, ldc);
}

/* ---- B packing -------------------------------------------------------------------------------- */

/* a run of columns of one 16-column chunk: lanes lane .. lane + len - 1 read off, off + step, ...
 * (step 1 or 2) */
typedef struct seg {
  int32_t lane, len, step;
  int64_t off;
} seg_t;

/* byte shift up by s lanes (pshufb control; 0x80 lanes read 0): k_shift + 16 - s */
static const int8_t k_shift[32] = {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128,
                                   -128, -128, -128, -128, -128, 0,    1,    2,    3,    4,    5,
                                   6,    7,    8,    9,    10,   11,   12,   13,   14,   15};

/* the 16 bytes of one k for the columns of a chunk (the runs of `sg`); lanes past them 0 */
static inline __m128i gather_row(const int8_t *s, const seg_t *sg, int32_t ns) {
  if (ns == 1 && sg[0].len == 16 && sg[0].step == 1) return _mm_loadu_si128((const __m128i *)(s + sg[0].off));
  __m128i row = _mm_setzero_si128();
  for (int32_t t = 0; t < ns; t++) {
    const int8_t *p = s + sg[t].off;
    __m128i v;
    if (sg[t].step == 1) {
      v = _mm_maskz_loadu_epi8((__mmask16)((1u << sg[t].len) - 1u), p);
    } else { /* stride 2: 2 len - 1 bytes (not one past the run), the even ones kept */
      const __mmask32 m = (__mmask32)((sg[t].len == 16 ? 0xffffffffu : (1u << (2 * sg[t].len)) - 1u) >> 1);
      v = _mm256_cvtepi16_epi8(_mm256_maskz_loadu_epi8(m, p));
    }
    if (sg[t].lane) v = _mm_shuffle_epi8(v, _mm_loadu_si128((const __m128i *)(k_shift + 16 - sg[t].lane)));
    row = _mm_or_si128(row, v);
  }
  return row;
}

/* 4 rows of 16 columns -> 16 x [4 k] bytes */
static inline __m512i interleave4(__m128i r0, __m128i r1, __m128i r2, __m128i r3) {
  const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
  const __m256i lo = _mm256_set_m128i(_mm_unpackhi_epi16(t0, t2), _mm_unpacklo_epi16(t0, t2));
  const __m256i hi = _mm256_set_m128i(_mm_unpackhi_epi16(t1, t3), _mm_unpacklo_epi16(t1, t3));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* the xor of a group: `fl` (0x80808080: the u8 flip; 0: raw bytes, the AMX table) on the bytes of
 * k < `valid` (of 4), 0 on the zero padding (valid <= 0: a group past K, kpad > kg) */
static inline __m512i flip_mask(int64_t valid, uint32_t fl) {
  const uint32_t m = valid >= 4 ? fl : valid <= 0 ? 0u : (uint32_t)(((uint64_t)1 << (8 * valid)) - 1u) & fl;
  return _mm512_set1_epi32((int32_t)m);
}

/* A full panel of consecutive input bytes per k (grid columns): per group of 4 k and 32 columns,
 * 4 ymm rows unpacked within their 128-bit lanes (columns 0-3 | 16-19, 4-7 | 20-23, ...) and put
 * in order by two lane shuffles (128 bytes in about 20 instructions); a last 16 columns by xmm. */
static void pack_run(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, int64_t c0, int32_t nr,
                     uint8_t *dst, uint32_t fl) {
  const __m512i flip = _mm512_set1_epi32((int32_t)fl);
  for (int64_t q = 0; q < kp; q += 4, dst += 4 * nr) {
    const __m512i f = q + 4 <= k ? flip : flip_mask(k - q, fl);
    const int8_t *s[4];
    for (int i = 0; i < 4; i++) s[i] = q + i < k ? src + koff[q + i] + c0 : NULL;
    int32_t u = 0;
    for (; u + 32 <= nr; u += 32) {
      __m256i r[4];
      for (int i = 0; i < 4; i++) r[i] = s[i] ? _mm256_loadu_si256((const __m256i *)(s[i] + u)) : _mm256_setzero_si256();
      const __m256i t0 = _mm256_unpacklo_epi8(r[0], r[1]), t1 = _mm256_unpackhi_epi8(r[0], r[1]);
      const __m256i t2 = _mm256_unpacklo_epi8(r[2], r[3]), t3 = _mm256_unpackhi_epi8(r[2], r[3]);
      const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(t0, t2)),
                                           _mm256_unpackhi_epi16(t0, t2), 1);
      const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_unpacklo_epi16(t1, t3)),
                                           _mm256_unpackhi_epi16(t1, t3), 1);
      _mm512_storeu_si512((void *)(dst + 4 * u), _mm512_xor_si512(_mm512_shuffle_i64x2(a, b, 0x88), f));
      _mm512_storeu_si512((void *)(dst + 4 * u + 64), _mm512_xor_si512(_mm512_shuffle_i64x2(a, b, 0xdd), f));
    }
    if (u < nr) { /* 16 more */
      __m128i r[4];
      for (int i = 0; i < 4; i++) r[i] = s[i] ? _mm_loadu_si128((const __m128i *)(s[i] + u)) : _mm_setzero_si128();
      _mm512_storeu_si512((void *)(dst + 4 * u), _mm512_xor_si512(interleave4(r[0], r[1], r[2], r[3]), f));
    }
  }
}

static void pack_any(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb, int32_t nc,
                     int32_t nr, void *dst_, uint32_t fl) {
  uint8_t *dst = (uint8_t *)dst_;
  if (koff && nc == nr && nr % 16 == 0 && cb[nr - 1] == cb[0] + nr - 1) {
    int run = 1;
    for (int32_t j = 1; j < nr - 1 && run; j++) run = cb[j] == cb[0] + j;
    if (run) {
      pack_run(src, koff, k, kp, cb[0], nr, dst, fl);
      return;
    }
  }
  if (!koff) { /* linear: column j is the row src + cb[j], 4 consecutive k are one dword */
    const uint32_t flip = fl;
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
    seg_t sg[16];
    int32_t ns = 0;
    const int32_t end = nc < u + 16 ? nc : u + 16;
    for (int32_t j = u; j < end;) { /* runs of step 1 or 2, else single columns */
      const int64_t d = j + 1 < end ? cb[j + 1] - cb[j] : 1;
      int32_t len = 1;
      if (d == 1 || d == 2)
        while (j + len < end && cb[j + len] == cb[j] + len * d) len++;
      sg[ns].lane = j - u, sg[ns].len = len, sg[ns].step = len > 1 ? (int32_t)d : 1, sg[ns].off = cb[j];
      ns++;
      j += len;
    }
    uint8_t *d = dst + 4 * u;
    for (int64_t q = 0; q < kp; q += 4, d += 4 * nr) {
      __m128i r[4];
      for (int i = 0; i < 4; i++) r[i] = q + i < k && ns ? gather_row(src + koff[q + i], sg, ns) : _mm_setzero_si128();
      const __m512i v = _mm512_xor_si512(interleave4(r[0], r[1], r[2], r[3]), flip_mask(k - q, fl));
      _mm512_storeu_si512((void *)d, v);
    }
  }
}

static void q8_vnni_pack(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                         int32_t nc, int32_t nr, void *dst) {
  pack_any(src, koff, k, kp, cb, nc, nr, dst, 0x80808080u);
}

void oa_q8_avx512_pack_raw(const int8_t *src, const int64_t *koff, int64_t k, int64_t kp, const int64_t *cb,
                           int32_t nc, int32_t nr, void *dst) {
  pack_any(src, koff, k, kp, cb, nc, nr, dst, 0u);
}

/* ---- GEMV ------------------------------------------------------------------------------------- */

/* x ^ 0x80 as uint8 [m][k] (the driver's choice when input_zp is -128: x ^ 0x80 is then x - zp
 * and no correction is needed); 4 W rows at a time, 64 k per step, the last step masked
 * (masked-off bytes load 0 on both sides) */
void oa_q8_avx512_vnni_gemv(int64_t m, int64_t n, int64_t k, const void *x_, const int8_t *w, int32_t *acc) {
  const uint8_t *x = (const uint8_t *)x_;
  const int64_t k64 = k / 64 * 64;
  const __mmask64 tail = k > k64 ? (~(__mmask64)0) >> (64 - (k - k64)) : 0;
  for (int64_t i = 0; i < m; i++) {
    const uint8_t *xr = x + i * k;
    const __m512i xt = tail ? _mm512_maskz_loadu_epi8(tail, xr + k64) : _mm512_setzero_si512();
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t *w0 = w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
      __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t q = 0; q < k64; q += 64) {
        const __m512i xv = _mm512_loadu_si512((const void *)(xr + q));
        s0 = _mm512_dpbusd_epi32(s0, xv, _mm512_loadu_si512((const void *)(w0 + q)));
        s1 = _mm512_dpbusd_epi32(s1, xv, _mm512_loadu_si512((const void *)(w1 + q)));
        s2 = _mm512_dpbusd_epi32(s2, xv, _mm512_loadu_si512((const void *)(w2 + q)));
        s3 = _mm512_dpbusd_epi32(s3, xv, _mm512_loadu_si512((const void *)(w3 + q)));
      }
      if (tail) {
        s0 = _mm512_dpbusd_epi32(s0, xt, _mm512_maskz_loadu_epi8(tail, w0 + k64));
        s1 = _mm512_dpbusd_epi32(s1, xt, _mm512_maskz_loadu_epi8(tail, w1 + k64));
        s2 = _mm512_dpbusd_epi32(s2, xt, _mm512_maskz_loadu_epi8(tail, w2 + k64));
        s3 = _mm512_dpbusd_epi32(s3, xt, _mm512_maskz_loadu_epi8(tail, w3 + k64));
      }
      acc[i * n + j] = _mm512_reduce_add_epi32(s0), acc[i * n + j + 1] = _mm512_reduce_add_epi32(s1);
      acc[i * n + j + 2] = _mm512_reduce_add_epi32(s2), acc[i * n + j + 3] = _mm512_reduce_add_epi32(s3);
    }
    for (; j < n; j++) {
      const int8_t *wr = w + j * k;
      __m512i s = _mm512_setzero_si512();
      for (int64_t q = 0; q < k64; q += 64)
        s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512((const void *)(xr + q)),
                                _mm512_loadu_si512((const void *)(wr + q)));
      if (tail) s = _mm512_dpbusd_epi32(s, xt, _mm512_maskz_loadu_epi8(tail, wr + k64));
      acc[i * n + j] = _mm512_reduce_add_epi32(s);
    }
  }
}


/* ---- depthwise along the rows (oa_q8_dwv_t) --------------------------------------------------- */

/* Grid columns c0 .. c0 + n (n a multiple of 64) for sw S (1 or 2), 64 / S per block, finished
 * in registers. A load at byte S (c + 4 m) (m < 4 / S) holds in its 128-bit lane L the bytes of
 * columns c + (16 / S) L + 4 m + j (j < 4): accumulator m, lane L, dword j. Per 64 columns the four
 * accumulators are requantized by the float path of quant_rr.h (`flt`: it applies to this channel;
 * a vector it cannot settle sends the 64 sums to the exact kernel, oa_q8_avx512_requant) and packed
 * to bytes (vpackssdw, vpacksswb: byte 16 L + 4 m + j, which is the column order at stride 1; one
 * dword permutation at stride 2). */
static inline __attribute__((always_inline)) void dwv_cols(const uint8_t *buf, const int64_t *koff, int64_t kh,
                                                           int64_t ng, const int32_t *wd, const __m512i *idx,
                                                           int64_t c0, int64_t n, const oa_q8_dwv_t *p,
                                                           const rr_t *rp, int flt, int full, int chk, int8_t *out,
                                                           const int S) {
  /* column order: from the packs (stride 2: dword 4 L + m -> 2 L + m, m < 2, and 8 + 2 L + m - 2),
   * and from the exact kernel's bytes 16 m + 4 L + j (dword 4 m + L -> the column's dword) */
  const __m512i order = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m512i order16 = S == 1 ? _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
                                 : _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  for (int64_t c = 0; c < n; c += 64) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < kh; i++) {
      const uint8_t *r = buf + koff[i] + S * (c0 + c);
      /* S 1: columns c + 4 m; S 2: columns c + 4 m (m < 2) and c + 32 + 4 (m - 2) */
      const __m512i v0 = _mm512_loadu_si512((const void *)r), v1 = _mm512_loadu_si512((const void *)(r + 4 * S));
      const __m512i v2 = _mm512_loadu_si512((const void *)(r + (S == 1 ? 8 : 64)));
      const __m512i v3 = _mm512_loadu_si512((const void *)(r + (S == 1 ? 12 : 72)));
      for (int64_t g = 0; g < ng; g++) {
        const __m512i wv = _mm512_set1_epi32(wd[i * ng + g]);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_shuffle_epi8(v0, idx[g]), wv);
        a1 = _mm512_dpbusd_epi32(a1, _mm512_shuffle_epi8(v1, idx[g]), wv);
        a2 = _mm512_dpbusd_epi32(a2, _mm512_shuffle_epi8(v2, idx[g]), wv);
        a3 = _mm512_dpbusd_epi32(a3, _mm512_shuffle_epi8(v3, idx[g]), wv);
      }
    }
    __m512i b = _mm512_setzero_si512();
    __mmask16 bad = 1;
    if (flt) { /* byte 16 L + 4 m + j of the packs: accumulator m, lane L, dword j */
      __m512i d = _mm512_setzero_si512();
      __mmask16 kb = 0;
      const __m512i q0 = rr16_qd(rp, a0, chk, &d, &kb), q1 = rr16_qd(rp, a1, chk, &d, &kb);
      const __m512i q2 = rr16_qd(rp, a2, chk, &d, &kb), q3 = rr16_qd(rp, a3, chk, &d, &kb);
      bad = (__mmask16)(_mm512_test_epi32_mask(d, d) | kb);
      b = rr_clamp8(rp, _mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3)), full);
      if (S == 2) b = _mm512_permutexvar_epi32(order, b);
    }
    if (bad) { /* the exact kernel on the 64 sums */
      int32_t t[64];
      int8_t q[64];
      _mm512_storeu_si512((void *)t, a0), _mm512_storeu_si512((void *)(t + 16), a1);
      _mm512_storeu_si512((void *)(t + 32), a2), _mm512_storeu_si512((void *)(t + 48), a3);
      oa_q8_avx512_requant(t, 64, p->corr, p->mult, p->shift, p->badd, p->zp, p->lo, p->hi, q);
      b = _mm512_permutexvar_epi32(order16, _mm512_loadu_si512((const void *)q));
    }
    _mm512_storeu_si512((void *)(out + c), b);
  }
}

/* The plane as "grid columns": the padded rows go to sh row-phase planes of hq rows, ld = sw L
 * bytes each (padded row r: phase r % sh, row r / sh; columns past the padded width hold the
 * padding too), so that output (oy, ox) is grid column c = oy L + ox, and kernel row i reads bytes
 * koff[i] + sw c + t dw, koff[i] = ((i dh % sh) hq + i dh / sh) ld: the whole plane is one long
 * row. Columns ox >= ow are computed and dropped. */
static void q8_vnni_dwv(const oa_q8_dwv_t *p) {
  const int64_t kw = p->kw, kh = p->kh, ng = (kw + 3) / 4, sw = p->sw, sh = p->sh;
  const int64_t L = p->L, hq = p->hq, ld = p->ld, plane = p->plane, band = p->band;
  const int64_t *koff = p->koff;
  const uint8_t zpad = (uint8_t)((uint8_t)(int8_t)p->zin ^ 0x80u);
  uint8_t *buf = p->work;
  int8_t *tn = (int8_t *)(p->work + plane);
  /* the padded rows as x ^ 0x80 (the fields in locals: the byte stores could alias *p) */
  const __m512i flip = _mm512_set1_epi8((char)0x80), vpad = _mm512_set1_epi8((char)zpad);
  const int8_t *x = p->x;
  const int64_t h = p->h, w = p->w, ph = p->ph, pw = p->pw;
  for (int64_t a = 0; a < sh; a++)
    for (int64_t k = 0, R = a - ph; k < hq; k++, R += sh) { /* padded row k sh + a, input row R */
      uint8_t *d = buf + (a * hq + k) * ld;
      for (int64_t q = 0; q < ld; q += 64) {
        const __mmask64 m = ld - q >= 64 ? ~(__mmask64)0 : (~(__mmask64)0) >> (64 - (ld - q));
        _mm512_mask_storeu_epi8(d + q, m, vpad);
      }
      if (R < 0 || R >= h) continue;
      const int8_t *s = x + R * w;
      for (int64_t q = 0; q < w; q += 64) {
        const __mmask64 m = w - q >= 64 ? ~(__mmask64)0 : (~(__mmask64)0) >> (64 - (w - q));
        _mm512_mask_storeu_epi8(d + pw + q, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, s + q), flip));
      }
    }
  memset(buf + sh * hq * ld, zpad, (size_t)(plane - sh * hq * ld));
  /* per kernel row and tap group: the 4 weights as a dword (0 past kw); per group the shuffle
   * forming column j's bytes sw j + (4 g + t) dw of its lane (0x80: a zero byte past kw) */
  int32_t wd[OA_Q8_DWV_GROUPS_MAX];
  __m512i idx[4];
  for (int64_t i = 0; i < kh; i++) {
    for (int64_t g = 0; g < ng; g++) {
      uint32_t v = 0;
      for (int64_t t = 0; t < 4 && 4 * g + t < kw; t++) v |= (uint32_t)(uint8_t)p->wt[i * kw + 4 * g + t] << (8 * t);
      wd[i * ng + g] = (int32_t)v;
    }
  }
  for (int64_t g = 0; g < ng; g++) {
    uint8_t b[16];
    for (int j = 0; j < 4; j++)
      for (int t = 0; t < 4; t++)
        b[4 * j + t] = 4 * g + t < kw ? (uint8_t)(sw * j + (4 * g + t) * p->dw) : 0x80u;
    __m128i v;
    memcpy(&v, b, sizeof v);
    idx[g] = _mm512_broadcast_i32x4(v);
  }
  /* the float path's fields for this channel (quant_rr.h; requant_rows' conditions) */
  rr_t rp;
  rr_init(&rp, p->zp, p->lo, p->hi);
  const int64_t corr = p->corr, amax = kh * kw * 255 * 128;
  float mf, blo, bhi;
  const int8_t sh8 = (int8_t)p->shift;
  const int row_ok = (int)(rr_rows_fields(1, &p->mult, &sh8, &p->badd, 1, &corr, amax, &mf, &blo, &bhi) & 1u);
  rp.m = _mm512_set1_ps(mf), rp.blo = _mm512_set1_ps(blo), rp.bhi = _mm512_set1_ps(bhi);
  const int flt = row_ok && corr > -((int64_t)1 << 30) && corr < ((int64_t)1 << 30);
  rp.vc = _mm512_set1_epi32(flt ? (int32_t)corr : 0);
  const int full = p->lo == -128 && p->hi == 127, chk = (corr < 0 ? -corr : corr) + amax >= Q8_FLT_MAX_SUM;
  for (int64_t oy0 = 0; oy0 < p->oh; oy0 += band) {
    const int64_t oy1 = oy0 + band < p->oh ? oy0 + band : p->oh;
    const int64_t n = ((oy1 - oy0 - 1) * L + p->ow + 63) / 64 * 64; /* computed columns */
    /* no dropped columns and room for the rounding: straight into y */
    const int direct = L == p->ow && oy0 * L + n <= p->oh * L;
    int8_t *out = direct ? p->y + oy0 * L : tn;
    if (sw == 1) dwv_cols(buf, koff, kh, ng, wd, idx, oy0 * L, n, p, &rp, flt, full, chk, out, 1);
    else dwv_cols(buf, koff, kh, ng, wd, idx, oy0 * L, n, p, &rp, flt, full, chk, out, 2);
    if (!direct) /* the rows' first ow columns (64-byte masked copies: a memcpy call per row showed) */
      for (int64_t oy = oy0; oy < oy1; oy++)
        for (int64_t q = 0; q < p->ow; q += 64) {
          const __mmask64 m = p->ow - q >= 64 ? ~(__mmask64)0 : (~(__mmask64)0) >> (64 - (p->ow - q));
          _mm512_mask_storeu_epi8(p->y + oy * p->ow + q, m, _mm512_maskz_loadu_epi8(m, tn + (oy - oy0) * L + q));
        }
  }
}

const oa_q8_isa_t oa_q8_avx512_vnni_isa = {.name = "avx512_vnni", .mr = Q8V_MR, .nr = Q8V_NR, .kg = 4, .wide = 0,
                                           .gemm = q8_vnni_gemm, .gemm_rows = q8_vnni_gemm_rows,
                                           .requant = oa_q8_avx512_requant,
                                           .requant_pc = oa_q8_avx512_requant_pc,
                                           .requant_rows = oa_q8_avx512_requant_rows,
                                           .requant_f32 = oa_q8_avx512_requant_f32,
                                           .to_float = oa_q8_avx512_to_float, .dwp = oa_q8_avx512_dwp,
                                           .dwc = oa_q8_avx512_dwc, .dwv = q8_vnni_dwv,
                                           .dw = oa_q8_avx512_dw,
                                           .gemv = oa_q8_avx512_gemv, .gemv_u8 = oa_q8_avx512_vnni_gemv, .u8 = 1,
                                           .pack = q8_vnni_pack,
                                           .wsum = oa_q8_avx512_wsum, .variant = "avx512_vnni",
                                           .add = oa_q8_avx512_add, .quantize = oa_q8_avx512_quantize,
                                           .dequantize = oa_q8_avx512_dequantize};
#else
typedef int oa_q8_avx512_vnni_unused_t; /* not an AVX512-VNNI build of this file */
#endif
