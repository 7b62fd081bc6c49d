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
