/* Reference kernel of the dynamically quantized linear (PT2E "8da8w"): linear_dq8.
 *
 * THE RULE (docs/quantization.md, "Dynamic quantization"; the exporter's half is the fold in
 * sdk/openaccel/exporter/quant.py). Float32 in, float32 out; per call the activation's scale and
 * zero point are PyTorch's quantized_decomposed.choose_qparams.tensor (per tensor, affine),
 * computed in float32 exactly as torch.ao.quantization.utils.determine_qparams does:
 *
 *   lo = min(min x, 0), hi = max(max x, 0)                          float32
 *   s  = max((hi - lo) / float(qmax - qmin), float(eps))            one float32 subtract, divide
 *   zp = clamp(qmin - round_half_even(lo / s), qmin, qmax)          one float32 divide
 *   q  = clamp(round_half_even(x * float(1.0 / double(s))) + zp, qmin, qmax)   the quantize op
 *   acc = sum_k (q_k - zp) * w[c][k]                                exact (int64; |acc| < 2^31 K)
 *   out = float(double(acc) * (double(s) * double(weight_scale[c])) + double(bias[c]))
 *
 * s * weight_scale[c] is exact in double (24 + 24 bits); the product with acc and the bias add are
 * two double roundings (separate statements: no contraction) and the cast to float32 a third, so
 * the output is within one float32 ulp of the exact dequantized dot product, and the same bytes
 * on every IEEE machine. A NaN anywhere in the input makes s NaN (PyTorch: undefined zero point):
 * every output is NaN. An infinite input makes s infinite and every output NaN (0 * inf), as in
 * PyTorch. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

enum { DQ_M, DQ_N, DQ_K, DQ_SONE, DQ_BIAS };

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

/* weight_scale values (a constant: checked at prepare when bound, always at run) */
static oa_status_t check_scales(const oa_op_call_t *call, oa_diag_t *diag) {
  const oa_tensor_t *s = call->inputs[2];
  if (!s->data) return OA_OK;
  const float *sv = (const float *)s->data;
  for (int64_t c = 0; c < s->numel; c++)
    if (!(sv[c] > 0.0f) || !isfinite(sv[c]))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 2 (weight_scale) ('%s'): element %lld = %g: expected a positive finite float32 scale",
                          s->name, (long long)c, (double)sv[c]);
  return OA_OK;
}

oa_status_t oa_ref_linear_dq8_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 4, 1, OA_ARG_LINEAR_DQ8_NUM_INTS, OA_ARG_LINEAR_DQ8_NUM_FLOATS, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) || (st = oa_check_present(call, 1, "input 1 (weight)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (weight_scale)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *s = call->inputs[2], *y = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 3 ? call->inputs[3] : NULL;
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_dtype(call, w, OA_DT_I8, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_dtype(call, s, OA_DT_F32, "input 2 (weight_scale)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_F32, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, 2, 2, "input 1 (weight)", diag))) return st;
  int64_t qmin = iarg(call, OA_ARG_LINEAR_DQ8_QMIN), qmax = iarg(call, OA_ARG_LINEAR_DQ8_QMAX);
  if (qmin < INT8_MIN || qmin >= qmax || qmax > INT8_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "arguments qmin = %lld, qmax = %lld: expected -128 <= qmin < qmax <= 127", (long long)qmin,
                        (long long)qmax);
  double eps = call->floats[OA_ARG_LINEAR_DQ8_EPS];
  if (!(eps > 0.0) || !isfinite(eps) || !((float)eps > 0.0f) || !isfinite((float)eps))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument eps = %g: expected a positive finite float32", eps);
  int64_t nn = w->shape[0], k = w->shape[1];
  if (x->shape[x->ndim - 1] != k)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): last dim %lld does not match the weight's in_features %lld", x->name,
                        (long long)x->shape[x->ndim - 1], (long long)k);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  want[x->ndim - 1] = nn;
  if ((st = oa_check_shape(call, y, want, x->ndim, "output 0", diag))) return st;
  if (s->ndim != 1 || (s->shape[0] != nn && s->shape[0] != 1)) {
    char buf[96];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 2 (weight_scale) ('%s'): expected shape [%lld] or [1], received %s",
                        s->name, (long long)nn, oa_shape_str(s, buf, sizeof buf));
  }
  if (b) {
    if ((st = oa_check_dtype(call, b, OA_DT_F32, "input 3 (bias)", diag))) return st;
    if ((st = oa_check_shape(call, b, &nn, 1, "input 3 (bias)", diag))) return st;
  }
  if ((st = check_scales(call, diag))) return st;
  int64_t m = 1;
  for (int32_t d = 0; d < x->ndim - 1; d++) m *= x->shape[d];
  plan->params[DQ_M] = m, plan->params[DQ_N] = nn, plan->params[DQ_K] = k;
  plan->params[DQ_SONE] = s->shape[0] == 1, plan->params[DQ_BIAS] = b != NULL;
  return OA_OK;
}

oa_status_t oa_ref_linear_dq8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  oa_status_t st;
  if ((st = check_scales(call, diag))) return st;
  const int64_t m_n = plan->params[DQ_M], n_n = plan->params[DQ_N], k_n = plan->params[DQ_K];
  const int64_t sone = plan->params[DQ_SONE];
  const float *x = (const float *)call->inputs[0]->data, *ws = (const float *)call->inputs[2]->data;
  const int8_t *w = (const int8_t *)call->inputs[1]->data;
  const float *bias = plan->params[DQ_BIAS] ? (const float *)call->inputs[3]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const int64_t qmin = iarg(call, OA_ARG_LINEAR_DQ8_QMIN), qmax = iarg(call, OA_ARG_LINEAR_DQ8_QMAX);
  const float eps = (float)call->floats[OA_ARG_LINEAR_DQ8_EPS];
  /* choose_qparams.tensor */
  const int64_t total = m_n * k_n;
  float lo = 0.0f, hi = 0.0f;
  int nan = 0;
  for (int64_t i = 0; i < total; i++) {
    float v = x[i];
    if (v != v) nan = 1;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (nan) {
    for (int64_t i = 0; i < m_n * n_n; i++) y[i] = NAN;
    return OA_OK;
  }
  float range = hi - lo;
  float s = range / (float)(qmax - qmin);
  if (!(s >= eps)) s = eps;
  if (!isfinite(s)) { /* an infinite input (or a range beyond float32): PyTorch gives (q - zp) * inf */
    for (int64_t i = 0; i < m_n * n_n; i++) y[i] = NAN;
    return OA_OK;
  }
  float zr = nearbyintf(lo / s); /* lo <= 0 < s finite: zr in [-(qmax - qmin) - 1, 0] */
  int64_t zp = qmin - (int64_t)zr;
  zp = zp < qmin ? qmin : (zp > qmax ? qmax : zp);
  const float inv = (float)(1.0 / (double)s);
  const float fzp = (float)zp, flo = (float)qmin, fhi = (float)qmax;
  for (int64_t i = 0; i < m_n; i++) {
    const float *xr = x + i * k_n;
    for (int64_t j = 0; j < n_n; j++) {
      const int8_t *wr = w + j * k_n;
      int64_t acc = 0;
      for (int64_t k = 0; k < k_n; k++) {
        float r = nearbyintf(xr[k] * inv); /* |x * inv| <= 255.x: exact in float */
        float q = r + fzp;
        q = q < flo ? flo : (q > fhi ? fhi : q);
        acc += ((int64_t)q - zp) * wr[k];
      }
      double scale = (double)s * (double)ws[sone ? 0 : j];
      double p = (double)acc * scale;
      double out = p + (bias ? (double)bias[j] : 0.0);
      y[i * n_n + j] = (float)out;
    }
  }
  return OA_OK;
}
