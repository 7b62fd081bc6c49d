/* RVV 1.0 micro-kernels ("rvv"), rv64gcv builds only (OA_HAVE_RVV; clang 14's intrinsic names).
 *
 * GEMM tile MR x NR = 7 x 16: one LMUL-4 register group holds 16 floats at every VLEN >= 128
 * (VLMAX = 4 * VLEN / 32 >= 16), so vl is 16 on every RVV CPU: the export-time 16-wide weight
 * panels (OA_CPU_PANEL_BLOCK) stay valid, and every output is the same sum in the same order
 * whatever the VLEN (bit-identical results at 128, 256, 512 ...). 7 accumulators x 4 registers +
 * one B group x 4 = the 32 vector registers; each k step is one B load and 7 vfmacc.vf with the
 * A element as a scalar operand. Column tails store vl = nr lanes (vse32, or vsse32 for a column
 * stride), row tails re-read row mr - 1 and store mr rows, so no tile goes through a buffer.
 *
 * GEMV (`linear` for a few rows): 4 weight rows at once, 16-lane fused partial sums, the K tail
 * through a masked load (zeros past k), then the ordered reduction: fixed order at every VLEN.
 * Depthwise: planar planes from opt/dwconv.inc on simd/vec.h (dwconv.c); channels-last rows strip-
 * mined over the channels (dwconv.c). */
#include "kernels/opt/opt.h"

#if defined(__riscv_vector) && defined(OA_HAVE_RVV)
#include <riscv_vector.h>

#define MR 7
#define NR 16

void oa_rvv_dw(const oa_dw_plane_t *p);
void oa_rvv_dwc(const oa_dwc_t *p, int64_t t0, int64_t t1);
void oa_rvv_dwc_row(const oa_dwc_t *p, const float *const *rows, float *yr);

/* relu / clamp keeping NaN (compares are false for NaN; vfmax would drop it) */
static inline vfloat32m4_t rvv_act(vfloat32m4_t v, const oa_uk_epi_t *e, size_t vl) {
  if (e->act == 1) return vfmerge_vfm_f32m4(vmflt_vf_f32m4_b8(v, 0.0f, vl), v, 0.0f, vl);
  if (e->act == 2) {
    v = vfmerge_vfm_f32m4(vmflt_vf_f32m4_b8(v, e->lo, vl), v, e->lo, vl);
    return vfmerge_vfm_f32m4(vmfgt_vf_f32m4_b8(v, e->hi, vl), v, e->hi, vl);
  }
  return v;
}

/* row i of a tile: vl = nr columns at c (column stride cs_c) */
static inline void rvv_store_row(float *c, int64_t cs_c, vfloat32m4_t x, uint32_t flags, const oa_uk_epi_t *e,
                                 int i, size_t vl) {
  const ptrdiff_t stride = (ptrdiff_t)(cs_c * (int64_t)sizeof(float));
  if (flags & OA_UK_ACCUM)
    x = vfadd_vv_f32m4(x, cs_c == 1 ? vle32_v_f32m4(c, vl) : vlse32_v_f32m4(c, stride, vl), vl);
  else if (e->bias)
    x = vfadd_vf_f32m4(x, e->bias[i], vl);
  else if (e->bias_col)
    x = vfadd_vv_f32m4(x, vle32_v_f32m4(e->bias_col, vl), vl);
  if (flags & OA_UK_LAST) x = rvv_act(x, e, vl);
  if (cs_c == 1)
    vse32_v_f32m4(c, x, vl);
  else
    vsse32_v_f32m4(c, stride, x, vl);
}

/* B row p at b + p * NR (packed panel) or b + boff[p] (in place) */
static inline __attribute__((always_inline)) void rvv_tile(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                            int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags,
                            const oa_uk_epi_t *epi) {
  const size_t vl = vsetvl_e32m4(NR);
  const float *a0 = a;
  const float *a1 = mr > 1 ? a0 + lda : a0;
  const float *a2 = mr > 2 ? a1 + lda : a1;
  const float *a3 = mr > 3 ? a2 + lda : a2;
  const float *a4 = mr > 4 ? a3 + lda : a3;
  const float *a5 = mr > 5 ? a4 + lda : a4;
  const float *a6 = mr > 6 ? a5 + lda : a5;
  vfloat32m4_t c0 = vfmv_v_f_f32m4(0.0f, vl), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0;
  for (int64_t p = 0; p < kc; p++) {
    const vfloat32m4_t bv = vle32_v_f32m4(boff ? b + boff[p] : b + p * NR, vl);
    c0 = vfmacc_vf_f32m4(c0, a0[p], bv, vl);
    c1 = vfmacc_vf_f32m4(c1, a1[p], bv, vl);
    c2 = vfmacc_vf_f32m4(c2, a2[p], bv, vl);
    c3 = vfmacc_vf_f32m4(c3, a3[p], bv, vl);
    c4 = vfmacc_vf_f32m4(c4, a4[p], bv, vl);
    c5 = vfmacc_vf_f32m4(c5, a5[p], bv, vl);
    c6 = vfmacc_vf_f32m4(c6, a6[p], bv, vl);
  }
  const size_t vn = vsetvl_e32m4((size_t)nr);
  rvv_store_row(c, cs_c, c0, flags, epi, 0, vn);
  if (mr > 1) rvv_store_row(c + rs_c, cs_c, c1, flags, epi, 1, vn);
  if (mr > 2) rvv_store_row(c + 2 * rs_c, cs_c, c2, flags, epi, 2, vn);
  if (mr > 3) rvv_store_row(c + 3 * rs_c, cs_c, c3, flags, epi, 3, vn);
  if (mr > 4) rvv_store_row(c + 4 * rs_c, cs_c, c4, flags, epi, 4, vn);
  if (mr > 5) rvv_store_row(c + 5 * rs_c, cs_c, c5, flags, epi, 5, vn);
  if (mr > 6) rvv_store_row(c + 6 * rs_c, cs_c, c6, flags, epi, 6, vn);
}

void oa_rvv_gemm(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c, int64_t rs_c,
                 int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  (void)bs; /* PW = NR: one panel */
  rvv_tile(kc, a, lda, b, NULL, c, rs_c, cs_c, mr, nr, flags, epi);
}

void oa_rvv_gemm_ind(int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *boff, float *c,
                     int64_t rs_c, int64_t cs_c, int32_t mr, int32_t nr, uint32_t flags, const oa_uk_epi_t *epi) {
  rvv_tile(kc, a, lda, b, boff, c, rs_c, cs_c, mr, nr, flags, epi);
}

/* lanes [0, n) of 16 set (n <= 16) */
static inline vbool8_t rvv_first(int64_t n, size_t vl) {
  return vmsltu_vx_u32m4_b8(vid_v_u32m4(vl), (uint32_t)n, vl);
}

static inline float rvv_sum16(vfloat32m4_t v, size_t vl) {
  const vfloat32m1_t z = vfmv_v_f_f32m1(0.0f, 1);
  return vfmv_f_s_f32m1_f32(vfredosum_vs_f32m4_f32m1(z, v, z, vl));
}

/* four weight rows against one input row */
static void rvv_dot4(int64_t k, const float *x, const float *const w[4], float out[4]) {
  const size_t vl = vsetvl_e32m4(NR);
  const vfloat32m4_t z = vfmv_v_f_f32m4(0.0f, vl);
  vfloat32m4_t s0 = z, s1 = z, s2 = z, s3 = z;
  int64_t p = 0;
  for (; p + NR <= k; p += NR) {
    const vfloat32m4_t xv = vle32_v_f32m4(x + p, vl);
    s0 = vfmacc_vv_f32m4(s0, vle32_v_f32m4(w[0] + p, vl), xv, vl);
    s1 = vfmacc_vv_f32m4(s1, vle32_v_f32m4(w[1] + p, vl), xv, vl);
    s2 = vfmacc_vv_f32m4(s2, vle32_v_f32m4(w[2] + p, vl), xv, vl);
    s3 = vfmacc_vv_f32m4(s3, vle32_v_f32m4(w[3] + p, vl), xv, vl);
  }
  if (p < k) { /* masked-off lanes are not read and load as 0 */
    const vbool8_t m = rvv_first(k - p, vl);
    const vfloat32m4_t xv = vle32_v_f32m4_m(m, z, x + p, vl);
    s0 = vfmacc_vv_f32m4(s0, vle32_v_f32m4_m(m, z, w[0] + p, vl), xv, vl);
    s1 = vfmacc_vv_f32m4(s1, vle32_v_f32m4_m(m, z, w[1] + p, vl), xv, vl);
    s2 = vfmacc_vv_f32m4(s2, vle32_v_f32m4_m(m, z, w[2] + p, vl), xv, vl);
    s3 = vfmacc_vv_f32m4(s3, vle32_v_f32m4_m(m, z, w[3] + p, vl), xv, vl);
  }
  out[0] = rvv_sum16(s0, vl);
  out[1] = rvv_sum16(s1, vl);
  out[2] = rvv_sum16(s2, vl);
  out[3] = rvv_sum16(s3, vl);
}

void oa_rvv_gemv(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w, const float *bias,
                 float *y, int64_t ldy, const oa_uk_epi_t *epi) {
  float s[4];
  for (int64_t j = 0; j < n; j += 4) {
    const float *wr[4];
    for (int r = 0; r < 4; r++) wr[r] = w + (j + r < n ? j + r : n - 1) * k;
    for (int64_t i = 0; i < m; i++) {
      rvv_dot4(k, x + i * ldx, wr, s);
      float *yr = y + i * ldy + j;
      for (int r = 0; r < 4 && j + r < n; r++) yr[r] = oa_opt_act(bias ? s[r] + bias[j + r] : s[r], epi);
    }
  }
}

/* oa_pack_transposed for NR 16: each panel row is one strided load across 16 rows of b (rows past
 * nc masked off: not read, zero) */
void oa_rvv_pack_t(const void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int32_t nr, float *dst) {
  if (nr != NR) {
    oa_pack_transposed(ctx, k0, kc, j0, nc, nr, dst);
    return;
  }
  const oa_pack_dense_t *pd = (const oa_pack_dense_t *)ctx;
  const size_t vl = vsetvl_e32m4(NR);
  const vfloat32m4_t z = vfmv_v_f_f32m4(0.0f, vl);
  const ptrdiff_t stride = (ptrdiff_t)(pd->ldb * (int64_t)sizeof(float));
  for (int64_t q = 0; q * NR < nc; q++) {
    const int64_t jq = j0 + q * NR, wq = nc - q * NR < NR ? nc - q * NR : NR;
    const vbool8_t m = rvv_first(wq, vl);
    const float *s = pd->b + jq * pd->ldb + k0;
    float *d = dst + q * kc * NR;
    for (int64_t p = 0; p < kc; p++) vse32_v_f32m4(d + p * NR, vlse32_v_f32m4_m(m, z, s + p, stride, vl), vl);
  }
}

const oa_opt_isa_t oa_rvv_isa = {"rvv",         MR,          NR,         NR,         8, oa_rvv_gemm, oa_rvv_gemm_ind, oa_rvv_pack_t,
                                 oa_rvv_gemv,   oa_rvv_dw,   oa_rvv_dwc, oa_rvv_dwc_row};

#else
typedef int oa_rvv_unused_t; /* ISO C: no empty translation unit */
#endif
