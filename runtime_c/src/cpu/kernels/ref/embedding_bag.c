/* Reference embedding_bag (F.embedding_bag / nn.EmbeddingBag; aten._embedding_bag[_forward_only]),
 * float32 weights, int32 / int64 indices and offsets.
 *
 * Bag b is indices[offsets[b] : offsets[b + 1]], the last one ending at L (without
 * include_last_offset the offsets list has one entry per bag). Rows equal to padding_idx are
 * skipped. The order and rounding are PyTorch's CPU kernel's: sum adds the rows in index order in
 * float32, times per_sample_weights as one fused multiply-add per element without padding_idx
 * (fbgemm) or a multiply then an add with it; mean divides that sum by the bag's non-padding count;
 * max takes the bag's first row, then a value strictly greater (a NaN stays only where it came
 * first). An empty bag gives zeros. With include_last_offset and offsets[B] < L, PyTorch counts
 * indices[offsets[B]:] in the last bag's max and mean divisor, and in its sum when padding_idx is
 * given: so does this kernel.
 * Offsets (offsets[0] = 0, non-decreasing, at most L) and indices (0 to V - 1) are checked at run
 * time, before anything is written; the error names the position and value. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

enum { MODE_SUM, MODE_MEAN, MODE_MAX };

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

oa_status_t oa_ref_embedding_bag_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                         oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 4, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (weight)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (indices)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (offsets)", diag)))
    return st;
  const oa_tensor_t *w = call->inputs[0], *idx = call->inputs[1], *off = call->inputs[2], *y = call->outputs[0];
  const oa_tensor_t *psw = call->n_inputs > 3 ? call->inputs[3] : NULL;
  if ((st = oa_check_dtype(call, w, OA_DT_F32, "input 0 (weight)", diag)) ||
      (st = oa_check_dtype(call, idx, OA_DT_INT, "input 1 (indices)", diag)) ||
      (st = oa_check_dtype(call, off, OA_DT_INT, "input 2 (offsets)", diag)) ||
      (st = oa_check_same_dtype(call, y, w, "output 0", diag)))
    return st;
  if ((st = oa_check_ndim(call, w, 2, 2, "input 0 (weight)", diag)) ||
      (st = oa_check_ndim(call, idx, 1, 1, "input 1 (indices)", diag)) ||
      (st = oa_check_ndim(call, off, 1, 1, "input 2 (offsets)", diag)))
    return st;
  int64_t mode = iarg(call, OA_ARG_EMBEDDING_BAG_MODE), last = iarg(call, OA_ARG_EMBEDDING_BAG_INCLUDE_LAST_OFFSET);
  int64_t pad = iarg(call, OA_ARG_EMBEDDING_BAG_PADDING_IDX);
  if (mode < MODE_SUM || mode > MODE_MAX)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument mode = %lld is out of range (expected 0 to 2: sum, "
                        "mean, max)", (long long)mode);
  if (last != 0 && last != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument include_last_offset = %lld is out of range (expected 0 or 1)", (long long)last);
  if (pad < -1 || pad >= w->shape[0])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument padding_idx = %lld is out of range (expected -1 to "
                        "%lld)", (long long)pad, (long long)w->shape[0] - 1);
  if (last && off->shape[0] < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 2 (offsets) ('%s') is empty: include_last_offset needs at least one offset", off->name);
  if (psw) {
    if (mode != MODE_SUM)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 3 (per_sample_weights) is only allowed with mode 0 "
                          "(sum), received mode %lld", (long long)mode);
    if ((st = oa_check_same_dtype(call, psw, w, "input 3 (per_sample_weights)", diag)) ||
        (st = oa_check_same_shape(call, psw, idx, "input 3 (per_sample_weights)", diag)))
      return st;
  }
  int64_t want[2] = {off->shape[0] - last, w->shape[1]};
  return oa_check_shape(call, y, want, 2, "output 0", diag);
}

oa_status_t oa_ref_embedding_bag_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *w = call->inputs[0], *idx = call->inputs[1], *off = call->inputs[2];
  const oa_tensor_t *psw_t = call->n_inputs > 3 ? call->inputs[3] : NULL;
  const int mode = (int)iarg(call, OA_ARG_EMBEDDING_BAG_MODE), last = (int)iarg(call, OA_ARG_EMBEDDING_BAG_INCLUDE_LAST_OFFSET);
  const int64_t pad = iarg(call, OA_ARG_EMBEDDING_BAG_PADDING_IDX);
  const int64_t rows = w->shape[0], e_n = w->shape[1], n_idx = idx->shape[0], n_off = off->shape[0];
  const int64_t bags = call->outputs[0]->shape[0];
  /* check every offset and index first so a bad one fails before any output is written */
  for (int64_t b = 0; b < n_off; b++) {
    int64_t v = oa_load_index(off, b), prev = b ? oa_load_index(off, b - 1) : 0;
    if ((b == 0 && v != 0) || v < prev || v > n_idx)
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "input 2 (offsets) ('%s'): offset %lld at position [%lld] is out of range (expected %lld "
                          "to %lld: offsets start at 0 and do not decrease, up to the %lld indices)",
                          off->name, (long long)v, (long long)b, (long long)(b ? prev : 0), (long long)(b ? n_idx : 0),
                          (long long)n_idx);
  }
  for (int64_t k = 0; k < n_idx; k++) {
    int64_t v = oa_load_index(idx, k);
    if (v < 0 || v >= rows)
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "input 1 (indices) ('%s'): index %lld at position [%lld] is out of range for input 0 "
                          "(weight) ('%s') with %lld rows (expected 0 to %lld)",
                          idx->name, (long long)v, (long long)k, w->name, (long long)rows, (long long)rows - 1);
  }
  const float *wd = (const float *)w->data;
  const float *psw = psw_t ? (const float *)psw_t->data : NULL;
  float *y = (float *)call->outputs[0]->data;
  const int fused = pad < 0; /* PyTorch's fbgemm path: no padding_idx */
  for (int64_t b = 0; b < bags; b++) {
    int64_t start = oa_load_index(off, b), end = b + 1 < n_off ? oa_load_index(off, b + 1) : n_idx;
    /* with include_last_offset the last bag's max and mean divisor run on to L, and so does its sum
       without fbgemm (padding_idx given): PyTorch assigns indices past offsets[B] to the last bag */
    int64_t end_all = last && b == bags - 1 ? n_idx : end, sum_end = fused ? end : end_all;
    float *out = y + b * e_n;
    for (int64_t e = 0; e < e_n; e++) out[e] = 0.0f;
    int64_t count = 0;
    for (int64_t k = start; k < end_all; k++) {
      int64_t r = oa_load_index(idx, k);
      if (r == pad) continue;
      const float *row = wd + r * e_n;
      if (mode == MODE_MAX) {
        for (int64_t e = 0; e < e_n; e++)
          if (count == 0 || row[e] > out[e]) out[e] = row[e];
      } else if (k >= sum_end) {
        /* counted in the mean's divisor only */
      } else if (psw && fused) {
        for (int64_t e = 0; e < e_n; e++) out[e] = fmaf(row[e], psw[k], out[e]);
      } else if (psw) {
        for (int64_t e = 0; e < e_n; e++) {
          float t = row[e] * psw[k];
          out[e] = out[e] + t;
        }
      } else {
        for (int64_t e = 0; e < e_n; e++) out[e] += row[e];
      }
      count++;
    }
    if (mode == MODE_MEAN && count > 0)
      for (int64_t e = 0; e < e_n; e++) out[e] = out[e] / (float)count;
  }
  return OA_OK;
}
