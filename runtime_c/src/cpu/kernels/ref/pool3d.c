/* Reference 3-D pooling: max_pool3d (float32, int32, int64, int8, uint8; optional int64 indices),
 * avg_pool3d (float32, int64), adaptive_avg_pool3d and adaptive_max_pool3d (float32; optional
 * indices).
 *
 * Input [N, C, D, H, W] or [C, D, H, W]; every leading dim is a plane index. Window, output-size and
 * order rules follow PyTorch's CPU kernels (Pool.h pooling_output_shape, MaxPoolKernel.cpp
 * cpu_max_pool, AvgPoolKernel.cpp cpu_avg_pool, AdaptiveAvgPoolKernel.cpp, AdaptiveMaxPoolKernel.cpp):
 * - max: a window's start skips the padding by whole dilation steps; value > max or value NaN
 *   replaces the max and its index (so the last NaN wins); an empty window gives -inf (the lowest
 *   value for ints) and the index of its first position;
 * - avg: window clipped to the padded input for count_include_pad, then to the input; float32
 *   sums in float32 in (d, h, w) order and divides once; an empty window gives 0;
 * - adaptive: window [floor(o * in / out), ceil((o + 1) * in / out)) per dim; the average divides
 *   the float32 sum by the window's depth, height and width in turn. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

#define POOL_ARG_MAX ((int64_t)1 << 30)

/* plan->params layout */
enum {
  P_PLANES, P_D, P_H, P_W, P_OD, P_OH, P_OW,
  P_KD, P_KH, P_KW, P_SD, P_SH, P_SW, P_PD, P_PH, P_PW, P_DD, P_DH, P_DW,
  P_CIP, P_DIV
};

/* ints[i], or 0 when the instruction stops before it (absent trailing arguments) */
static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

/* max_pool3d and avg_pool3d share the kernel, stride, padding run; max_pool3d's dilation follows it */
_Static_assert(OA_ARG_MAX_POOL3D_KERNEL_H == OA_ARG_MAX_POOL3D_KERNEL_D + 1 &&
                   OA_ARG_MAX_POOL3D_KERNEL_W == OA_ARG_MAX_POOL3D_KERNEL_D + 2 &&
                   OA_ARG_MAX_POOL3D_STRIDE_D == OA_ARG_MAX_POOL3D_KERNEL_D + 3 &&
                   OA_ARG_MAX_POOL3D_STRIDE_W == OA_ARG_MAX_POOL3D_KERNEL_D + 5 &&
                   OA_ARG_MAX_POOL3D_PAD_D == OA_ARG_MAX_POOL3D_KERNEL_D + 6 &&
                   OA_ARG_MAX_POOL3D_PAD_W == OA_ARG_MAX_POOL3D_KERNEL_D + 8 &&
                   OA_ARG_MAX_POOL3D_DILATION_D == OA_ARG_MAX_POOL3D_KERNEL_D + 9 &&
                   OA_ARG_MAX_POOL3D_DILATION_W == OA_ARG_MAX_POOL3D_KERNEL_D + 11,
               "max_pool3d: kernel, stride, padding, dilation are no longer one run of ints in opset.py");
_Static_assert(OA_ARG_AVG_POOL3D_KERNEL_D == OA_ARG_MAX_POOL3D_KERNEL_D &&
                   OA_ARG_AVG_POOL3D_STRIDE_D == OA_ARG_MAX_POOL3D_STRIDE_D &&
                   OA_ARG_AVG_POOL3D_PAD_D == OA_ARG_MAX_POOL3D_PAD_D &&
                   OA_ARG_AVG_POOL3D_PAD_W == OA_ARG_MAX_POOL3D_PAD_W,
               "avg_pool3d and max_pool3d no longer share the kernel, stride, padding layout in opset.py");
#define WIN_ARG(k) ((uint32_t)OA_ARG_MAX_POOL3D_KERNEL_D + (uint32_t)(k))

/* Input 0 [*, D, H, W] (4 or 5 dims) of `dtypes`, output 0 of its dtype; with `max_outputs` 2 an
 * optional output 1 (indices, int64). */
static oa_status_t check_io(const oa_op_call_t *call, uint64_t dtypes, uint32_t max_outputs, uint32_t min_ints,
                            oa_diag_t *diag) {
  oa_status_t st;
  if (call->n_outputs < 1 || call->n_outputs > max_outputs)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected 1 to %u outputs, received %u", max_outputs,
                        call->n_outputs);
  if ((st = oa_check_arity(call, 1, 1, call->n_outputs, min_ints, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, dtypes, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, call->outputs[0], x, "output 0", diag))) return st;
  if (call->n_outputs > 1 && (st = oa_check_dtype(call, call->outputs[1], OA_DT_I64, "output 1 (indices)", diag)))
    return st;
  return oa_check_ndim(call, x, 4, 5, "input 0 (input)", diag);
}

/* The outputs are [*, od, oh, ow] with the input's leading dims; fills the size params. */
static oa_status_t check_out(const oa_op_call_t *call, oa_op_plan_t *plan, const int64_t *o, oa_diag_t *diag) {
  const oa_tensor_t *x = call->inputs[0];
  int32_t nd = x->ndim;
  int64_t want[5], planes = 1;
  for (int32_t d = 0; d < nd - 3; d++) {
    want[d] = x->shape[d];
    planes *= x->shape[d];
  }
  for (int i = 0; i < 3; i++) want[nd - 3 + i] = o[i];
  oa_status_t st = oa_check_shape(call, call->outputs[0], want, nd, "output 0", diag);
  if (!st && call->n_outputs > 1) st = oa_check_shape(call, call->outputs[1], want, nd, "output 1 (indices)", diag);
  if (st) return st;
  plan->params[P_PLANES] = planes;
  for (int i = 0; i < 3; i++) {
    plan->params[P_D + i] = x->shape[nd - 3 + i];
    plan->params[P_OD + i] = o[i];
  }
  return OA_OK;
}

/* kernel, stride, padding (and dilation) at WIN_ARG(0..), PyTorch's pool3d_shape_check */
static oa_status_t window_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, int has_dilation, int ceil_mode,
                                  oa_diag_t *diag) {
  static const char *const names[] = {"kernel_d", "kernel_h", "kernel_w", "stride_d", "stride_h", "stride_w",
                                      "pad_d", "pad_h", "pad_w", "dilation_d", "dilation_h", "dilation_w"};
  oa_status_t st;
  int64_t v[12];
  for (uint32_t i = 0; i < 12; i++) {
    if (i >= 9 && !has_dilation) {
      v[i] = 1;
      continue;
    }
    if (i >= 6 && i < 9) /* pad <= kernel / 2 */
      st = oa_check_int_arg(call, WIN_ARG(i), names[i], 0, v[i - 6] / 2, diag);
    else
      st = oa_check_int_arg(call, WIN_ARG(i), names[i], 1, POOL_ARG_MAX, diag);
    if (st) return st;
    v[i] = iarg(call, WIN_ARG(i));
  }
  const oa_tensor_t *x = call->inputs[0];
  int64_t out[3];
  for (int i = 0; i < 3; i++) {
    int64_t in = x->shape[x->ndim - 3 + i];
    out[i] = oa_pool_out_size(in, v[i], v[6 + i], v[3 + i], v[9 + i], ceil_mode);
    if (out[i] < 1) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 0 (input) ('%s'): %s is too small for kernel %lld x %lld x %lld (pad %lld, %lld, %lld, "
                          "dilation %lld, %lld, %lld): output size %lld along dim %d",
                          x->name, oa_shape_str(x, s, sizeof s), (long long)v[0], (long long)v[1], (long long)v[2],
                          (long long)v[6], (long long)v[7], (long long)v[8], (long long)v[9], (long long)v[10],
                          (long long)v[11], (long long)out[i], x->ndim - 3 + i);
    }
  }
  if ((st = check_out(call, plan, out, diag))) return st;
  for (int i = 0; i < 12; i++) plan->params[P_KD + i] = v[i];
  return OA_OK;
}

/* The first in-range position of a window starting at s0 (>= s0 by whole steps of `dil`), and its end. */
static void window_range(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t dil, int64_t in, int64_t *lo,
                         int64_t *hi) {
  int64_t s0 = o * stride - pad, s1 = s0 + (k - 1) * dil + 1;
  if (s1 > in) s1 = in;
  if (s0 < 0) s0 += (-s0 + dil - 1) / dil * dil;
  *lo = s0;
  *hi = s1;
}

/* ---- max_pool3d ------------------------------------------------------------------------------ */

oa_status_t oa_ref_max_pool3d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_io(call, OA_DT_ALL & ~OA_DT_BOOL, 2, 12, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_MAX_POOL3D_CEIL_MODE, "ceil_mode", 0, 1, diag))) return st;
  return window_prepare(call, plan, 1, (int)iarg(call, OA_ARG_MAX_POOL3D_CEIL_MODE), diag);
}

/* One plane: T the element type, LOWEST the empty-window value, IS_NAN(v) the NaN test. */
#define MAX_POOL3D_PLANE(T, LOWEST, IS_NAN)                                                            \
  do {                                                                                                 \
    const T *xp = (const T *)x->data + c * d_n * h_n * w_n;                                            \
    T *yp = (T *)y->data + c * od_n * oh_n * ow_n;                                                     \
    for (int64_t od = 0; od < od_n; od++) {                                                            \
      int64_t d0, d1;                                                                                  \
      window_range(od, p[P_SD], p[P_PD], p[P_KD], p[P_DD], d_n, &d0, &d1);                             \
      for (int64_t oh = 0; oh < oh_n; oh++) {                                                          \
        int64_t h0, h1;                                                                                \
        window_range(oh, p[P_SH], p[P_PH], p[P_KH], p[P_DH], h_n, &h0, &h1);                           \
        for (int64_t ow = 0; ow < ow_n; ow++) {                                                        \
          int64_t w0, w1;                                                                              \
          window_range(ow, p[P_SW], p[P_PW], p[P_KW], p[P_DW], w_n, &w0, &w1);                         \
          T m = (LOWEST);                                                                              \
          int64_t mi = (d0 * h_n + h0) * w_n + w0;                                                     \
          for (int64_t id = d0; id < d1; id += p[P_DD])                                                \
            for (int64_t ih = h0; ih < h1; ih += p[P_DH])                                              \
              for (int64_t iw = w0; iw < w1; iw += p[P_DW]) {                                          \
                int64_t at = (id * h_n + ih) * w_n + iw;                                               \
                T v = xp[at];                                                                          \
                if (v > m || IS_NAN(v)) {                                                              \
                  m = v;                                                                               \
                  mi = at;                                                                             \
                }                                                                                      \
              }                                                                                        \
          int64_t o = (od * oh_n + oh) * ow_n + ow;                                                    \
          yp[o] = m;                                                                                   \
          if (ind) ind[c * od_n * oh_n * ow_n + o] = mi;                                               \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

#define POOL_ISNAN(v) ((v) != (v))
#define POOL_NEVER(v) 0

oa_status_t oa_ref_max_pool3d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], d_n = p[P_D], h_n = p[P_H], w_n = p[P_W];
  const int64_t od_n = p[P_OD], oh_n = p[P_OH], ow_n = p[P_OW];
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int64_t *ind = call->n_outputs > 1 ? (int64_t *)call->outputs[1]->data : NULL;
  for (int64_t c = 0; c < planes; c++) {
    switch (x->dtype) {
      case OA_DTYPE_FLOAT32: MAX_POOL3D_PLANE(float, -INFINITY, POOL_ISNAN); break;
      case OA_DTYPE_INT32: MAX_POOL3D_PLANE(int32_t, INT32_MIN, POOL_NEVER); break;
      case OA_DTYPE_INT64: MAX_POOL3D_PLANE(int64_t, INT64_MIN, POOL_NEVER); break;
      case OA_DTYPE_INT8: MAX_POOL3D_PLANE(int8_t, INT8_MIN, POOL_NEVER); break;
      case OA_DTYPE_UINT8: MAX_POOL3D_PLANE(uint8_t, 0, POOL_NEVER); break;
      default: break;
    }
  }
  return OA_OK;
}

/* ---- avg_pool3d ------------------------------------------------------------------------------ */

oa_status_t oa_ref_avg_pool3d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_io(call, OA_DT_F32 | OA_DT_I64, 1, 9, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL3D_CEIL_MODE, "ceil_mode", 0, 1, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL3D_COUNT_INCLUDE_PAD, "count_include_pad", 0, 1, diag))) return st;
  if ((st = oa_check_int_arg(call, OA_ARG_AVG_POOL3D_DIVISOR_OVERRIDE, "divisor_override", -POOL_ARG_MAX, POOL_ARG_MAX, diag)))
    return st;
  if ((st = window_prepare(call, plan, 0, (int)iarg(call, OA_ARG_AVG_POOL3D_CEIL_MODE), diag))) return st;
  plan->params[P_CIP] = iarg(call, OA_ARG_AVG_POOL3D_COUNT_INCLUDE_PAD);
  plan->params[P_DIV] = iarg(call, OA_ARG_AVG_POOL3D_DIVISOR_OVERRIDE);
  return OA_OK;
}

/* The int64 whose two's complement bits are u (without an implementation-defined conversion) */
static int64_t wrap_i64(uint64_t u) { return u > (uint64_t)INT64_MAX ? -(int64_t)(~u) - 1 : (int64_t)u; }

/* The window of output o along one dim: [*lo, *hi) in the input, *padded its length within the
 * padded input (count_include_pad's divisor factor). */
static void avg_range(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in, int64_t *lo, int64_t *hi,
                      int64_t *padded) {
  int64_t s0 = o * stride - pad, s1 = s0 + k < in + pad ? s0 + k : in + pad;
  *padded = s1 - s0;
  *lo = s0 < 0 ? 0 : s0;
  *hi = s1 > in ? in : s1;
}

oa_status_t oa_ref_avg_pool3d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], d_n = p[P_D], h_n = p[P_H], w_n = p[P_W];
  const int64_t od_n = p[P_OD], oh_n = p[P_OH], ow_n = p[P_OW];
  const int64_t cip = p[P_CIP], divisor = p[P_DIV];
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const int is_float = x->dtype == OA_DTYPE_FLOAT32;
  for (int64_t c = 0; c < planes; c++) {
    for (int64_t od = 0; od < od_n; od++) {
      int64_t d0, d1, pd;
      avg_range(od, p[P_SD], p[P_PD], p[P_KD], d_n, &d0, &d1, &pd);
      for (int64_t oh = 0; oh < oh_n; oh++) {
        int64_t h0, h1, ph;
        avg_range(oh, p[P_SH], p[P_PH], p[P_KH], h_n, &h0, &h1, &ph);
        for (int64_t ow = 0; ow < ow_n; ow++) {
          int64_t w0, w1, pw;
          avg_range(ow, p[P_SW], p[P_PW], p[P_KW], w_n, &w0, &w1, &pw);
          int64_t o = ((c * od_n + od) * oh_n + oh) * ow_n + ow;
          int empty = d0 >= d1 || h0 >= h1 || w0 >= w1;
          int64_t div = divisor ? divisor : (cip ? pd * ph * pw : (d1 - d0) * (h1 - h0) * (w1 - w0));
          if (is_float) {
            const float *xp = (const float *)x->data + c * d_n * h_n * w_n;
            float sum = 0.0f;
            for (int64_t id = d0; id < d1; id++)
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) sum += xp[(id * h_n + ih) * w_n + iw];
            ((float *)y->data)[o] = empty ? 0.0f : sum / (float)div;
          } else {
            const int64_t *xp = (const int64_t *)x->data + c * d_n * h_n * w_n;
            uint64_t sum = 0; /* wraps as PyTorch's int64 sum does, without signed overflow */
            for (int64_t id = d0; id < d1; id++)
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) sum += (uint64_t)xp[(id * h_n + ih) * w_n + iw];
            int64_t q = 0;
            if (!empty) q = div == -1 ? wrap_i64(0u - sum) : wrap_i64(sum) / div; /* INT64_MIN / -1 wraps */
            ((int64_t *)y->data)[o] = q;
          }
        }
      }
    }
  }
  return OA_OK;
}

/* ---- adaptive pooling ------------------------------------------------------------------------ */

/* PyTorch's start_index / end_index: floor(o * in / out), ceil((o + 1) * in / out). */
static int64_t adaptive_start(int64_t o, int64_t out, int64_t in) { return (o * in) / out; }
static int64_t adaptive_end(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

static oa_status_t adaptive_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, uint32_t max_outputs,
                                    oa_diag_t *diag) {
  oa_status_t st;
  if ((st = check_io(call, OA_DT_F32, max_outputs, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, y, x->ndim, x->ndim, "output 0", diag))) return st;
  int64_t o[3];
  for (int i = 0; i < 3; i++) {
    int64_t in = x->shape[x->ndim - 3 + i];
    o[i] = y->shape[y->ndim - 3 + i];
    if (o[i] > 0 && in < 1) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 0 (input) ('%s'): spatial dims of %s must be non-empty",
                          x->name, oa_shape_str(x, s, sizeof s));
    }
    /* window bounds compute (o + 1) * in: keep it in int64 */
    if (o[i] && in > ((int64_t)1 << 62) / o[i])
      return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "input and output sizes are too large for adaptive pooling");
  }
  return check_out(call, plan, o, diag);
}

oa_status_t oa_ref_adaptive_avg_pool3d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  return adaptive_prepare(call, plan, 1, diag);
}

oa_status_t oa_ref_adaptive_max_pool3d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  return adaptive_prepare(call, plan, 2, diag);
}

/* Loops over the output of one plane with the window [d0, d1) x [h0, h1) x [w0, w1), then BODY. */
#define ADAPTIVE_LOOP(BODY)                                                                 \
  for (int64_t od = 0; od < od_n; od++) {                                                   \
    int64_t d0 = adaptive_start(od, od_n, d_n), d1 = adaptive_end(od, od_n, d_n);           \
    for (int64_t oh = 0; oh < oh_n; oh++) {                                                 \
      int64_t h0 = adaptive_start(oh, oh_n, h_n), h1 = adaptive_end(oh, oh_n, h_n);         \
      for (int64_t ow = 0; ow < ow_n; ow++) {                                               \
        int64_t w0 = adaptive_start(ow, ow_n, w_n), w1 = adaptive_end(ow, ow_n, w_n);       \
        int64_t o = (od * oh_n + oh) * ow_n + ow;                                           \
        BODY                                                                                \
      }                                                                                     \
    }                                                                                       \
  }

oa_status_t oa_ref_adaptive_avg_pool3d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], d_n = p[P_D], h_n = p[P_H], w_n = p[P_W];
  const int64_t od_n = p[P_OD], oh_n = p[P_OH], ow_n = p[P_OW];
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = (const float *)call->inputs[0]->data + c * d_n * h_n * w_n;
    float *yp = (float *)call->outputs[0]->data + c * od_n * oh_n * ow_n;
    ADAPTIVE_LOOP({
      float sum = 0.0f;
      for (int64_t id = d0; id < d1; id++)
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) sum += xp[(id * h_n + ih) * w_n + iw];
      yp[o] = sum / (float)(d1 - d0) / (float)(h1 - h0) / (float)(w1 - w0);
    })
  }
  return OA_OK;
}

oa_status_t oa_ref_adaptive_max_pool3d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t planes = p[P_PLANES], d_n = p[P_D], h_n = p[P_H], w_n = p[P_W];
  const int64_t od_n = p[P_OD], oh_n = p[P_OH], ow_n = p[P_OW];
  for (int64_t c = 0; c < planes; c++) {
    const float *xp = (const float *)call->inputs[0]->data + c * d_n * h_n * w_n;
    float *yp = (float *)call->outputs[0]->data + c * od_n * oh_n * ow_n;
    int64_t *ind = call->n_outputs > 1 ? (int64_t *)call->outputs[1]->data + c * od_n * oh_n * ow_n : NULL;
    ADAPTIVE_LOOP({
      float m = -INFINITY;
      int64_t mi = (d0 * h_n + h0) * w_n + w0;
      for (int64_t id = d0; id < d1; id++)
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            int64_t at = (id * h_n + ih) * w_n + iw;
            float v = xp[at];
            if (v > m || v != v) {
              m = v;
              mi = at;
            }
          }
      yp[o] = m;
      if (ind) ind[o] = mi;
    })
  }
  return OA_OK;
}
