/* RVV depthwise convolution, rv64gcv builds only.
 *   planar (oa_rvv_dw): opt/dwconv.inc on the 8-lane RVV backend of simd/vec.h (vl 8 at every
 *     VLEN: 8 outputs of a row per vector);
 *   channels-last (oa_rvv_dwc, oa_rvv_dwc_row): vector-length agnostic, strip-mined over the
 *     channels (vl = vsetvl(c - cb) at LMUL 4), every output pixel bias + taps in (kernel row,
 *     kernel column) order with fused multiply-adds; channels are independent lanes, so the
 *     results are the same at every VLEN. Taps outside the image add nothing. */
#if defined(__riscv_vector) && defined(OA_HAVE_RVV)
#define OA_SIMD_RVV 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define DW_FN oa_rvv_dw
#include "kernels/opt/dwconv.inc"

/* relu / clamp keeping NaN */
static inline vfloat32m4_t dwc_act(vfloat32m4_t v, const oa_uk_epi_t *e, size_t vl) {
  if (e->act == 1) return vfmerge_vfm_f32m4(vmflt_vf_f32m4_b8(v, 0.0f, vl), v, 0.0f, vl);
  if (e->act == 2) {
    v = vfmerge_vfm_f32m4(vmflt_vf_f32m4_b8(v, e->lo, vl), v, e->lo, vl);
    return vfmerge_vfm_f32m4(vmfgt_vf_f32m4_b8(v, e->hi, vl), v, e->hi, vl);
  }
  return v;
}

void oa_rvv_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr) {
  const int64_t c = p->c;
  for (int64_t ow = 0; ow < p->ow; ow++) {
    const int64_t iw0 = ow * p->sw - p->pw;
    /* the kernel columns inside the row: kw in [kw0, kw1) */
    int64_t kw0 = 0, kw1 = p->kw;
    while (kw0 < kw1 && iw0 + kw0 * p->dw < 0) kw0++;
    while (kw1 > kw0 && iw0 + (kw1 - 1) * p->dw >= p->w_in) kw1--;
    float *yp = yr + ow * c;
    for (int64_t cb = 0; cb < c;) {
      const size_t vl = vsetvl_e32m4((size_t)(c - cb));
      vfloat32m4_t acc = p->bias ? vle32_v_f32m4(p->bias + cb, vl) : vfmv_v_f_f32m4(0.0f, vl);
      for (int64_t kh = 0; kh < p->kh; kh++) {
        if (!rows[kh]) continue;
        const float *xr = rows[kh] + cb;
        const float *wr = p->w + kh * p->kw * c + cb;
        for (int64_t kw = kw0; kw < kw1; kw++)
          acc = vfmacc_vv_f32m4(acc, vle32_v_f32m4(wr + kw * c, vl), vle32_v_f32m4(xr + (iw0 + kw * p->dw) * c, vl),
                                vl);
      }
      vse32_v_f32m4(yp + cb, dwc_act(acc, &p->epi, vl), vl);
      cb += (int64_t)vl;
    }
  }
}

void oa_rvv_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1) {
  const float *rows[OA_DWC_MAX_KH];
  for (int64_t t = t0; t < t1; t++) {
    const int64_t n = t / p->oh, oh = t % p->oh;
    const float *xi = p->x + n * p->h * p->w_in * p->c;
    for (int64_t kh = 0; kh < p->kh; kh++) {
      const int64_t ih = oh * p->sh - p->ph + kh * p->dh;
      rows[kh] = ih >= 0 && ih < p->h ? xi + ih * p->w_in * p->c : NULL;
    }
    oa_rvv_dwc_row(p, rows, p->y + t * p->ow * p->c);
  }
}
#else
typedef int oa_rvv_dw_unused_t; /* ISO C: no empty translation unit */
#endif
