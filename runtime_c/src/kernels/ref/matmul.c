/* Reference matrix products: linear, matmul (mm/bmm with batch broadcast), addmm. */
#include <math.h>

#include "../kernel.h"

/* plan->params layout for linear */
enum { L_M, L_N, L_K, L_HAS_BIAS, L_ACT };

static float apply_act(float v, int64_t act, float lo, float hi) {
  if (act == 1) return v > 0.0f ? v : 0.0f;
  if (act == 2) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

oa_status_t oa_ref_linear_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 3, 1, 0, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) || (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, w, x, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, 2, 2, "input 1 (weight)", diag))) return st;
  int64_t n = w->shape[0], k = w->shape[1];
  if (x->shape[x->ndim - 1] != k)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (input) ('%s'): last dim %lld does not match weight's in_features %lld", x->name,
                        (long long)x->shape[x->ndim - 1], (long long)k);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  want[x->ndim - 1] = n;
  if ((st = oa_check_shape(call, out, want, x->ndim, "output 0", diag))) return st;
  if (b) {
    if ((st = oa_check_same_dtype(call, b, x, "input 2 (bias)", diag))) return st;
    if ((st = oa_check_shape(call, b, &n, 1, "input 2 (bias)", diag))) return st;
  }
  int64_t act = call->n_ints > 0 ? call->ints[0] : 0;
  if (act < 0 || act > 2)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "argument act = %lld is not a known activation (0, 1, 2)", (long long)act);
  plan->params[L_M] = k ? x->numel / k : (n ? out->numel / n : 0);
  plan->params[L_N] = n;
  plan->params[L_K] = k;
  plan->params[L_HAS_BIAS] = b != NULL;
  plan->params[L_ACT] = act;
  return OA_OK;
}

oa_status_t oa_ref_linear_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const float *x = (const float *)call->inputs[0]->data;
  const float *w = (const float *)call->inputs[1]->data;
  const float *b = plan->params[L_HAS_BIAS] ? (const float *)call->inputs[2]->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  int64_t m = plan->params[L_M], n = plan->params[L_N], k = plan->params[L_K], act = plan->params[L_ACT];
  float lo = call->n_floats > 0 ? (float)call->floats[0] : 0.0f;
  float hi = call->n_floats > 1 ? (float)call->floats[1] : 0.0f;
  for (int64_t i = 0; i < m; i++) {
    const float *xr = x + i * k;
    for (int64_t j = 0; j < n; j++) {
      const float *wr = w + j * k;
      float acc = b ? b[j] : 0.0f;
      for (int64_t p = 0; p < k; p++) acc += xr[p] * wr[p];
      y[i * n + j] = apply_act(acc, act, lo, hi);
    }
  }
  return OA_OK;
}
