/* NEON depthwise convolution plane (4 outputs per vector): fast/dwconv_tmpl.inc. */
#include "../fast/fast.h"

#if defined(__ARM_NEON)
#include <arm_neon.h>

static inline float32x4_t act4(float32x4_t v, oa_uk_epi_t e) {
  if (e.act == 1) return vmaxq_f32(v, vdupq_n_f32(0.0f)); /* NaN stays NaN */
  if (e.act == 2) return vminq_f32(vmaxq_f32(v, vdupq_n_f32(e.lo)), vdupq_n_f32(e.hi));
  return v;
}

static inline void store_n(float *p, float32x4_t v, int64_t n) {
  float t[4];
  vst1q_f32(t, v);
  for (int64_t i = 0; i < n; i++) p[i] = t[i];
}

#define DW_FN oa_neon_dw
#define VW 4
#define VT float32x4_t
#define VSET1(x) vdupq_n_f32(x)
#define VLOADU(p) vld1q_f32(p)
#define VLOADS2(p) (vld2q_f32(p).val[0])
#if defined(__aarch64__)
#define VFMA(acc, a, b) vfmaq_f32((acc), (a), (b))
#else
#define VFMA(acc, a, b) vmlaq_f32((acc), (a), (b))
#endif
#define VSTOREU(p, v) vst1q_f32((p), (v))
#define VSTOREN(p, v, n) store_n((p), (v), (n))
#define VACT(v, e) act4((v), (e))
#include "../fast/dwconv_tmpl.inc"
#define DWC_FN oa_neon_dwc
#include "../fast/dwconv_nhwc_tmpl.inc"

#else
typedef int oa_neon_dw_unused_t; /* ISO C: no empty translation unit */
#endif
