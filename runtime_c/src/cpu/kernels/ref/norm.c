/* Reference normalizations: batch_norm (inference), batch_norm_training (the batch's statistics),
 * layer_norm, group_norm (float32).
 *
 * batch_norm follows PyTorch's CPU kernel: per channel alpha = weight / sqrt(var + eps),
 * beta = bias - mean * alpha in float, out = x * alpha + beta. layer_norm and group_norm compute
 * the mean and the biased variance in double (two passes), rstd = 1 / sqrt(var + eps), and
 * out = (x - mean) * rstd * weight + bias; PyTorch uses float Welford moments, so tests compare
 * with rtol 1e-4 / atol 1e-5. mean / rstd outputs are optional (1 or 3 outputs). */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* plan->params layout */
enum { P_OUTER, P_C, P_INNER, P_HAS_W, P_HAS_B, P_GROUPS };

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }
static double farg(const oa_op_call_t *call, uint32_t i) { return i < call->n_floats ? call->floats[i] : 0.0; }
/* (iarg / farg take OA_ARG_* indices; an absent trailing argument reads as 0) */

/* check_eps serves the three norms and reads eps by batch_norm's name: their layouts must agree */
_Static_assert(OA_ARG_LAYER_NORM_EPS == OA_ARG_BATCH_NORM_EPS && OA_ARG_GROUP_NORM_EPS == OA_ARG_BATCH_NORM_EPS,
               "layer_norm / group_norm no longer keep eps where batch_norm does in opset.py");

/* Any finite eps, as PyTorch: a negative one gives NaN where var + eps < 0, as there (its rstd is
 * 1 / sqrt(max(var, 0) + eps)); NaN and huge values are a damaged file. */
static oa_status_t check_eps(const oa_op_call_t *call, oa_diag_t *diag) {
  double eps = farg(call, OA_ARG_BATCH_NORM_EPS);
  if (!(eps >= -1e30 && eps <= 1e30))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument eps = %g is out of range (expected -1e30 to 1e30)",
                        eps);
  return OA_OK;
}

/* Optional float32 input `i` of exactly `shape`. */
static oa_status_t check_param(const oa_op_call_t *call, uint32_t i, const int64_t *shape, int32_t ndim,
                               const char *arg, oa_diag_t *diag) {
  if (i >= call->n_inputs || !call->inputs[i]) return OA_OK;
  oa_status_t st = oa_check_same_dtype(call, call->inputs[i], call->inputs[0], arg, diag);
  if (st) return st;
  return oa_check_shape(call, call->inputs[i], shape, ndim, arg, diag);
}

/* out like the input, then optional mean / rstd of `stat_shape`; returns the number of outputs. */
static oa_status_t check_outputs(const oa_op_call_t *call, const int64_t *stat_shape, int32_t stat_ndim,
                                 oa_diag_t *diag) {
  oa_status_t st;
  const oa_tensor_t *x = call->inputs[0];
  static const char *const names[] = {"output 0 (out)", "output 1 (mean)", "output 2 (rstd)"};
  for (uint32_t i = 0; i < call->n_outputs; i++) {
    const oa_tensor_t *t = call->outputs[i];
    if ((st = oa_check_same_dtype(call, t, x, names[i], diag))) return st;
    if (i == 0)
      st = oa_check_same_shape(call, t, x, names[i], diag);
    else
      st = oa_check_shape(call, t, stat_shape, stat_ndim, names[i], diag);
    if (st) return st;
  }
  return OA_OK;
}

static oa_status_t check_in_out_counts(const oa_op_call_t *call, uint32_t min_in, uint32_t max_in, uint32_t min_ints,
                                       oa_diag_t *diag) {
  if (call->n_outputs != 1 && call->n_outputs != 3)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected 1 or 3 outputs (out, mean, rstd), received %u",
                        call->n_outputs);
  oa_status_t st = oa_check_arity(call, min_in, max_in, call->n_outputs, min_ints, 1, diag);
  if (st) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag))) return st;
  return oa_check_dtype(call, call->inputs[0], OA_DT_F32, "input 0 (input)", diag);
}

/* Normalize one row of `channels * per` contiguous elements; affine parameters are per channel
 * (layer norm: per = 1, one channel per element; group norm: per = H*W, the group's channels
 * starting at c0). Writes mean_out[row] / rstd_out[row] when present. */
static void normalize_row(const float *x, float *y, float *mean_out, float *rstd_out, int64_t row, int64_t channels,
                          int64_t per, double eps, const float *w, const float *b, int64_t c0) {
  const int64_t len = channels * per;
  double mean, rstd;
  if (len > 0) {
    double s = 0.0, ss = 0.0;
    for (int64_t i = 0; i < len; i++) s += (double)x[i];
    mean = s / (double)len;
    for (int64_t i = 0; i < len; i++) {
      double d = (double)x[i] - mean;
      ss += d * d;
    }
    rstd = 1.0 / sqrt(ss / (double)len + eps);
  } else {
    mean = NAN;
    rstd = NAN;
  }
  if (mean_out) mean_out[row] = (float)mean;
  if (rstd_out) rstd_out[row] = (float)rstd;
  for (int64_t k = 0, i = 0; k < channels; k++) {
    const double wc = w ? (double)w[c0 + k] : 1.0, bc = b ? (double)b[c0 + k] : 0.0;
    for (int64_t j = 0; j < per; j++, i++) y[i] = (float)(((double)x[i] - mean) * rstd * wc + bc);
  }
}

/* ---- batch_norm ------------------------------------------------------------------------------ */

oa_status_t oa_ref_batch_norm_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 5, 5, 1, 0, 1, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) ||
      (st = oa_check_present(call, 3, "input 3 (running_mean)", diag)) ||
      (st = oa_check_present(call, 4, "input 4 (running_var)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, x, 2, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  if ((st = check_eps(call, diag))) return st;
  int64_t c = x->shape[1];
  static const char *const names[] = {"", "input 1 (weight)", "input 2 (bias)", "input 3 (running_mean)",
                                      "input 4 (running_var)"};
  for (uint32_t i = 1; i < 5; i++)
    if ((st = check_param(call, i, &c, 1, names[i], diag))) return st;
  if ((st = oa_check_same_dtype(call, call->outputs[0], x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, call->outputs[0], x, "output 0", diag))) return st;
  int64_t inner = 1;
  for (int32_t d = 2; d < x->ndim; d++) inner *= x->shape[d];
  plan->params[P_OUTER] = x->shape[0];
  plan->params[P_C] = c;
  plan->params[P_INNER] = inner;
  plan->params[P_HAS_W] = call->inputs[1] != NULL;
  plan->params[P_HAS_B] = call->inputs[2] != NULL;
  return OA_OK;
}

oa_status_t oa_ref_batch_norm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t outer = p[P_OUTER], cn = p[P_C], inner = p[P_INNER];
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = p[P_HAS_W] ? (const float *)call->inputs[1]->data : NULL;
  const float *b = p[P_HAS_B] ? (const float *)call->inputs[2]->data : NULL;
  const float *mean = (const float *)call->inputs[3]->data;
  const float *var = (const float *)call->inputs[4]->data;
  float *y = (float *)call->outputs[0]->data;
  const float eps = (float)farg(call, OA_ARG_BATCH_NORM_EPS);
  for (int64_t c = 0; c < cn; c++) {
    const float invstd = 1.0f / sqrtf(var[c] + eps);
    const float alpha = invstd * (w ? w[c] : 1.0f);
    const float beta = (b ? b[c] : 0.0f) - mean[c] * alpha;
    for (int64_t n = 0; n < outer; n++) {
      const float *xr = x + (n * cn + c) * inner;
      float *yr = y + (n * cn + c) * inner;
      for (int64_t i = 0; i < inner; i++) yr[i] = xr[i] * alpha + beta;
    }
  }
  return OA_OK;
}

/* ---- batch_norm_training --------------------------------------------------------------------- */

_Static_assert(OA_ARG_BATCH_NORM_TRAINING_EPS == OA_ARG_BATCH_NORM_EPS,
               "batch_norm_training no longer keeps eps where batch_norm does in opset.py (check_eps)");

oa_status_t oa_ref_batch_norm_training_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                               oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_in_out_counts(call, 1, 3, 0, diag))) return st;
  if ((st = check_eps(call, diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_ndim(call, x, 2, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  int64_t c = x->shape[1];
  if ((st = check_param(call, 1, &c, 1, "input 1 (weight)", diag))) return st;
  if ((st = check_param(call, 2, &c, 1, "input 2 (bias)", diag))) return st;
  if ((st = check_outputs(call, &c, 1, diag))) return st;
  int64_t inner = 1;
  for (int32_t d = 2; d < x->ndim; d++) inner *= x->shape[d];
  plan->params[P_OUTER] = x->shape[0];
  plan->params[P_C] = c;
  plan->params[P_INNER] = inner;
  plan->params[P_HAS_W] = call->n_inputs > 1 && call->inputs[1] != NULL;
  plan->params[P_HAS_B] = call->n_inputs > 2 && call->inputs[2] != NULL;
  return OA_OK;
}

/* Per channel: the batch's mean and biased variance (two passes in double; an empty batch gives
 * NaN), then out = (x - mean) / sqrt(var + eps) * weight + bias rounded once. */
oa_status_t oa_ref_batch_norm_training_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t outer = p[P_OUTER], cn = p[P_C], inner = p[P_INNER];
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = p[P_HAS_W] ? (const float *)call->inputs[1]->data : NULL;
  const float *b = p[P_HAS_B] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  float *mean_out = call->n_outputs == 3 ? (float *)call->outputs[1]->data : NULL;
  float *invstd_out = call->n_outputs == 3 ? (float *)call->outputs[2]->data : NULL;
  const double eps = farg(call, OA_ARG_BATCH_NORM_TRAINING_EPS), count = (double)(outer * inner);
  for (int64_t c = 0; c < cn; c++) {
    double s = 0.0, ss = 0.0;
    for (int64_t n = 0; n < outer; n++) {
      const float *xr = x + (n * cn + c) * inner;
      for (int64_t i = 0; i < inner; i++) s += (double)xr[i];
    }
    const double mean = s / count;
    for (int64_t n = 0; n < outer; n++) {
      const float *xr = x + (n * cn + c) * inner;
      for (int64_t i = 0; i < inner; i++) {
        double d = (double)xr[i] - mean;
        ss += d * d;
      }
    }
    const double invstd = 1.0 / sqrt(ss / count + eps);
    if (mean_out) mean_out[c] = (float)mean;
    if (invstd_out) invstd_out[c] = (float)invstd;
    const double wc = w ? (double)w[c] : 1.0, bc = b ? (double)b[c] : 0.0;
    for (int64_t n = 0; n < outer; n++) {
      const float *xr = x + (n * cn + c) * inner;
      float *yr = y + (n * cn + c) * inner;
      for (int64_t i = 0; i < inner; i++) yr[i] = (float)(((double)xr[i] - mean) * invstd * wc + bc);
    }
  }
  return OA_OK;
}

/* ---- layer_norm ------------------------------------------------------------------------------ */

oa_status_t oa_ref_layer_norm_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_in_out_counts(call, 1, 3, 1, diag))) return st;
  if ((st = check_eps(call, diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  int64_t k = iarg(call, OA_ARG_LAYER_NORM_NORMALIZED_NDIM);
  if (k < 1 || k > x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument normalized_ndim = %lld is out of range (expected 1 to %d, the input's rank)",
                        (long long)k, x->ndim);
  int32_t axis = x->ndim - (int32_t)k;
  if ((st = check_param(call, 1, x->shape + axis, (int32_t)k, "input 1 (weight)", diag))) return st;
  if ((st = check_param(call, 2, x->shape + axis, (int32_t)k, "input 2 (bias)", diag))) return st;
  int64_t stat[OA_MAX_DIMS];
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < x->ndim; d++) {
    stat[d] = d < axis ? x->shape[d] : 1;
    if (d < axis)
      outer *= x->shape[d];
    else
      inner *= x->shape[d];
  }
  if ((st = check_outputs(call, stat, x->ndim, diag))) return st;
  plan->params[P_OUTER] = outer;
  plan->params[P_INNER] = inner;
  plan->params[P_HAS_W] = call->n_inputs > 1 && call->inputs[1];
  plan->params[P_HAS_B] = call->n_inputs > 2 && call->inputs[2];
  return OA_OK;
}

oa_status_t oa_ref_layer_norm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t outer = p[P_OUTER], inner = p[P_INNER];
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = p[P_HAS_W] ? (const float *)call->inputs[1]->data : NULL;
  const float *b = p[P_HAS_B] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  float *mean = call->n_outputs > 1 ? (float *)call->outputs[1]->data : NULL;
  float *rstd = call->n_outputs > 2 ? (float *)call->outputs[2]->data : NULL;
  const double eps = farg(call, OA_ARG_LAYER_NORM_EPS);
  for (int64_t r = 0; r < outer; r++)
    normalize_row(x + r * inner, y + r * inner, mean, rstd, r, inner, 1, eps, w, b, 0);
  return OA_OK;
}

/* ---- group_norm ------------------------------------------------------------------------------ */

oa_status_t oa_ref_group_norm_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_in_out_counts(call, 1, 3, 1, diag))) return st;
  if ((st = check_eps(call, diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_ndim(call, x, 2, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  int64_t c = x->shape[1], g = iarg(call, OA_ARG_GROUP_NORM_GROUPS);
  if (g < 1 || g > (c > 0 ? c : 1) || (c % g))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument groups = %lld must be positive and divide the %lld channels of input 0 ('%s')",
                        (long long)g, (long long)c, x->name);
  if ((st = check_param(call, 1, &c, 1, "input 1 (weight)", diag))) return st;
  if ((st = check_param(call, 2, &c, 1, "input 2 (bias)", diag))) return st;
  int64_t stat[2] = {x->shape[0], g};
  if ((st = check_outputs(call, stat, 2, diag))) return st;
  int64_t inner = 1;
  for (int32_t d = 2; d < x->ndim; d++) inner *= x->shape[d];
  plan->params[P_OUTER] = x->shape[0];
  plan->params[P_C] = c;
  plan->params[P_INNER] = inner;
  plan->params[P_GROUPS] = g;
  plan->params[P_HAS_W] = call->n_inputs > 1 && call->inputs[1];
  plan->params[P_HAS_B] = call->n_inputs > 2 && call->inputs[2];
  return OA_OK;
}

oa_status_t oa_ref_group_norm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_batch = p[P_OUTER], c = p[P_C], inner = p[P_INNER], g = p[P_GROUPS];
  const int64_t cg = c / g, len = cg * inner;
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = p[P_HAS_W] ? (const float *)call->inputs[1]->data : NULL;
  const float *b = p[P_HAS_B] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  float *mean = call->n_outputs > 1 ? (float *)call->outputs[1]->data : NULL;
  float *rstd = call->n_outputs > 2 ? (float *)call->outputs[2]->data : NULL;
  const double eps = farg(call, OA_ARG_GROUP_NORM_EPS);
  for (int64_t n = 0; n < n_batch; n++)
    for (int64_t k = 0; k < g; k++) {
      int64_t r = n * g + k;
      normalize_row(x + r * len, y + r * len, mean, rstd, r, cg, inner, eps, w, b, k * cg);
    }
  return OA_OK;
}
