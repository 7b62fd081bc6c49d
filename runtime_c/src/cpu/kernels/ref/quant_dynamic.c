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
 *   acc = sum_k (q_k - zp) * w[c][k]                                exact (int64; each row quantized once, into scratch)
 *   out = float(double(acc) * (double(s) * double(weight_scale[c])) + double(bias[c]))
 *
 * s * weight_scale[c] is exact in double (24 + 24 bits); the product with acc and the bias add are
 * two double roundings (separate statements: no contraction) and the cast to float32 a third, so
 * the output is within one float32 ulp of the exact dequantized dot product, and the same bytes
 * on every IEEE machine. A NaN anywhere in the input makes s NaN (PyTorch: undefined zero point):
 * every output is NaN. An infinite input makes s infinite and every output NaN (0 * inf), as in
 * PyTorch.
 *
 * per_token 1 (choose_qparams_per_token_asymmetric -> quantize_per_token): the same per row of K
 * (all dims but the last), eps float32's epsilon, and PyTorch's per-token zero point and rounding:
 *
 *   zp  = round_half_even(clamp(qmin + lo/s + qmax + hi/s > 0 ? qmin - lo/s : qmax - hi/s, qmin, qmax))
 *   q   = clamp(round_half_even(double(x) * (1.0 / double(s)) + zp), qmin, qmax)   in double
 *
 * (float32 lo/s and hi/s; a NaN or inf in a row makes that row's outputs NaN). */
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
  if ((st = oa_check_arity(call, 3, 4, 1, OA_ARG_LINEAR_DQ8_QMAX + 1, OA_ARG_LINEAR_DQ8_NUM_FLOATS, diag))) return st;
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
  int64_t per_token = iarg(call, OA_ARG_LINEAR_DQ8_PER_TOKEN);
  if (per_token != 0 && per_token != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument per_token = %lld: expected 0 or 1", (long long)per_token);
  double eps = call->floats[OA_ARG_LINEAR_DQ8_EPS];
  if (!(eps > 0.0) || !isfinite(eps) || !((float)eps > 0.0f) || !isfinite((float)eps))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument eps = %g: expected a positive finite float32", eps);
  int64_t nn = w->shape[0], k = w->shape[1];
  if ((st = oa_check_linear_io(call, x, k, y, nn, diag))) return st;
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
  plan->scratch_bytes = (size_t)(k ? k : 1) * sizeof(int16_t); /* one row's x_q - zp */
  return OA_OK;
}

/* The activation parameters of `n` floats (the whole tensor, or one row when per token); 0 when
 * they are not finite (a NaN or inf input: the caller writes NaN). */
typedef struct {
  float s;
  int64_t zp;
} dq_params_t;

static int choose(const float *x, int64_t n, int64_t qmin, int64_t qmax, float eps, int per_token, dq_params_t *p) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (v != v) return 0;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  float s = (hi - lo) / (float)(qmax - qmin);
  if (!(s >= eps)) s = eps;
  if (!isfinite(s)) return 0; /* an infinite input or a range beyond float32: PyTorch gives (q - zp) * inf */
  float zf;
  if (!per_token) {
    zf = (float)qmin - nearbyintf(lo / s); /* lo <= 0 < s: |lo / s| <= qmax - qmin + 1 */
  } else {
    /* choose_qparams_per_token_asymmetric (XNNPACK's rule): the zero point of the smaller error,
     * clamped, then rounded (all float32) */
    float dmin = lo / s, dmax = hi / s;
    float from_min = (float)qmin + dmin, from_max = (float)qmax + dmax;
    zf = from_min + from_max > 0.0f ? (float)qmin - dmin : (float)qmax - dmax;
    zf = zf < (float)qmin ? (float)qmin : (zf > (float)qmax ? (float)qmax : zf);
    zf = nearbyintf(zf);
  }
  int64_t zp = (int64_t)zf;
  p->s = s;
  p->zp = zp < qmin ? qmin : (zp > qmax ? qmax : zp);
  return 1;
}

oa_status_t oa_ref_linear_dq8_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = check_scales(call, diag))) return st;
  int16_t *xc = (int16_t *)scratch; /* the row quantized and centred: x_q - zp, in [-255, 255] */
  const int64_t m_n = plan->params[DQ_M], n_n = plan->params[DQ_N], k_n = plan->params[DQ_K];
  const int64_t sone = plan->params[DQ_SONE];
  const float *x = (const float *)call->inputs[0]->data, *ws = (const float *)call->inputs[2]->data;
  const int8_t *w = (const int8_t *)call->inputs[1]->data;
  const float *bias = plan->params[DQ_BIAS] ? (const float *)call->inputs[3]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const int64_t qmin = iarg(call, OA_ARG_LINEAR_DQ8_QMIN), qmax = iarg(call, OA_ARG_LINEAR_DQ8_QMAX);
  const int per_token = iarg(call, OA_ARG_LINEAR_DQ8_PER_TOKEN) != 0;
  const float eps = (float)call->floats[OA_ARG_LINEAR_DQ8_EPS];
  dq_params_t p = {0.0f, 0};
  int ok = per_token ? 1 : choose(x, m_n * k_n, qmin, qmax, eps, 0, &p);
  const float flo = (float)qmin, fhi = (float)qmax;
  for (int64_t i = 0; i < m_n; i++) {
    const float *xr = x + i * k_n;
    float *yr = y + i * n_n;
    if (per_token) ok = choose(xr, k_n, qmin, qmax, eps, 1, &p);
    if (!ok) {
      for (int64_t j = 0; j < n_n; j++) yr[j] = NAN;
      continue;
    }
    const float inv = (float)(1.0 / (double)p.s), fzp = (float)p.zp;
    const double invd = 1.0 / (double)p.s, dzp = (double)p.zp;
    for (int64_t k = 0; k < k_n; k++) {
      int64_t q;
      if (!per_token) { /* quantize_per_tensor: float32 x * float32(1 / s), rounded, + zp */
        float r = nearbyintf(xr[k] * inv) + fzp; /* |x * inv| <= qmax - qmin + 1: exact */
        q = (int64_t)(r < flo ? flo : (r > fhi ? fhi : r));
      } else { /* quantize_per_token: in double, x * (1 / s) + zp, rounded */
        double r = (double)xr[k] * invd;
        r = nearbyint(r + dzp);
        q = (int64_t)(r < (double)qmin ? (double)qmin : (r > (double)qmax ? (double)qmax : r));
      }
      xc[k] = (int16_t)(q - p.zp);
    }
    for (int64_t j = 0; j < n_n; j++) {
      const int8_t *wr = w + j * k_n;
      int64_t acc = 0;
      for (int64_t k = 0; k < k_n; k++) acc += (int32_t)xc[k] * wr[k];
      double scale = (double)p.s * (double)ws[sone ? 0 : j];
      double prod = (double)acc * scale;
      double out = prod + (bias ? (double)bias[j] : 0.0);
      yr[j] = (float)out;
    }
  }
  return OA_OK;
}
