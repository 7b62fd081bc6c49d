/* Reference distances: cdist (torch.cdist, aten._cdist_forward) and pdist (F.pdist), float32.
 *
 * The p-norm of the difference of two rows, summed in double and rounded once: p = 0 counts the
 * nonzero differences (NaN propagates), p = 1 sums |d|, p = 2 is sqrt(sum d^2), p = inf the largest
 * |d|, other p (sum |d|^p)^(1/p). PyTorch sums in float32 (cdist in row order, pdist in vector
 * lanes; cdist with p = 2 and more than 25 rows goes through a matrix product), so results agree
 * to a few float32 ulps. The inf-norm follows each op's PyTorch max: cdist's scalar std::max keeps
 * the running max when a difference is NaN, pdist's vector maximum propagates NaN. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

enum { NORM_ZERO, NORM_ONE, NORM_TWO, NORM_INF, NORM_P };

/* plan->params layout */
enum { P_BATCH, P_ROWS1, P_ROWS2, P_COLS, P_NORM };

static oa_status_t norm_prepare(oa_op_plan_t *plan, double p, oa_diag_t *diag) {
  if (!(p >= 0.0))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument p = %g is out of range (expected >= 0 or inf)", p);
  plan->params[P_NORM] = p == 0.0 ? NORM_ZERO : p == 1.0 ? NORM_ONE : p == 2.0 ? NORM_TWO : isinf(p) ? NORM_INF : NORM_P;
  return OA_OK;
}

/* The p-norm of a - b over m elements. nan_max: the inf-norm propagates NaN. */
static float row_norm(const float *a, const float *b, int64_t m, int norm, double p, int nan_max) {
  double acc = 0.0;
  for (int64_t k = 0; k < m; k++) {
    double d = fabs((double)a[k] - (double)b[k]);
    switch (norm) {
      case NORM_ZERO: acc += d != d ? d : (d != 0.0 ? 1.0 : 0.0); break;
      case NORM_ONE: acc += d; break;
      case NORM_TWO: acc += d * d; break;
      case NORM_INF:
        if (nan_max ? (d > acc || d != d) : acc < d) acc = d;
        if (nan_max && acc != acc) return NAN;
        break;
      default: acc += pow(d, p); break;
    }
  }
  if (norm == NORM_TWO) return (float)sqrt(acc);
  if (norm == NORM_P) return (float)pow(acc, 1.0 / p);
  return (float)acc;
}

/* ---- cdist ------------------------------------------------------------------------------------- */

oa_status_t oa_ref_cdist_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 0, 1, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (x1)", diag)) || (st = oa_check_present(call, 1, "input 1 (x2)", diag)))
    return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, a, OA_DT_F32, "input 0 (x1)", diag)) ||
      (st = oa_check_same_dtype(call, b, a, "input 1 (x2)", diag)) ||
      (st = oa_check_same_dtype(call, y, a, "output 0", diag)))
    return st;
  if ((st = oa_check_ndim(call, a, 2, OA_MAX_DIMS, "input 0 (x1)", diag)) ||
      (st = oa_check_ndim(call, b, a->ndim, a->ndim, "input 1 (x2)", diag)))
    return st;
  int32_t nd = a->ndim;
  int64_t want[OA_MAX_DIMS], batch = 1;
  for (int32_t d = 0; d < nd - 2; d++) {
    want[d] = a->shape[d];
    batch *= a->shape[d];
  }
  want[nd - 2] = b->shape[nd - 2];
  want[nd - 1] = a->shape[nd - 1];
  if ((st = oa_check_shape(call, b, want, nd, "input 1 (x2)", diag))) return st;
  want[nd - 2] = a->shape[nd - 2];
  want[nd - 1] = b->shape[nd - 2];
  if ((st = oa_check_shape(call, y, want, nd, "output 0", diag))) return st;
  plan->params[P_BATCH] = batch;
  plan->params[P_ROWS1] = a->shape[nd - 2];
  plan->params[P_ROWS2] = b->shape[nd - 2];
  plan->params[P_COLS] = a->shape[nd - 1];
  return norm_prepare(plan, call->floats[OA_ARG_CDIST_P], diag);
}

oa_status_t oa_ref_cdist_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *q = plan->params;
  const int64_t batch = q[P_BATCH], r1 = q[P_ROWS1], r2 = q[P_ROWS2], m = q[P_COLS];
  const int norm = (int)q[P_NORM];
  const double p = call->floats[OA_ARG_CDIST_P];
  const float *a = (const float *)call->inputs[0]->data, *b = (const float *)call->inputs[1]->data;
  float *y = (float *)call->outputs[0]->data;
  for (int64_t l = 0; l < batch; l++)
    for (int64_t i = 0; i < r1; i++)
      for (int64_t j = 0; j < r2; j++)
        y[(l * r1 + i) * r2 + j] = row_norm(a + (l * r1 + i) * m, b + (l * r2 + j) * m, m, norm, p, 0);
  return OA_OK;
}

/* ---- pdist ------------------------------------------------------------------------------------- */

oa_status_t oa_ref_pdist_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 1, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (self)", diag)) ||
      (st = oa_check_same_dtype(call, y, x, "output 0", diag)) ||
      (st = oa_check_ndim(call, x, 2, 2, "input 0 (self)", diag)))
    return st;
  int64_t n = x->shape[0];
  if (n > ((int64_t)1 << 31)) /* n (n - 1) / 2 must fit in int64 */
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "input 0 (self) has too many rows (%lld) for pdist", (long long)n);
  int64_t pairs = n > 1 ? n * (n - 1) / 2 : 0;
  if ((st = oa_check_shape(call, y, &pairs, 1, "output 0", diag))) return st;
  plan->params[P_ROWS1] = n;
  plan->params[P_COLS] = x->shape[1];
  return norm_prepare(plan, call->floats[OA_ARG_PDIST_P], diag);
}

oa_status_t oa_ref_pdist_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t n = plan->params[P_ROWS1], m = plan->params[P_COLS];
  const int norm = (int)plan->params[P_NORM];
  const double p = call->floats[OA_ARG_PDIST_P];
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i + 1; j < n; j++) y[k++] = row_norm(x + i * m, x + j * m, m, norm, p, 1);
  return OA_OK;
}
