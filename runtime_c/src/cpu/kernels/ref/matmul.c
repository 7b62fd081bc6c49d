/* Reference matrix products: linear (and linear_packed: the weight in panels), matmul (mm/bmm
 * with batch broadcast), addmm.
 *
 * All three accumulate in double and round once to float32: they are the ground truth optimized
 * GEMM kernels are compared with (tests use rtol/atol 1e-4 for K up to a few hundred). */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

/* ---- linear --------------------------------------------------------------------------------- */

/* plan->params layout for linear and linear_packed */
enum { L_M, L_N, L_K, L_HAS_BIAS, L_ACT, L_BLOCK };

/* linear and linear_packed share one prepare and run, which read act, act_min, act_max by linear's names */
_Static_assert(OA_ARG_LINEAR_PACKED_ACT == OA_ARG_LINEAR_ACT && OA_ARG_LINEAR_PACKED_ACT_MIN == OA_ARG_LINEAR_ACT_MIN &&
                   OA_ARG_LINEAR_PACKED_ACT_MAX == OA_ARG_LINEAR_ACT_MAX,
               "linear_packed no longer shares linear's act, act_min, act_max layout in opset.py");

static double apply_act(double v, int64_t act, double lo, double hi) {
  if (act == 1) return v < 0.0 ? 0.0 : v; /* keeps NaN, as torch.relu */
  if (act == 2) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

/* linear: weight [N, K]; linear_packed (block > 0): weight [ceil(N / block), K, block], N from
 * the output */
static oa_status_t linear_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag, int packed) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 3, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) || (st = oa_check_present(call, 1, "input 1 (weight)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const oa_tensor_t *b = call->n_inputs > 2 ? call->inputs[2] : NULL;
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag))) return st;
  if ((st = oa_check_same_dtype(call, w, x, "input 1 (weight)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (input)", diag))) return st;
  if ((st = oa_check_ndim(call, w, packed ? 3 : 2, packed ? 3 : 2, "input 1 (weight)", diag))) return st;
  int64_t n = w->shape[0], k = w->shape[1], block = 0;
  if (packed) {
    block = call->n_ints > OA_ARG_LINEAR_PACKED_BLOCK ? call->ints[OA_ARG_LINEAR_PACKED_BLOCK] : 0;
    if (block < 1 || block > 256 || w->shape[2] != block)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument block = %lld: expected 1..256 and equal to the weight's last dim %lld",
                          (long long)block, (long long)w->shape[2]);
    if ((st = oa_check_ndim(call, out, x->ndim, x->ndim, "output 0", diag))) return st;
    n = out->shape[out->ndim - 1];
    if (w->shape[0] != (n + block - 1) / block)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (weight) ('%s'): %lld panels of %lld for %lld output features, expected %lld",
                          w->name, (long long)w->shape[0], (long long)block, (long long)n,
                          (long long)((n + block - 1) / block));
  }
  if ((st = oa_check_linear_io(call, x, k, out, n, diag))) return st;
  if (b) {
    if ((st = oa_check_same_dtype(call, b, x, "input 2 (bias)", diag))) return st;
    if ((st = oa_check_shape(call, b, &n, 1, "input 2 (bias)", diag))) return st;
  }
  int64_t act = call->n_ints > OA_ARG_LINEAR_ACT ? call->ints[OA_ARG_LINEAR_ACT] : 0;
  if (act < 0 || act > 2)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "argument act = %lld is not a known activation (0, 1, 2)", (long long)act);
  if (act == 2) {
    double lo = call->n_floats > OA_ARG_LINEAR_ACT_MIN ? call->floats[OA_ARG_LINEAR_ACT_MIN] : 0.0;
    double hi = call->n_floats > OA_ARG_LINEAR_ACT_MAX ? call->floats[OA_ARG_LINEAR_ACT_MAX] : 0.0;
    if (!(lo <= hi)) /* also rejects NaN bounds */
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "arguments act_min = %g and act_max = %g: expected act_min <= act_max", lo, hi);
  }
  /* rows of the input: numel / K, or from the output when K == 0 (then N may be 0 too, and the
   * output is empty whatever M is) */
  plan->params[L_M] = k ? x->numel / k : (n ? out->numel / n : 0);
  plan->params[L_N] = n;
  plan->params[L_K] = k;
  plan->params[L_HAS_BIAS] = b != NULL;
  plan->params[L_ACT] = act;
  plan->params[L_BLOCK] = block;
  return OA_OK;
}

oa_status_t oa_ref_linear_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return linear_prepare(call, plan, diag, 0);
}

oa_status_t oa_ref_linear_packed_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                         oa_diag_t *diag) {
  (void)env;
  return linear_prepare(call, plan, diag, 1);
}

/* Dot product in double with four partial sums (breaks the add dependency chain), b read every
 * `bs` floats (1, or a column of a weight panel). */
static double dot_f32(const float *a, const float *b, int64_t bs, int64_t k) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    s0 += (double)a[p] * b[p * bs];
    s1 += (double)a[p + 1] * b[(p + 1) * bs];
    s2 += (double)a[p + 2] * b[(p + 2) * bs];
    s3 += (double)a[p + 3] * b[(p + 3) * bs];
  }
  for (; p < k; p++) s0 += (double)a[p] * b[p * bs];
  return (s0 + s1) + (s2 + s3);
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
  const int64_t bl = plan->params[L_BLOCK];
  double lo = call->n_floats > OA_ARG_LINEAR_ACT_MIN ? call->floats[OA_ARG_LINEAR_ACT_MIN] : 0.0;
  double hi = call->n_floats > OA_ARG_LINEAR_ACT_MAX ? call->floats[OA_ARG_LINEAR_ACT_MAX] : 0.0;
  for (int64_t i = 0; i < m; i++) {
    const float *xr = x + i * k;
    for (int64_t j = 0; j < n; j++) {
      /* linear_packed: output feature j is column j % bl of panel j / bl */
      const float *wj = bl ? w + (j / bl) * k * bl + j % bl : w + j * k;
      double acc = dot_f32(xr, wj, bl ? bl : 1, k);
      if (b) acc += b[j];
      y[i * n + j] = (float)apply_act(acc, act, lo, hi);
    }
  }
  return OA_OK;
}

/* ---- shared GEMM: C[M, N] = alpha * A[M, K] @ B[K, N] (+ beta * bias) ------------------------ */

/* One (batch) product, row by row: acc[N] (double scratch) += A[i, p] * B[p, :] walks B and C
 * contiguously. bias (when not NULL) is read through strides (bs_m, bs_n) (0 on broadcast dims). */
static void gemm_rows(const float *a, const float *bm, float *c, int64_t m, int64_t n, int64_t k, double alpha,
                      double beta, const float *bias, int64_t bs_m, int64_t bs_n, double *acc) {
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) acc[j] = 0.0;
    const float *ar = a + i * k;
    for (int64_t p = 0; p < k; p++) {
      double av = ar[p];
      const float *br = bm + p * n;
      for (int64_t j = 0; j < n; j++) acc[j] += av * br[j];
    }
    float *cr = c + i * n;
    if (bias) {
      for (int64_t j = 0; j < n; j++) cr[j] = (float)(alpha * acc[j] + beta * bias[i * bs_m + j * bs_n]);
    } else if (alpha != 1.0) {
      for (int64_t j = 0; j < n; j++) cr[j] = (float)(alpha * acc[j]);
    } else {
      for (int64_t j = 0; j < n; j++) cr[j] = (float)acc[j];
    }
  }
}

/* Scratch for one row of double accumulators; fails when it cannot be addressed (32-bit). */
static oa_status_t row_scratch(int64_t n, oa_op_plan_t *plan, oa_diag_t *diag) {
  if ((uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(double)))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "a row of %lld outputs does not fit this platform's address space",
                        (long long)n);
  plan->scratch_bytes = (size_t)n * sizeof(double);
  return OA_OK;
}

/* ---- matmul ---------------------------------------------------------------------------------- */

/* plan->params layout for matmul */
enum { MM_M, MM_N, MM_K, MM_BATCH };

oa_status_t oa_ref_matmul_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) || (st = oa_check_present(call, 1, "input 1 (other)", diag)))
    return st;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *out = call->outputs[0];
  if ((st = oa_check_dtype(call, a, OA_DT_F32, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, b, a, "input 1 (other)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, a, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, a, 2, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  if ((st = oa_check_ndim(call, b, 2, OA_MAX_DIMS, "input 1 (other)", diag))) return st;
  int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != k) {
    char sa[128], sb[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 1 (other) ('%s'): expected %lld rows to match the columns of input 0 (self), "
                        "received %lld (self %s, other %s)",
                        b->name, (long long)k, (long long)b->shape[b->ndim - 2], oa_shape_str(a, sa, sizeof sa),
                        oa_shape_str(b, sb, sizeof sb));
  }
  /* output: broadcast batch dims + [M, N] */
  int32_t nd = a->ndim > b->ndim ? a->ndim : b->ndim, nb = nd - 2;
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < nb; d++) {
    int32_t da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char s1[128], s2[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "batch dims do not broadcast: input 0 (self) %s vs input 1 (other) %s (batch dim %d: %lld vs %lld)",
                          oa_shape_str(a, s1, sizeof s1), oa_shape_str(b, s2, sizeof s2), d, (long long)sa,
                          (long long)sb);
    }
    want[d] = sa == 1 ? sb : sa;
  }
  want[nb] = m;
  want[nb + 1] = n;
  if ((st = oa_check_shape(call, out, want, nd, "output 0", diag))) return st;
  plan->params[MM_M] = m;
  plan->params[MM_N] = n;
  plan->params[MM_K] = k;
  plan->params[MM_BATCH] = nb;
  return row_scratch(n, plan, diag);
}

oa_status_t oa_ref_matmul_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const oa_tensor_t *ta = call->inputs[0], *tb = call->inputs[1], *to = call->outputs[0];
  int64_t m = plan->params[MM_M], n = plan->params[MM_N], k = plan->params[MM_K];
  int32_t nb = (int32_t)plan->params[MM_BATCH];
  /* batch strides in matrices of each operand (0 on broadcast dims), walked over the output's
   * batch dims */
  int64_t sa[OA_MAX_DIMS] = {0}, sb[OA_MAX_DIMS] = {0}, batch = 1;
  int64_t ra = 1, rb = 1;
  for (int32_t d = nb - 1; d >= 0; d--) {
    int32_t da = d - (to->ndim - ta->ndim), db = d - (to->ndim - tb->ndim);
    int64_t na = da >= 0 ? ta->shape[da] : 1, nbb = db >= 0 ? tb->shape[db] : 1;
    sa[d] = na == 1 ? 0 : ra;
    sb[d] = nbb == 1 ? 0 : rb;
    ra *= na;
    rb *= nbb;
    batch *= to->shape[d];
  }
  const float *a = (const float *)ta->data, *b = (const float *)tb->data;
  float *c = (float *)to->data;
  if (m == 0 || n == 0) return OA_OK;
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, to->shape, nb, 2, sa, sb, NULL);
  for (int64_t i = 0; i < batch; i++) {
    gemm_rows(a + it.off[0] * m * k, b + it.off[1] * k * n, c + i * m * n, m, n, k, 1.0, 0.0, NULL, 0, 0,
              (double *)scratch);
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}

/* ---- addmm ----------------------------------------------------------------------------------- */

/* plan->params layout for addmm */
enum { AM_M, AM_N, AM_K, AM_BS_M, AM_BS_N };

oa_status_t oa_ref_addmm_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 3, 1, 0, 2, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (bias)", diag)) || (st = oa_check_present(call, 1, "input 1 (mat1)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (mat2)", diag)))
    return st;
  const oa_tensor_t *bias = call->inputs[0], *a = call->inputs[1], *b = call->inputs[2], *out = call->outputs[0];
  if ((st = oa_check_dtype(call, a, OA_DT_F32, "input 1 (mat1)", diag))) return st;
  if ((st = oa_check_same_dtype(call, b, a, "input 2 (mat2)", diag))) return st;
  if ((st = oa_check_same_dtype(call, bias, a, "input 0 (bias)", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, a, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, a, 2, 2, "input 1 (mat1)", diag))) return st;
  if ((st = oa_check_ndim(call, b, 2, 2, "input 2 (mat2)", diag))) return st;
  if ((st = oa_check_ndim(call, bias, 0, 2, "input 0 (bias)", diag))) return st;
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  if (b->shape[0] != k)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 2 (mat2) ('%s'): expected %lld rows to match the columns of input 1 (mat1), received %lld",
                        b->name, (long long)k, (long long)b->shape[0]);
  int64_t want[2] = {m, n}, bs[2];
  if ((st = oa_check_shape(call, out, want, 2, "output 0", diag))) return st;
  if ((st = oa_broadcast_strides(call, bias, want, 2, bs, "input 0 (bias)", diag))) return st;
  plan->params[AM_M] = m;
  plan->params[AM_N] = n;
  plan->params[AM_K] = k;
  plan->params[AM_BS_M] = bs[0];
  plan->params[AM_BS_N] = bs[1];
  return row_scratch(n, plan, diag);
}

oa_status_t oa_ref_addmm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  double beta = call->floats[OA_ARG_ADDMM_BETA], alpha = call->floats[OA_ARG_ADDMM_ALPHA];
  /* PyTorch: with beta == 0 the bias is ignored (its NaN/inf do not propagate) */
  const float *bias = beta != 0.0 ? (const float *)call->inputs[0]->data : NULL;
  gemm_rows((const float *)call->inputs[1]->data, (const float *)call->inputs[2]->data,
            (float *)call->outputs[0]->data, plan->params[AM_M], plan->params[AM_N], plan->params[AM_K], alpha, beta,
            bias, plan->params[AM_BS_M], plan->params[AM_BS_N], (double *)scratch);
  return OA_OK;
}
