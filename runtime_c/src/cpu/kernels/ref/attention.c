/* Reference scaled dot-product attention: out = softmax(q k^T * scale + mask) v, one query row
 * at a time with the scores in scratch (S doubles). Batch dims of key, value and mask broadcast
 * to the query's; with gqa_groups > 1 each key/value head (dim -3) serves that many query heads. */
#include <math.h>

#include "kernels/kernel.h"

enum { P_L, P_S, P_E, P_EV, P_BATCH, P_CAUSAL, P_GROUPS, P_HAS_MASK, P_MASK_BOOL };

/* Offsets (in rows) of the batch part of k/v/mask for flat query batch index b. */
typedef struct {
  int32_t nb;                      /* batch dims */
  int64_t shape[OA_MAX_DIMS];      /* query batch shape */
  int64_t kstride[OA_MAX_DIMS], vstride[OA_MAX_DIMS], mstride[OA_MAX_DIMS];
} batch_map_t;

static oa_status_t batch_strides(const oa_op_call_t *call, const oa_tensor_t *t, const oa_tensor_t *q, int32_t nb,
                                 int32_t gqa_groups, int64_t *out, const char *arg, oa_diag_t *diag) {
  /* strides in units of "matrices" ([rows, cols] blocks) of t's batch dims, broadcast against q's */
  int32_t tb = t->ndim - 2;
  if (tb > nb) {
    char s[96];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s ('%s'): shape %s has more batch dims than the query", arg,
                        t->name, oa_shape_str(t, s, sizeof s));
  }
  int64_t stride = 1;
  for (int32_t d = nb - 1; d >= 0; d--) {
    int32_t td = d - (nb - tb);
    if (td < 0) {
      out[d] = 0;
      continue;
    }
    int64_t n = t->shape[td], want = q->shape[d];
    int gqa_dim = gqa_groups > 1 && d == nb - 1;
    if (n == want && !gqa_dim) {
      out[d] = n == 1 ? 0 : stride;
    } else if (gqa_dim && n * gqa_groups == want) {
      out[d] = -stride; /* marker: head index / groups (resolved in run) */
    } else if (n == 1) {
      out[d] = 0;
    } else {
      char s[96];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "%s ('%s'): batch dim %d of shape %s (%lld) does not match the query's (%lld)", arg, t->name,
                          td, oa_shape_str(t, s, sizeof s), (long long)n, (long long)want);
    }
    stride *= n;
  }
  (void)call;
  return OA_OK;
}

oa_status_t oa_ref_sdpa_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 4, 1, 0, 0, diag))) return st;
  for (uint32_t i = 0; i < 3; i++) {
    static const char *names[] = {"input 0 (query)", "input 1 (key)", "input 2 (value)"};
    if ((st = oa_check_present(call, i, names[i], diag))) return st;
    if ((st = oa_check_dtype(call, call->inputs[i], OA_DT_F32, names[i], diag))) return st;
    if ((st = oa_check_ndim(call, call->inputs[i], 2, OA_MAX_DIMS, names[i], diag))) return st;
  }
  const oa_tensor_t *q = call->inputs[0], *k = call->inputs[1], *v = call->inputs[2], *out = call->outputs[0];
  const oa_tensor_t *mask = call->n_inputs > 3 ? call->inputs[3] : NULL;
  int64_t causal = call->n_ints > OA_ARG_SDPA_IS_CAUSAL ? call->ints[OA_ARG_SDPA_IS_CAUSAL] : 0;
  int64_t groups = call->n_ints > OA_ARG_SDPA_GQA_GROUPS ? call->ints[OA_ARG_SDPA_GQA_GROUPS] : 1;
  if (causal != 0 && causal != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument is_causal = %lld (expected 0 or 1)", (long long)causal);
  if (groups < 1 || groups > 4096)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument gqa_groups = %lld (expected 1 to 4096)", (long long)groups);
  if (groups > 1 && q->ndim < 3)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "gqa_groups > 1 needs a head dim (query has %d dims)", q->ndim);
  if (call->n_floats > OA_ARG_SDPA_SCALE && !isfinite(call->floats[OA_ARG_SDPA_SCALE]))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument scale is not finite");
  int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
  int64_t S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
  if (k->shape[k->ndim - 1] != E)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (key) ('%s'): last dim %lld, query's is %lld", k->name,
                        (long long)k->shape[k->ndim - 1], (long long)E);
  if (v->shape[v->ndim - 2] != S)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 2 (value) ('%s'): %lld rows, key has %lld", v->name,
                        (long long)v->shape[v->ndim - 2], (long long)S);
  int32_t nb = q->ndim - 2;
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < nb; d++) want[d] = q->shape[d];
  want[nb] = L;
  want[nb + 1] = Ev;
  if ((st = oa_check_shape(call, out, want, q->ndim, "output 0", diag))) return st;
  if ((st = oa_check_same_dtype(call, out, q, "output 0", diag))) return st;
  int64_t ks[OA_MAX_DIMS], vs[OA_MAX_DIMS];
  if ((st = batch_strides(call, k, q, nb, (int32_t)groups, ks, "input 1 (key)", diag))) return st;
  if ((st = batch_strides(call, v, q, nb, (int32_t)groups, vs, "input 2 (value)", diag))) return st;
  if (mask) {
    if ((st = oa_check_dtype(call, mask, OA_DT_F32 | OA_DT_BOOL, "input 3 (attn_mask)", diag))) return st;
    if (causal) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "is_causal and attn_mask are exclusive");
    /* the mask broadcasts to [..., L, S] */
    int64_t full[OA_MAX_DIMS], strides[OA_MAX_DIMS];
    for (int32_t d = 0; d < nb; d++) full[d] = q->shape[d];
    full[nb] = L;
    full[nb + 1] = S;
    if ((st = oa_broadcast_strides(call, mask, full, q->ndim, strides, "input 3 (attn_mask)", diag))) return st;
  }
  int64_t batch = 1;
  for (int32_t d = 0; d < nb; d++) batch *= q->shape[d];
  plan->params[P_L] = L;
  plan->params[P_S] = S;
  plan->params[P_E] = E;
  plan->params[P_EV] = Ev;
  plan->params[P_BATCH] = batch;
  plan->params[P_CAUSAL] = causal;
  plan->params[P_GROUPS] = groups;
  plan->params[P_HAS_MASK] = mask != NULL;
  plan->params[P_MASK_BOOL] = mask && mask->dtype == OA_DTYPE_BOOL;
  plan->scratch_bytes = (size_t)(S ? S : 1) * sizeof(double);
  return OA_OK;
}

/* Flat batch index of t (k, v or mask) for query batch index b, following broadcast rules. */
static int64_t map_batch(const oa_tensor_t *q, const oa_tensor_t *t, int64_t b, int64_t groups, int32_t tail) {
  int32_t nb = q->ndim - 2, tb = t->ndim - tail;
  int64_t idx = 0, mul = 1;
  for (int32_t d = nb - 1; d >= 0; d--) {
    int64_t qi = b % q->shape[d];
    b /= q->shape[d];
    int32_t td = d - (nb - tb);
    if (td < 0) continue;
    int64_t n = t->shape[td];
    int64_t ti = n == 1 ? 0 : qi;
    if (groups > 1 && d == nb - 1 && tail == 2 && n * groups == q->shape[d]) ti = qi / groups;
    idx += ti * mul;
    mul *= n;
  }
  return idx;
}

oa_status_t oa_ref_sdpa_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  const oa_tensor_t *qt = call->inputs[0], *kt = call->inputs[1], *vt = call->inputs[2];
  const oa_tensor_t *mt = plan->params[P_HAS_MASK] ? call->inputs[3] : NULL;
  const float *q = (const float *)qt->data, *k = (const float *)kt->data, *v = (const float *)vt->data;
  float *out = (float *)call->outputs[0]->data;
  int64_t L = plan->params[P_L], S = plan->params[P_S], E = plan->params[P_E], Ev = plan->params[P_EV];
  int64_t batch = plan->params[P_BATCH], groups = plan->params[P_GROUPS];
  int causal = (int)plan->params[P_CAUSAL];
  double scale =
      call->n_floats > OA_ARG_SDPA_SCALE ? call->floats[OA_ARG_SDPA_SCALE] : 1.0 / sqrt((double)(E ? E : 1));
  double *p = (double *)scratch;
  /* mask strides for its last two dims (broadcast when size 1) */
  int64_t m_rows = mt ? (mt->ndim >= 2 ? mt->shape[mt->ndim - 2] : 1) : 0;
  int64_t m_cols = mt ? (mt->ndim >= 1 ? mt->shape[mt->ndim - 1] : 1) : 0;
  for (int64_t b = 0; b < batch; b++) {
    const float *qb = q + b * L * E;
    const float *kb = k + map_batch(qt, kt, b, groups, 2) * S * E;
    const float *vb = v + map_batch(qt, vt, b, groups, 2) * S * Ev;
    int64_t mb = mt ? map_batch(qt, mt, b, 1, mt->ndim >= 2 ? 2 : mt->ndim) : 0;
    for (int64_t i = 0; i < L; i++) {
      const float *qi = qb + i * E;
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; j++) {
        double s;
        if (causal && j > i) {
          s = -INFINITY;
        } else {
          const float *kj = kb + j * E;
          double acc = 0.0;
          for (int64_t e = 0; e < E; e++) acc += (double)qi[e] * (double)kj[e];
          s = acc * scale;
          if (mt) {
            int64_t mi = (m_rows == 1 ? 0 : i) * m_cols + (m_cols == 1 ? 0 : j) + mb * m_rows * m_cols;
            if (plan->params[P_MASK_BOOL]) {
              if (!((const uint8_t *)mt->data)[mi]) s = -INFINITY;
            } else {
              s += ((const float *)mt->data)[mi];
            }
          }
        }
        p[j] = s;
        if (s > mx || s != s) mx = s;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < S; j++) {
        p[j] = exp(p[j] - mx); /* a fully masked row gives NaN, like PyTorch's math path */
        sum += p[j];
      }
      float *oi = out + (b * L + i) * Ev;
      for (int64_t e = 0; e < Ev; e++) {
        double acc = 0.0;
        for (int64_t j = 0; j < S; j++) acc += p[j] * (double)vb[j * Ev + e];
        oi[e] = (float)(acc / sum);
      }
    }
  }
  return OA_OK;
}
