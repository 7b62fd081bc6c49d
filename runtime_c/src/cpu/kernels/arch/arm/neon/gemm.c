/* NEON micro-kernels.
 *   aarch64: 8x8 tile, 16 q accumulators; A is read 4 k at a time per row (8 q registers) and
 *            used by lane with fmla (the XNNPACK "ld128" / MLAS scheme); 2 B vectors per k.
 *   armv7:   4x8 tile, 8 q accumulators (16 q registers in all); A 2 k at a time in d registers,
 *            vmla by lane (not fused: VFPv4 NEON has vfma, but vmla is available on every
 *            NEON core and the accuracy difference is one rounding).
 * (tiles in gemm_neon_tile.inc), plus the GEMV of `linear` for a few rows; the depthwise plane is
 * in arch/arm/neon/dwconv.c. */
#include "kernels/opt/opt.h"

#if defined(__ARM_NEON)
#include <arm_neon.h>

void oa_neon_dw(const oa_dw_plane_t *p);
void oa_neon_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1);
void oa_neon_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr);

#if defined(__aarch64__)
#define MR 8
#define VFMA(acc, a, b) vfmaq_f32((acc), (a), (b))
#else
#define MR 4
#define VFMA(acc, a, b) vmlaq_f32((acc), (a), (b))
#endif

static inline float32x4_t act4(float32x4_t v, const oa_uk_epi_t *e) {
  /* vmaxq / vminq return NaN when an operand is NaN: NaN is kept, as the reference does */
  if (e->act == 1) return vmaxq_f32(v, vdupq_n_f32(0.0f));
  if (e->act == 2) return vminq_f32(vmaxq_f32(v, vdupq_n_f32(e->lo)), vdupq_n_f32(e->hi));
  return v;
}

static inline void store_row(float *c, float32x4_t x0, float32x4_t x1, uint32_t flags, const oa_uk_epi_t *e, int i) {
  if (flags & OA_UK_ACCUM) {
    x0 = vaddq_f32(x0, vld1q_f32(c));
    x1 = vaddq_f32(x1, vld1q_f32(c + 4));
  } else if (e->bias) {
    const float32x4_t b = vdupq_n_f32(e->bias[i]);
    x0 = vaddq_f32(x0, b);
    x1 = vaddq_f32(x1, b);
  } else if (e->bias_col) {
    x0 = vaddq_f32(x0, vld1q_f32(e->bias_col));
    x1 = vaddq_f32(x1, vld1q_f32(e->bias_col + 4));
  }
  if (flags & OA_UK_LAST) {
    x0 = act4(x0, e);
    x1 = act4(x1, e);
  }
  vst1q_f32(c, x0);
  vst1q_f32(c + 4, x1);
}

#if defined(__aarch64__)
static inline float hsum4(float32x4_t v) { return vaddvq_f32(v); }
#else
static inline float hsum4(float32x4_t v) {
  float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpadd_f32(s, s), 0);
}
#endif

#define TILE_FN tile_packed
#define TILE_IND 0
#include "gemm_tile.inc"
#undef TILE_FN
#undef TILE_IND
#define TILE_FN tile_ind
#define TILE_IND 1
#include "gemm_tile.inc"
#undef TILE_FN
#undef TILE_IND

void oa_neon_gemm(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                  int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  (void)bs; /* PW = NR: one panel */
  tile_packed(kc, a, lda, b, NULL, c, rs_c, cs_c, mr, nr, flags, epi);
}

void oa_neon_gemm_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                      int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  tile_ind(kc, a, lda, b, boff, c, rs_c, cs_c, mr, nr, flags, epi);
}

/* four weight rows against one input row: 2 accumulators per row, K in steps of 8 then 4, then
 * a scalar tail */
static void dot4(int64_t k, const float *x, const float *const w[4], float out[4]) {
  float32x4_t s[4][2];
  for (int r = 0; r < 4; r++) s[r][0] = s[r][1] = vdupq_n_f32(0.0f);
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    const float32x4_t x0 = vld1q_f32(x + p), x1 = vld1q_f32(x + p + 4);
    for (int r = 0; r < 4; r++) {
      s[r][0] = VFMA(s[r][0], vld1q_f32(w[r] + p), x0);
      s[r][1] = VFMA(s[r][1], vld1q_f32(w[r] + p + 4), x1);
    }
  }
  if (p + 4 <= k) {
    const float32x4_t x0 = vld1q_f32(x + p);
    for (int r = 0; r < 4; r++) s[r][0] = VFMA(s[r][0], vld1q_f32(w[r] + p), x0);
    p += 4;
  }
  for (int r = 0; r < 4; r++) {
    float t = hsum4(vaddq_f32(s[r][0], s[r][1]));
    for (int64_t q = p; q < k; q++) t += x[q] * w[r][q];
    out[r] = t;
  }
}

void oa_neon_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, const float *bias,
                  float *y, int64_t ldy, const oa_uk_epi_t *epi) {
  float s[4];
  for (int64_t j = 0; j < n; j += 4) {
    const float *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + (j + r < n ? j + r : n - 1) * k;
    for (int64_t i = 0; i < m; i++) {
      dot4(k, x + i * ldx, wr, s);
      float *yr = y + i * ldy + j;
      for (int r = 0; r < 4 && j + r < n; r++) yr[r] = oa_opt_act(bias ? s[r] + bias[j + r] : s[r], epi);
    }
  }
}

const oa_opt_isa_t oa_neon_isa = {"neon", MR, 8, 8, 4, oa_neon_gemm, oa_neon_gemm_ind, oa_pack_transposed, oa_neon_gemv,
                                   oa_neon_dw, oa_neon_dwc,
                                   oa_neon_dwc_row};

#else
typedef int oa_neon_unused_t; /* ISO C: no empty translation unit */
#endif
