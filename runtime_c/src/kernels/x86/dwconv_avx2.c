/* AVX2+FMA depthwise convolution plane (8 outputs per vector): fast/dwconv_tmpl.inc.
 * Compiled with -mavx2 -mfma; only called after the CPU reported avx2 and fma. */
#include <immintrin.h>

#include "../fast/fast.h"

/* even elements p[0], p[2], ..., p[14] of 16 consecutive floats */
static inline __m256 load_s2(const float *p) {
  __m256 t = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* relu / clamp keeping NaN: max_ps(a, b) returns b when either is NaN */
static inline __m256 act8(__m256 v, oa_uk_epi_t e) {
  if (e.act == 1) return _mm256_max_ps(_mm256_setzero_ps(), v);
  if (e.act == 2) return _mm256_min_ps(_mm256_set1_ps(e.hi), _mm256_max_ps(_mm256_set1_ps(e.lo), v));
  return v;
}

/* the first n (1..7) lanes (masked-off lanes are not written) */
static inline void store_n(float *p, __m256 v, int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx), v);
}

#define DW_FN oa_avx2_dw
#define VW 8
#define VT __m256
#define VSET1(x) _mm256_set1_ps(x)
#define VLOADU(p) _mm256_loadu_ps(p)
#define VLOADS2(p) load_s2(p)
#define VFMA(acc, a, b) _mm256_fmadd_ps((a), (b), (acc))
#define VSTOREU(p, v) _mm256_storeu_ps((p), (v))
#define VSTOREN(p, v, n) store_n((p), (v), (n))
#define VACT(v, e) act8((v), (e))
#include "../fast/dwconv_tmpl.inc"
#define DWC_FN oa_avx2_dwc
#include "../fast/dwconv_nhwc_tmpl.inc"
