/* Reference resizing: upsample_nearest2d (float32, int32, int64) and upsample_bilinear2d (float32),
 * NCHW.
 *
 * Index math is PyTorch's (ATen/native/UpSample.h), in float like its CPU kernels:
 * - scale (compute_scales_value<float>): 1 / scale_factor when a scale argument > 0 is given,
 *   else in / out; bilinear with align_corners uses (in - 1) / (out - 1) (0 when out == 1).
 * - nearest (nearest_idx): out == in copies, out == 2 * in halves the index, otherwise
 *   src = min(floor(dst * scale), in - 1).
 * - bilinear (compute_source_index_and_lambda): out == in copies; otherwise
 *   src = scale * dst (align_corners) or max(scale * (dst + 0.5) - 0.5, 0), i0 = min(floor(src),
 *   in - 1), i1 = i0 + (i0 < in - 1), lambda1 = clamp(src - i0, 0, 1), lambda0 = 1 - lambda1;
 *   out = (x00 * lw0 + x01 * lw1) * lh0 + (x10 * lw0 + x11 * lw1) * lh1. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* plan->params layout */
enum { P_PLANES, P_H, P_W, P_OH, P_OW, P_ALIGN };

/* floats[i], or 0 when the instruction stops before it; i is an OA_ARG_* index */
static double farg(const oa_op_call_t *call, uint32_t i) { return i < call->n_floats ? call->floats[i] : 0.0; }

/* resize_prepare checks both ops' scales by upsample_nearest2d's names: the layouts must agree */
_Static_assert(OA_ARG_UPSAMPLE_BILINEAR2D_SCALE_H == OA_ARG_UPSAMPLE_NEAREST2D_SCALE_H &&
                   OA_ARG_UPSAMPLE_BILINEAR2D_SCALE_W == OA_ARG_UPSAMPLE_NEAREST2D_SCALE_W &&
                   OA_ARG_UPSAMPLE_NEAREST2D_SCALE_W == OA_ARG_UPSAMPLE_NEAREST2D_SCALE_H + 1,
               "upsample_nearest2d / upsample_bilinear2d: scale_h, scale_w are no longer one shared run in opset.py");

static oa_status_t resize_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, uint64_t dtypes, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, dtypes, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 4, 4, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, y, 4, 4, "output 0", diag))) return st;
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1]) {
    int64_t want[4] = {x->shape[0], x->shape[1], y->shape[2], y->shape[3]};
    return oa_check_shape(call, y, want, 4, "output 0", diag);
  }
  for (int d = 2; d < 4; d++)
    if (x->shape[d] < 1 || y->shape[d] < 1) {
      char a[128], b[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 0 ('%s') %s and output 0 ('%s') %s must have non-empty spatial dims", x->name,
                          oa_shape_str(x, a, sizeof a), y->name, oa_shape_str(y, b, sizeof b));
    }
  for (uint32_t i = 0; i < 2; i++) {
    double s = farg(call, (uint32_t)OA_ARG_UPSAMPLE_NEAREST2D_SCALE_H + i);
    if (s != s || s > 1e30)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument %s = %g is out of range (expected a finite scale factor, <= 0 for none)",
                          i ? "scale_w" : "scale_h", s);
  }
  plan->params[P_PLANES] = x->shape[0] * x->shape[1];
  plan->params[P_H] = x->shape[2];
  plan->params[P_W] = x->shape[3];
  plan->params[P_OH] = y->shape[2];
  plan->params[P_OW] = y->shape[3];
  return OA_OK;
}

/* compute_scales_value<float> */
static float scales_value(double scale, int64_t in, int64_t out) {
  return scale > 0.0 ? (float)(1.0 / scale) : (float)in / (float)out;
}

/* min((int64)floorf(v), in - 1) for v >= 0 without an out-of-range float->int conversion */
static int64_t floor_index(float v, int64_t in) {
  float f = floorf(v);
  if (!(f < (float)(in - 1))) return in - 1; /* also NaN */
  return f > 0.0f ? (int64_t)f : 0;
}

/* ---- upsample_nearest2d ---------------------------------------------------------------------- */

oa_status_t oa_ref_upsample_nearest2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  return resize_prepare(call, plan, OA_DT_NUM, diag);
}

static int64_t nearest_idx(int64_t o, int64_t in, int64_t out, float scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  return floor_index((float)o * scale, in);
}

#define NEAREST_PLANES(T)                                                               \
  do {                                                                                  \
    const T *xs = (const T *)call->inputs[0]->data;                                     \
    T *ys = (T *)call->outputs[0]->data;                                                \
    for (int64_t c = 0; c < planes; c++) {                                              \
      const T *xp = xs + c * h * w;                                                     \
      T *yp = ys + c * oh_n * ow_n;                                                     \
      for (int64_t oh = 0; oh < oh_n; oh++) {                                           \
        const T *row = xp + nearest_idx(oh, h, oh_n, sh) * w;                           \
        for (int64_t ow = 0; ow < ow_n; ow++) yp[oh * ow_n + ow] = row[nearest_idx(ow, w, ow_n, sw)]; \
      }                                                                                 \
    }                                                                                   \
  } while (0)

oa_status_t oa_ref_upsample_nearest2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                          const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const float sh = scales_value(farg(call, OA_ARG_UPSAMPLE_NEAREST2D_SCALE_H), h, oh_n);
  const float sw = scales_value(farg(call, OA_ARG_UPSAMPLE_NEAREST2D_SCALE_W), w, ow_n);
  switch (call->inputs[0]->dtype) {
    case OA_DTYPE_FLOAT32: NEAREST_PLANES(float); break;
    case OA_DTYPE_INT32: NEAREST_PLANES(int32_t); break;
    case OA_DTYPE_INT64: NEAREST_PLANES(int64_t); break;
    default: break;
  }
  return OA_OK;
}

/* ---- upsample_bilinear2d --------------------------------------------------------------------- */

oa_status_t oa_ref_upsample_bilinear2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  const uint32_t a_align = OA_ARG_UPSAMPLE_BILINEAR2D_ALIGN_CORNERS;
  int64_t align = call->n_ints > a_align ? call->ints[a_align] : 0;
  if (align != 0 && align != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument align_corners = %lld is out of range (expected 0 or 1)",
                        (long long)align);
  if ((st = resize_prepare(call, plan, OA_DT_F32, diag))) return st;
  plan->params[P_ALIGN] = align;
  return OA_OK;
}

typedef struct {
  int64_t i0, i1;
  float l0, l1;
} lerp_t;

static float linear_scale(int64_t in, int64_t out, int align, double scale) {
  if (align) return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
  return scales_value(scale, in, out);
}

static lerp_t linear_index(int64_t o, int64_t in, int64_t out, int align, float scale) {
  lerp_t r;
  if (out == in) {
    r.i0 = r.i1 = o;
    r.l0 = 1.0f;
    r.l1 = 0.0f;
    return r;
  }
  float src;
  if (align) {
    src = scale * (float)o;
  } else {
    src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
  }
  r.i0 = floor_index(src, in);
  float lam = src - (float)r.i0;
  lam = lam < 0.0f ? 0.0f : lam; /* std::min(std::max(lam, 0), 1): NaN passes through */
  r.l1 = 1.0f < lam ? 1.0f : lam;
  r.i1 = r.i0 + (r.i0 < in - 1 ? 1 : 0);
  r.l0 = 1.0f - r.l1;
  return r;
}

oa_status_t oa_ref_upsample_bilinear2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const int align = (int)p[P_ALIGN];
  const float sh = linear_scale(h, oh_n, align, farg(call, OA_ARG_UPSAMPLE_BILINEAR2D_SCALE_H));
  const float sw = linear_scale(w, ow_n, align, farg(call, OA_ARG_UPSAMPLE_BILINEAR2D_SCALE_W));
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * h * w;
    float *yp = y + c * oh_n * ow_n;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      const lerp_t lh = linear_index(oh, h, oh_n, align, sh);
      const float *r0 = xp + lh.i0 * w, *r1 = xp + lh.i1 * w;
      for (int64_t ow = 0; ow < ow_n; ow++) {
        const lerp_t lw = linear_index(ow, w, ow_n, align, sw);
        float t0 = r0[lw.i0] * lw.l0 + r0[lw.i1] * lw.l1;
        float t1 = r1[lw.i0] * lw.l0 + r1[lw.i1] * lw.l1;
        yp[oh * ow_n + ow] = t0 * lh.l0 + t1 * lh.l1;
      }
    }
  }
  return OA_OK;
}

/* ==== 1-D / 3-D resizing, bicubic and antialiased (PyTorch's generic and separable CPU kernels) ====
 *
 * upsample_nearest_nd / upsample_linear_nd take [N, C, *S] with 1 to 3 spatial dims; PyTorch's
 * generic kernel (upsample_generic_Nd_kernel_impl) computes each dim's indices and weights on its
 * own and combines the taps from the first spatial dim inward, (t0 * w0 + t1 * w1) per dim:
 * - nearest: src = min(floor(dst * scale), in - 1) (no out == in / out == 2 * in cases here);
 *   nearest-exact: min(floor(max(scale * (dst + 0.5) - 0.5, 0) + 0.5), in - 1);
 * - linear: as upsample_bilinear2d per dim.
 * upsample_bicubic2d: src = scale * dst or scale * (dst + 0.5) - 0.5 (no clamp at 0), i = min(floor(src),
 *   in - 1), t = clamp(src - i, 0, 1), coefficients cubic_convolution2(t + 1), cubic_convolution1(t),
 *   cubic_convolution1(1 - t), cubic_convolution2(2 - t) with A = -0.75, taps i - 1 .. i + 2 clamped to
 *   the input; each row's 4 taps summed in order, then the 4 rows.
 * upsample_aa2d (_upsample_bilinear2d_aa / _upsample_bicubic2d_aa): separable, the width pass first
 *   (into scratch when the height changes too), then the height pass; per output o: support =
 *   (interp / 2) * max(scale, 1), center = scale * (o + 0.5), taps [xmin, xmin + xsize) with xmin =
 *   max(trunc(center - support + 0.5), 0), xsize = min(trunc(center + support + 0.5), in) - xmin,
 *   weights filter((j + xmin - center + 0.5) / max(scale, 1)) normalized by their sum; filter
 *   triangle (bilinear) or cubic convolution with A = -0.5 (bicubic). */

/* plan->params layout of these ops: the spatial sizes as [D, H, W] with missing leading dims 1 */
enum { Q_PLANES, Q_NSP, Q_D, Q_H, Q_W, Q_OD, Q_OH, Q_OW, Q_ALIGN, Q_MODE, Q_KW, Q_KH };

_Static_assert(OA_ARG_UPSAMPLE_LINEAR_ND_SCALE_D == OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_D &&
                   OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_H == OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_D + 1 &&
                   OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_W == OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_D + 2 &&
                   OA_ARG_UPSAMPLE_BICUBIC2D_SCALE_W == OA_ARG_UPSAMPLE_BICUBIC2D_SCALE_H + 1 &&
                   OA_ARG_UPSAMPLE_AA2D_SCALE_W == OA_ARG_UPSAMPLE_AA2D_SCALE_H + 1,
               "the resize ops' scale arguments are no longer runs of floats in opset.py");

static int64_t iarg_r(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

/* Input [N, C, *S] with min_sp to max_sp spatial dims, output [N, C, *S'] with non-empty S, S';
 * the scale arguments scale0 .. scale0 + n_scales - 1 belong to the last n_scales dims. */
static oa_status_t nd_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, uint64_t dtypes, int32_t min_sp,
                              int32_t max_sp, uint32_t scale0, uint32_t n_scales, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, dtypes, "input 0 (input)", diag)) ||
      (st = oa_check_same_dtype(call, y, x, "output 0", diag)) ||
      (st = oa_check_ndim(call, x, min_sp + 2, max_sp + 2, "input 0 (input)", diag)) ||
      (st = oa_check_ndim(call, y, x->ndim, x->ndim, "output 0", diag)))
    return st;
  int32_t nsp = x->ndim - 2;
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1]) {
    int64_t want[5];
    for (int32_t d = 0; d < x->ndim; d++) want[d] = d < 2 ? x->shape[d] : y->shape[d];
    return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
  }
  int64_t *p = plan->params;
  for (int32_t i = 0; i < 3; i++) {
    int32_t d = i - (3 - nsp) + 2; /* tensor dim of spatial slot i, < 2 when the slot is missing */
    p[Q_D + i] = d >= 2 ? x->shape[d] : 1;
    p[Q_OD + i] = d >= 2 ? y->shape[d] : 1;
    if (p[Q_D + i] < 1 || p[Q_OD + i] < 1) {
      char a[128], b[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 0 ('%s') %s and output 0 ('%s') %s must have non-empty spatial dims", x->name,
                          oa_shape_str(x, a, sizeof a), y->name, oa_shape_str(y, b, sizeof b));
    }
  }
  static const char *const names[] = {"scale_d", "scale_h", "scale_w"};
  for (uint32_t i = 0; i < n_scales; i++) {
    double s = farg(call, scale0 + i);
    if (s != s || s > 1e30)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument %s = %g is out of range (expected a finite scale factor, <= 0 for none)",
                          names[3 - n_scales + i], s);
  }
  p[Q_PLANES] = x->shape[0] * x->shape[1];
  p[Q_NSP] = nsp;
  return OA_OK;
}

/* the scale argument of spatial slot i (0 d, 1 h, 2 w) */
static double slot_scale(const oa_op_call_t *call, uint32_t scale_d, int i) { return farg(call, scale_d + (uint32_t)i); }

static oa_status_t check_align(const oa_op_call_t *call, uint32_t at, oa_op_plan_t *plan, oa_diag_t *diag) {
  int64_t align = iarg_r(call, at);
  if (align != 0 && align != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument align_corners = %lld is out of range (expected 0 or 1)",
                        (long long)align);
  plan->params[Q_ALIGN] = align;
  return OA_OK;
}

/* ---- upsample_nearest_nd ---------------------------------------------------------------------- */

oa_status_t oa_ref_upsample_nearest_nd_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = nd_prepare(call, plan, OA_DT_F32 | OA_DT_U8, 1, 3, OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_D, 3, diag))) return st;
  int64_t exact = iarg_r(call, OA_ARG_UPSAMPLE_NEAREST_ND_EXACT);
  if (exact != 0 && exact != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument exact = %lld is out of range (expected 0 or 1)",
                        (long long)exact);
  plan->params[Q_MODE] = exact;
  return OA_OK;
}

/* HelperInterpNearest / HelperInterpNearestExact */
static int64_t nearest_nd_idx(int64_t o, int64_t in, float scale, int exact) {
  if (!exact) return floor_index(scale * (float)o, in);
  float src = scale * ((float)o + 0.5f);
  src = src - 0.5f;
  if (src < 0.0f) src = 0.0f;
  return floor_index((float)((double)src + 0.5), in); /* floorf(real_input_index + 0.5): a double sum */
}

#define NEAREST_ND(T)                                                                                  \
  do {                                                                                                 \
    const T *xs = (const T *)call->inputs[0]->data;                                                    \
    T *ys = (T *)call->outputs[0]->data;                                                               \
    for (int64_t c = 0; c < planes; c++)                                                               \
      for (int64_t od = 0; od < od_n; od++) {                                                          \
        int64_t id = nearest_nd_idx(od, d_n, sd, exact);                                               \
        for (int64_t oh = 0; oh < oh_n; oh++) {                                                        \
          const T *row = xs + ((c * d_n + id) * h_n + nearest_nd_idx(oh, h_n, sh, exact)) * w_n;       \
          T *out = ys + ((c * od_n + od) * oh_n + oh) * ow_n;                                          \
          for (int64_t ow = 0; ow < ow_n; ow++) out[ow] = row[nearest_nd_idx(ow, w_n, sw, exact)];     \
        }                                                                                              \
      }                                                                                                \
  } while (0)

oa_status_t oa_ref_upsample_nearest_nd_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[Q_PLANES], d_n = p[Q_D], h_n = p[Q_H], w_n = p[Q_W];
  const int64_t od_n = p[Q_OD], oh_n = p[Q_OH], ow_n = p[Q_OW];
  const int exact = (int)p[Q_MODE];
  const uint32_t s0 = OA_ARG_UPSAMPLE_NEAREST_ND_SCALE_D;
  const float sd = scales_value(slot_scale(call, s0, 0), d_n, od_n);
  const float sh = scales_value(slot_scale(call, s0, 1), h_n, oh_n);
  const float sw = scales_value(slot_scale(call, s0, 2), w_n, ow_n);
  if (call->inputs[0]->dtype == OA_DTYPE_UINT8)
    NEAREST_ND(uint8_t);
  else
    NEAREST_ND(float);
  return OA_OK;
}

/* ---- upsample_linear_nd ----------------------------------------------------------------------- */

oa_status_t oa_ref_upsample_linear_nd_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = nd_prepare(call, plan, OA_DT_F32, 1, 3, OA_ARG_UPSAMPLE_LINEAR_ND_SCALE_D, 3, diag))) return st;
  return check_align(call, OA_ARG_UPSAMPLE_LINEAR_ND_ALIGN_CORNERS, plan, diag);
}

oa_status_t oa_ref_upsample_linear_nd_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                          const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[Q_PLANES], nsp = p[Q_NSP], d_n = p[Q_D], h_n = p[Q_H], w_n = p[Q_W];
  const int64_t od_n = p[Q_OD], oh_n = p[Q_OH], ow_n = p[Q_OW];
  const int align = (int)p[Q_ALIGN];
  const uint32_t s0 = OA_ARG_UPSAMPLE_LINEAR_ND_SCALE_D;
  const float sd = linear_scale(d_n, od_n, align, slot_scale(call, s0, 0));
  const float sh = linear_scale(h_n, oh_n, align, slot_scale(call, s0, 1));
  const float sw = linear_scale(w_n, ow_n, align, slot_scale(call, s0, 2));
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * d_n * h_n * w_n;
    for (int64_t od = 0; od < od_n; od++) {
      const lerp_t ld = linear_index(od, d_n, od_n, align, sd);
      for (int64_t oh = 0; oh < oh_n; oh++) {
        const lerp_t lh = linear_index(oh, h_n, oh_n, align, sh);
        float *out = y + ((c * od_n + od) * oh_n + oh) * ow_n;
        for (int64_t ow = 0; ow < ow_n; ow++) {
          const lerp_t lw = linear_index(ow, w_n, ow_n, align, sw);
          /* the taps of the real dims only: a missing dim is not interpolated (1 * t + 0 * t would
             turn an infinite t into NaN) */
          float t[2][2];
          for (int a = 0; a < (nsp > 2 ? 2 : 1); a++)
            for (int b = 0; b < (nsp > 1 ? 2 : 1); b++) {
              const float *row = xp + ((a ? ld.i1 : ld.i0) * h_n + (b ? lh.i1 : lh.i0)) * w_n;
              float u0 = row[lw.i0] * lw.l0, u1 = row[lw.i1] * lw.l1;
              t[a][b] = u0 + u1;
            }
          float v[2];
          for (int a = 0; a < (nsp > 2 ? 2 : 1); a++) {
            if (nsp > 1) {
              float u0 = t[a][0] * lh.l0, u1 = t[a][1] * lh.l1;
              v[a] = u0 + u1;
            } else {
              v[a] = t[a][0];
            }
          }
          if (nsp > 2) {
            float u0 = v[0] * ld.l0, u1 = v[1] * ld.l1;
            out[ow] = u0 + u1;
          } else {
            out[ow] = v[0];
          }
        }
      }
    }
  }
  return OA_OK;
}

/* ---- upsample_bicubic2d ----------------------------------------------------------------------- */

/* cubic_convolution1 / 2 of UpSample.h, in float, one rounding per operation (no contraction) */
static float cubic1(float x, float a) {
  float t = (a + 2.0f) * x;
  t = t - (a + 3.0f);
  t = t * x;
  t = t * x;
  return t + 1.0f;
}
static float cubic2(float x, float a) {
  float t = a * x;
  t = t - 5.0f * a;
  t = t * x;
  t = t + 8.0f * a;
  t = t * x;
  return t - 4.0f * a;
}

typedef struct {
  int64_t i[4];
  float w[4];
} cubic_t;

static cubic_t cubic_index(int64_t o, int64_t in, int align, float scale) {
  cubic_t r;
  float src = align ? scale * (float)o : scale * ((float)o + 0.5f);
  if (!align) src = src - 0.5f;
  float f = floorf(src);
  int64_t i = (f >= -9.0e18f && f <= 9.0e18f) ? (int64_t)f : 0; /* src is finite and bounded by the sizes */
  if (i > in - 1) i = in - 1;
  float lam = src - (float)i;
  lam = lam < 0.0f ? 0.0f : lam;
  lam = 1.0f < lam ? 1.0f : lam;
  const float A = -0.75f;
  float x2 = 1.0f - lam;
  r.w[0] = cubic2(lam + 1.0f, A);
  r.w[1] = cubic1(lam, A);
  r.w[2] = cubic1(x2, A);
  r.w[3] = cubic2(x2 + 1.0f, A);
  for (int k = 0; k < 4; k++) {
    int64_t j = i + k - 1;
    r.i[k] = j < 0 ? 0 : (j > in - 1 ? in - 1 : j);
  }
  return r;
}

oa_status_t oa_ref_upsample_bicubic2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                              oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = nd_prepare(call, plan, OA_DT_F32, 2, 2, OA_ARG_UPSAMPLE_BICUBIC2D_SCALE_H, 2, diag))) return st;
  return check_align(call, OA_ARG_UPSAMPLE_BICUBIC2D_ALIGN_CORNERS, plan, diag);
}

oa_status_t oa_ref_upsample_bicubic2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                          const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[Q_PLANES], h_n = p[Q_H], w_n = p[Q_W], oh_n = p[Q_OH], ow_n = p[Q_OW];
  const int align = (int)p[Q_ALIGN];
  const float sh = linear_scale(h_n, oh_n, align, farg(call, OA_ARG_UPSAMPLE_BICUBIC2D_SCALE_H));
  const float sw = linear_scale(w_n, ow_n, align, farg(call, OA_ARG_UPSAMPLE_BICUBIC2D_SCALE_W));
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * h_n * w_n;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      const cubic_t ch = cubic_index(oh, h_n, align, sh);
      float *out = y + (c * oh_n + oh) * ow_n;
      for (int64_t ow = 0; ow < ow_n; ow++) {
        const cubic_t cw = cubic_index(ow, w_n, align, sw);
        float acc = 0.0f;
        for (int r = 0; r < 4; r++) {
          const float *row = xp + ch.i[r] * w_n;
          float t = row[cw.i[0]] * cw.w[0];
          for (int k = 1; k < 4; k++) {
            float u = row[cw.i[k]] * cw.w[k];
            t = t + u;
          }
          float u = t * ch.w[r];
          acc = r ? acc + u : u;
        }
        out[ow] = acc;
      }
    }
  }
  return OA_OK;
}

/* ---- upsample_aa2d ---------------------------------------------------------------------------- */

enum { AA_BILINEAR, AA_BICUBIC };

static float aa_filter(float x, int mode) {
  x = fabsf(x);
  if (mode == AA_BILINEAR) return x < 1.0f ? 1.0f - x : 0.0f;
  if (x < 1.0f) return cubic1(x, -0.5f);
  if (x < 2.0f) return cubic2(x, -0.5f);
  return 0.0f;
}

/* the filter's support (float, as PyTorch's scalar_t) and the taps it can need */
static float aa_support(float scale, int mode) {
  double half = mode == AA_BILINEAR ? 1.0 : 2.0; /* interp_size * 0.5 */
  return (float)(scale >= 1.0f ? half * (double)scale : half);
}
static int64_t aa_taps(float support) { return (int64_t)ceilf(support) * 2 + 1; }

/* Taps of output o: *xmin, *xsize and the normalized weights w[0 .. taps - 1] (zero past xsize). */
static void aa_weights(int64_t o, int64_t in, float scale, float support, int64_t taps, int mode, int64_t *xmin,
                       int64_t *xsize, float *w) {
  float center = (float)((double)scale * ((double)o + 0.5));
  float invscale = (float)(scale >= 1.0f ? 1.0 / (double)scale : 1.0);
  double lo = (double)(center - support) + 0.5, hi = (double)(center + support) + 0.5;
  int64_t mn = lo > 0.0 ? (int64_t)lo : 0; /* max((int64)lo, 0): truncation, and lo <= 0 gives 0 */
  int64_t mx = hi < (double)in ? (hi > 0.0 ? (int64_t)hi : 0) : in;
  int64_t n = mx - mn;
  n = n < 0 ? 0 : (n > taps ? taps : n);
  float total = 0.0f;
  for (int64_t j = 0; j < n; j++) {
    float d = (float)(j + mn) - center;
    w[j] = aa_filter((float)(((double)d + 0.5) * (double)invscale), mode);
    total += w[j];
  }
  if (total != 0.0f)
    for (int64_t j = 0; j < n; j++) w[j] = w[j] / total;
  for (int64_t j = n; j < taps; j++) w[j] = 0.0f;
  *xmin = mn;
  *xsize = n;
}

/* scratch: int64 ranges [2 * (OW + OH)], then float weights [OW * KW + OH * KH], then the width
 * pass's output [planes, H, OW] when both dims change */
static oa_status_t aa_scratch(oa_op_plan_t *plan, oa_diag_t *diag) {
  const int64_t *p = plan->params;
  uint64_t ranges = 2 * (uint64_t)(p[Q_OW] + p[Q_OH]);
  uint64_t weights = (uint64_t)p[Q_OW] * (uint64_t)p[Q_KW] + (uint64_t)p[Q_OH] * (uint64_t)p[Q_KH];
  uint64_t tmp = 0;
  if (p[Q_W] != p[Q_OW] && p[Q_H] != p[Q_OH]) {
    uint64_t plane = (uint64_t)p[Q_H] * (uint64_t)p[Q_OW];
    if (p[Q_PLANES] && plane > ((uint64_t)1 << 40) / (uint64_t)p[Q_PLANES])
      return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the intermediate of the antialiased resize is too large");
    tmp = plane * (uint64_t)p[Q_PLANES];
  }
  if (weights > ((uint64_t)1 << 40) || ranges > ((uint64_t)1 << 40))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the antialiased resize's filter tables are too large");
  plan->scratch_bytes = (size_t)(ranges * sizeof(int64_t) + (weights + tmp) * sizeof(float));
  return OA_OK;
}

oa_status_t oa_ref_upsample_aa2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                         oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = nd_prepare(call, plan, OA_DT_F32, 2, 2, OA_ARG_UPSAMPLE_AA2D_SCALE_H, 2, diag))) return st;
  if ((st = check_align(call, OA_ARG_UPSAMPLE_AA2D_ALIGN_CORNERS, plan, diag))) return st;
  int64_t mode = iarg_r(call, OA_ARG_UPSAMPLE_AA2D_MODE);
  if (mode != AA_BILINEAR && mode != AA_BICUBIC)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument mode = %lld is out of range (expected 0 bilinear or 1 "
                        "bicubic)", (long long)mode);
  int64_t *p = plan->params;
  p[Q_MODE] = mode;
  int align = (int)p[Q_ALIGN];
  float sh = linear_scale(p[Q_H], p[Q_OH], align, farg(call, OA_ARG_UPSAMPLE_AA2D_SCALE_H));
  float sw = linear_scale(p[Q_W], p[Q_OW], align, farg(call, OA_ARG_UPSAMPLE_AA2D_SCALE_W));
  float sup_h = aa_support(sh, (int)mode), sup_w = aa_support(sw, (int)mode);
  if (!(sup_h < 1e9f && sup_w < 1e9f))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the antialiased resize's scale factors are too large");
  p[Q_KW] = aa_taps(sup_w);
  p[Q_KH] = aa_taps(sup_h);
  return aa_scratch(plan, diag);
}

oa_status_t oa_ref_upsample_aa2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[Q_PLANES], h_n = p[Q_H], w_n = p[Q_W], oh_n = p[Q_OH], ow_n = p[Q_OW];
  const int64_t kw = p[Q_KW], kh = p[Q_KH];
  const int mode = (int)p[Q_MODE], align = (int)p[Q_ALIGN];
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  if (h_n == oh_n && w_n == ow_n) {
    if (planes * h_n * w_n > 0) memcpy(y, x, (size_t)(planes * h_n * w_n) * sizeof(float));
    return OA_OK;
  }
  int64_t *rw = (int64_t *)scratch, *rh = rw + 2 * ow_n;
  float *ww = (float *)(void *)(rh + 2 * oh_n), *wh = ww + ow_n * kw, *tmp = wh + oh_n * kh;
  const float sh = linear_scale(h_n, oh_n, align, farg(call, OA_ARG_UPSAMPLE_AA2D_SCALE_H));
  const float sw = linear_scale(w_n, ow_n, align, farg(call, OA_ARG_UPSAMPLE_AA2D_SCALE_W));
  const float sup_h = aa_support(sh, mode), sup_w = aa_support(sw, mode);
  for (int64_t o = 0; o < ow_n; o++) aa_weights(o, w_n, sw, sup_w, kw, mode, &rw[2 * o], &rw[2 * o + 1], ww + o * kw);
  for (int64_t o = 0; o < oh_n; o++) aa_weights(o, h_n, sh, sup_h, kh, mode, &rh[2 * o], &rh[2 * o + 1], wh + o * kh);
  /* width pass: [planes, H, W] -> [planes, H, OW] (into y when the height stays) */
  const float *src = x;
  if (w_n != ow_n) {
    float *dst = h_n != oh_n ? tmp : y;
    for (int64_t r = 0; r < planes * h_n; r++) {
      const float *row = x + r * w_n;
      for (int64_t o = 0; o < ow_n; o++) {
        int64_t mn = rw[2 * o], n = rw[2 * o + 1];
        const float *wt = ww + o * kw;
        float acc = (mn < w_n ? row[mn] : 0.0f) * wt[0]; /* PyTorch reads one tap even when xsize is 0 */
        for (int64_t j = 1; j < n; j++) {
          float u = row[mn + j] * wt[j];
          acc = acc + u;
        }
        dst[r * ow_n + o] = acc;
      }
    }
    src = dst;
  }
  /* height pass: [planes, H, OW] -> [planes, OH, OW] */
  if (h_n != oh_n) {
    for (int64_t c = 0; c < planes; c++) {
      const float *sp = src + c * h_n * ow_n;
      for (int64_t o = 0; o < oh_n; o++) {
        int64_t mn = rh[2 * o], n = rh[2 * o + 1];
        const float *wt = wh + o * kh;
        float *out = y + (c * oh_n + o) * ow_n;
        for (int64_t col = 0; col < ow_n; col++) {
          float acc = (mn < h_n ? sp[mn * ow_n + col] : 0.0f) * wt[0];
          for (int64_t j = 1; j < n; j++) {
            float u = sp[(mn + j) * ow_n + col] * wt[j];
            acc = acc + u;
          }
          out[col] = acc;
        }
      }
    }
  }
  return OA_OK;
}
