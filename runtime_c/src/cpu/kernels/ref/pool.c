/* Reference pooling: max_pool2d (float32, int32, int64, int8, uint8), avg_pool2d, adaptive_avg_pool2d,
 * adaptive_max_pool2d.
 *
 * Input [N, C, H, W] or [C, H, W]; every leading dim is a plane index. Window and output-size
 * rules follow PyTorch's CPU kernels (Pool.h pooling_output_shape, MaxPoolKernel.cpp,
 * AvgPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp): ceil_mode drops a last window that would start in
 * the right padding; max pooling propagates NaN; an empty max window gives -inf (lowest for ints);
 * averages sum in double in window order. The max ops' optional second output holds each max's
 * int64 index h * W + w in its input plane, chosen as PyTorch's CPU kernel does: the first
 * maximum in window order, or the last NaN (a NaN always takes the index); the window's first
 * element when nothing beats the initial -inf. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

#define POOL_ARG_MAX ((int64_t)1 << 30)

/* plan->params layout */
enum { P_PLANES, P_H, P_W, P_OH, P_OW, P_KH, P_KW, P_SH, P_SW, P_PH, P_PW, P_DH, P_DW, P_CIP, P_DIV };

/* ints[i], or 0 when the instruction stops before it (absent trailing arguments); i is an OA_ARG_* index */
static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

/* window_prepare reads kernel, stride, padding (and dilation) as one run from OA_ARG_MAX_POOL2D_KERNEL_H, in
 * the order of its names[] and plan->params P_KH..P_DW; avg_pool2d shares the run up to the padding. */
#define WIN_ARG(k) ((uint32_t)OA_ARG_MAX_POOL2D_KERNEL_H + (k))
_Static_assert(OA_ARG_MAX_POOL2D_KERNEL_W == OA_ARG_MAX_POOL2D_KERNEL_H + 1 &&
                   OA_ARG_MAX_POOL2D_STRIDE_H == OA_ARG_MAX_POOL2D_KERNEL_H + 2 &&
                   OA_ARG_MAX_POOL2D_STRIDE_W == OA_ARG_MAX_POOL2D_KERNEL_H + 3 &&
                   OA_ARG_MAX_POOL2D_PAD_H == OA_ARG_MAX_POOL2D_KERNEL_H + 4 &&
                   OA_ARG_MAX_POOL2D_PAD_W == OA_ARG_MAX_POOL2D_KERNEL_H + 5 &&
                   OA_ARG_MAX_POOL2D_DILATION_H == OA_ARG_MAX_POOL2D_KERNEL_H + 6 &&
                   OA_ARG_MAX_POOL2D_DILATION_W == OA_ARG_MAX_POOL2D_KERNEL_H + 7,
               "max_pool2d: kernel, stride, padding, dilation are no longer one run of ints in opset.py");
_Static_assert(OA_ARG_AVG_POOL2D_KERNEL_H == OA_ARG_MAX_POOL2D_KERNEL_H &&
                   OA_ARG_AVG_POOL2D_KERNEL_W == OA_ARG_MAX_POOL2D_KERNEL_W &&
                   OA_ARG_AVG_POOL2D_STRIDE_H == OA_ARG_MAX_POOL2D_STRIDE_H &&
                   OA_ARG_AVG_POOL2D_STRIDE_W == OA_ARG_MAX_POOL2D_STRIDE_W &&
                   OA_ARG_AVG_POOL2D_PAD_H == OA_ARG_MAX_POOL2D_PAD_H &&
                   OA_ARG_AVG_POOL2D_PAD_W == OA_ARG_MAX_POOL2D_PAD_W,
               "avg_pool2d and max_pool2d no longer share the kernel, stride, padding layout in opset.py");

/* The max ops' outputs: out, and optionally indices (int64, out's shape). */
static oa_status_t check_max_outputs(const oa_op_call_t *call, uint32_t min_ints, oa_diag_t *diag) {
  if (call->n_outputs != 1 && call->n_outputs != 2)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected 1 or 2 outputs (out, indices), received %u",
                        call->n_outputs);
  return oa_check_arity(call, 1, 1, call->n_outputs, min_ints, 0, diag);
}
static oa_status_t check_indices(const oa_op_call_t *call, oa_diag_t *diag) {
  if (call->n_outputs < 2) return OA_OK;
  oa_status_t st = oa_check_dtype(call, call->outputs[1], OA_DT_I64, "output 1 (indices)", diag);
  if (st) return st;
  return oa_check_same_shape(call, call->outputs[1], call->outputs[0], "output 1 (indices)", diag);
}

/* Input [*, H, W] (3 or 4 dims), output [*, OH, OW] with the same leading dims. */
static oa_status_t check_io(const oa_op_call_t *call, uint64_t dtypes, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, dtypes, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  return oa_check_ndim(call, x, 3, 4, "input 0 (self)", diag);
}

static oa_status_t check_out(const oa_op_call_t *call, oa_op_plan_t *plan, int64_t oh, int64_t ow, oa_diag_t *diag) {
  const oa_tensor_t *x = call->inputs[0];
  int64_t want[4];
  for (int32_t d = 0; d < x->ndim - 2; d++) want[d] = x->shape[d];
  want[x->ndim - 2] = oh;
  want[x->ndim - 1] = ow;
  oa_status_t st = oa_check_shape(call, call->outputs[0], want, x->ndim, "output 0", diag);
  if (st) return st;
  int64_t planes = 1;
  for (int32_t d = 0; d < x->ndim - 2; d++) planes *= x->shape[d];
  plan->params[P_PLANES] = planes;
  plan->params[P_H] = x->shape[x->ndim - 2];
  plan->params[P_W] = x->shape[x->ndim - 1];
  plan->params[P_OH] = oh;
  plan->params[P_OW] = ow;
  return OA_OK;
}

/* kernel, stride, padding (and dilation) arguments at WIN_ARG(0..), PyTorch's pool2d_shape_check. */
static oa_status_t window_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, int has_dilation, int ceil_mode,
                                  oa_diag_t *diag) {
  oa_status_t st;
  static const char *const names[] = {"kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w",
                                      "dilation_h", "dilation_w"};
  int64_t v[8];
  for (uint32_t i = 0; i < 8; i++) {
    if (i >= 6 && !has_dilation) {
      v[i] = 1;
      continue;
    }
    if (i == 4 || i == 5) {
      /* pad <= kernel / 2 */
      if ((st = oa_check_int_arg(call, WIN_ARG(i), names[i], 0, v[i - 4] / 2, diag))) return st;
    } else if ((st = oa_check_int_arg(call, WIN_ARG(i), names[i], 1, POOL_ARG_MAX, diag))) {
      return st;
    }
    v[i] = iarg(call, WIN_ARG(i));
  }
  const oa_tensor_t *x = call->inputs[0];
  int64_t in[2] = {x->shape[x->ndim - 2], x->shape[x->ndim - 1]};
  int64_t out[2];
  for (int i = 0; i < 2; i++) {
    out[i] = oa_pool_out_size(in[i], v[i], v[4 + i], v[2 + i], v[6 + i], ceil_mode);
    if (out[i] < 1) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 0 (self) ('%s'): %s is too small for kernel %lld x %lld (pad %lld, %lld, dilation "
                          "%lld, %lld): output size %lld along dim %d",
                          x->name, oa_shape_str(x, s, sizeof s), (long long)v[0], (long long)v[1], (long long)v[4],
                          (long long)v[5], (long long)v[6], (long long)v[7], (long long)out[i], x->ndim - 2 + i);
    }
  }
  if ((st = check_out(call, plan, out[0], out[1], diag))) return st;
  for (int i = 0; i < 8; i++) plan->params[P_KH + i] = v[i];
  return OA_OK;
}

/* ---- max_pool2d ------------------------------------------------------------------------------ */

oa_status_t oa_ref_max_pool2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_max_outputs(call, 8, diag))) return st;
  if ((st = check_io(call, OA_DT_NUM | OA_DT_I8 | OA_DT_U8, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_MAX_POOL2D_CEIL_MODE, "ceil_mode", 0, 1, diag))) return st;
  if ((st = window_prepare(call, plan, 1, (int)iarg(call, OA_ARG_MAX_POOL2D_CEIL_MODE), diag))) return st;
  return check_indices(call, diag);
}

/* One output plane: the window of (oh, ow) covers rows ih0, ih0 + dh, ... below ih1. */
#define MAX_POOL_PLANE(T, INIT, IS_NAN)                                                        \
  do {                                                                                         \
    for (int64_t oh = 0; oh < oh_n; oh++) {                                                    \
      int64_t ih0 = oh * sh - ph, ih1 = ih0 + (kh - 1) * dh + 1;                               \
      if (ih1 > h) ih1 = h;                                                                    \
      if (ih0 < 0) ih0 += (-ih0 + dh - 1) / dh * dh;                                           \
      for (int64_t ow = 0; ow < ow_n; ow++) {                                                  \
        int64_t iw0 = ow * sw - pw, iw1 = iw0 + (kw - 1) * dw + 1;                             \
        if (iw1 > w) iw1 = w;                                                                  \
        if (iw0 < 0) iw0 += (-iw0 + dw - 1) / dw * dw;                                         \
        T m = (INIT);                                                                          \
        int64_t mi = ih0 * w + iw0;                                                            \
        for (int64_t ih = ih0; ih < ih1; ih += dh) {                                           \
          const T *row = xp + ih * w;                                                          \
          for (int64_t iw = iw0; iw < iw1; iw += dw) {                                         \
            T val = row[iw];                                                                   \
            if (val > m || IS_NAN(val)) {                                                      \
              m = val;                                                                         \
              mi = ih * w + iw;                                                                \
            }                                                                                  \
          }                                                                                    \
        }                                                                                      \
        yp[oh * ow_n + ow] = m;                                                                \
        if (ip) ip[oh * ow_n + ow] = mi;                                                       \
      }                                                                                        \
    }                                                                                          \
  } while (0)

#define POOL_ISNAN(v) ((v) != (v))
#define POOL_NEVER(v) 0

oa_status_t oa_ref_max_pool2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t kh = p[P_KH], kw = p[P_KW], sh = p[P_SH], sw = p[P_SW], ph = p[P_PH], pw = p[P_PW];
  const int64_t dh = p[P_DH], dw = p[P_DW];
  const oa_tensor_t *x = call->inputs[0];
  for (int64_t c = 0; c < planes; c++) {
    int64_t *ip = call->n_outputs > 1 ? (int64_t *)call->outputs[1]->data + c * oh_n * ow_n : NULL;
    switch (x->dtype) {
      case OA_DTYPE_FLOAT32: {
        const float *xp = (const float *)x->data + c * h * w;
        float *yp = (float *)call->outputs[0]->data + c * oh_n * ow_n;
        MAX_POOL_PLANE(float, -INFINITY, POOL_ISNAN);
        break;
      }
      case OA_DTYPE_INT32: {
        const int32_t *xp = (const int32_t *)x->data + c * h * w;
        int32_t *yp = (int32_t *)call->outputs[0]->data + c * oh_n * ow_n;
        MAX_POOL_PLANE(int32_t, INT32_MIN, POOL_NEVER);
        break;
      }
      case OA_DTYPE_INT64: {
        const int64_t *xp = (const int64_t *)x->data + c * h * w;
        int64_t *yp = (int64_t *)call->outputs[0]->data + c * oh_n * ow_n;
        MAX_POOL_PLANE(int64_t, INT64_MIN, POOL_NEVER);
        break;
      }
      case OA_DTYPE_INT8: { /* quantized: max commutes with the monotonic dequantization */
        const int8_t *xp = (const int8_t *)x->data + c * h * w;
        int8_t *yp = (int8_t *)call->outputs[0]->data + c * oh_n * ow_n;
        MAX_POOL_PLANE(int8_t, INT8_MIN, POOL_NEVER);
        break;
      }
      case OA_DTYPE_UINT8: {
        const uint8_t *xp = (const uint8_t *)x->data + c * h * w;
        uint8_t *yp = (uint8_t *)call->outputs[0]->data + c * oh_n * ow_n;
        MAX_POOL_PLANE(uint8_t, 0, POOL_NEVER);
        break;
      }
      default: break;
    }
  }
  return OA_OK;
}

/* ---- avg_pool2d ------------------------------------------------------------------------------ */

oa_status_t oa_ref_avg_pool2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 6, 0, diag))) return st;
  if ((st = check_io(call, OA_DT_F32, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL2D_CEIL_MODE, "ceil_mode", 0, 1, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL2D_COUNT_INCLUDE_PAD, "count_include_pad", 0, 1, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL2D_DIVISOR_OVERRIDE, "divisor_override", -POOL_ARG_MAX, POOL_ARG_MAX, diag)))
    return st;
  /* ints: kernel(2) stride(2) pad(2) then ceil_mode: window_prepare reads the shared run, no dilation */
  if ((st = window_prepare(call, plan, 0, (int)iarg(call, OA_ARG_AVG_POOL2D_CEIL_MODE), diag))) return st;
  plan->params[P_CIP] = iarg(call, OA_ARG_AVG_POOL2D_COUNT_INCLUDE_PAD);
  plan->params[P_DIV] = iarg(call, OA_ARG_AVG_POOL2D_DIVISOR_OVERRIDE);
  return OA_OK;
}

oa_status_t oa_ref_avg_pool2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t kh = p[P_KH], kw = p[P_KW], sh = p[P_SH], sw = p[P_SW], ph = p[P_PH], pw = p[P_PW];
  const int64_t cip = p[P_CIP], divisor = p[P_DIV];
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * h * w;
    float *yp = y + c * oh_n * ow_n;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t ih0 = oh * sh - ph, iw0 = ow * sw - pw;
        int64_t ih1 = ih0 + kh < h + ph ? ih0 + kh : h + ph;
        int64_t iw1 = iw0 + kw < w + pw ? iw0 + kw : w + pw;
        int64_t pool_size = (ih1 - ih0) * (iw1 - iw0);
        if (ih0 < 0) ih0 = 0;
        if (iw0 < 0) iw0 = 0;
        if (ih1 > h) ih1 = h;
        if (iw1 > w) iw1 = w;
        if (ih0 >= ih1 || iw0 >= iw1) {
          yp[oh * ow_n + ow] = 0.0f;
          continue;
        }
        int64_t div = divisor ? divisor : (cip ? pool_size : (ih1 - ih0) * (iw1 - iw0));
        double sum = 0.0;
        for (int64_t ih = ih0; ih < ih1; ih++)
          for (int64_t iw = iw0; iw < iw1; iw++) sum += (double)xp[ih * w + iw];
        yp[oh * ow_n + ow] = (float)(sum / (double)div);
      }
    }
  }
  return OA_OK;
}

/* ---- adaptive_avg_pool2d --------------------------------------------------------------------- */

/* adaptive_avg_pool2d / adaptive_max_pool2d: the output size from the output tensor. */
static oa_status_t adaptive_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = check_io(call, OA_DT_F32, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, y, x->ndim, x->ndim, "output 0", diag))) return st;
  int64_t oh = y->shape[y->ndim - 2], ow = y->shape[y->ndim - 1];
  int64_t h = x->shape[x->ndim - 2], w = x->shape[x->ndim - 1];
  if ((oh > 0 && h < 1) || (ow > 0 && w < 1)) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 0 (self) ('%s'): spatial dims of %s must be non-empty",
                        x->name, oa_shape_str(x, s, sizeof s));
  }
  /* window bounds compute (o + 1) * in: keep it in int64 */
  if ((oh && h > ((int64_t)1 << 62) / oh) || (ow && w > ((int64_t)1 << 62) / ow))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "input and output sizes are too large for adaptive pooling");
  return check_out(call, plan, oh, ow, diag);
}

oa_status_t oa_ref_adaptive_avg_pool2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st = oa_check_arity(call, 1, 1, 1, 0, 0, diag);
  if (st) return st;
  return adaptive_prepare(call, plan, diag);
}

/* PyTorch's start_index / end_index: floor(o * in / out), ceil((o + 1) * in / out). */
static int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
static int64_t adaptive_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

oa_status_t oa_ref_adaptive_avg_pool2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * h * w;
    float *yp = y + c * oh_n * ow_n;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      int64_t ih0 = adaptive_start(oh, oh_n, h), ih1 = adaptive_end(oh, oh_n, h);
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t iw0 = adaptive_start(ow, ow_n, w), iw1 = adaptive_end(ow, ow_n, w);
        double sum = 0.0;
        for (int64_t ih = ih0; ih < ih1; ih++)
          for (int64_t iw = iw0; iw < iw1; iw++) sum += (double)xp[ih * w + iw];
        yp[oh * ow_n + ow] = (float)(sum / (double)(ih1 - ih0) / (double)(iw1 - iw0));
      }
    }
  }
  return OA_OK;
}

/* ---- adaptive_max_pool2d --------------------------------------------------------------------- */

oa_status_t oa_ref_adaptive_max_pool2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_max_outputs(call, 0, diag))) return st;
  if ((st = adaptive_prepare(call, plan, diag))) return st;
  return check_indices(call, diag);
}

oa_status_t oa_ref_adaptive_max_pool2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  int64_t *ind = call->n_outputs > 1 ? (int64_t *)call->outputs[1]->data : NULL;
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = x + c * h * w;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      int64_t ih0 = adaptive_start(oh, oh_n, h), ih1 = adaptive_end(oh, oh_n, h);
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t iw0 = adaptive_start(ow, ow_n, w), iw1 = adaptive_end(ow, ow_n, w);
        float m = -INFINITY;
        int64_t mi = ih0 * w + iw0;
        for (int64_t ih = ih0; ih < ih1; ih++)
          for (int64_t iw = iw0; iw < iw1; iw++) {
            float v = xp[ih * w + iw];
            if (v > m || v != v) {
              m = v;
              mi = ih * w + iw;
            }
          }
        int64_t o = (c * oh_n + oh) * ow_n + ow;
        y[o] = m;
        if (ind) ind[o] = mi;
      }
    }
  }
  return OA_OK;
}
