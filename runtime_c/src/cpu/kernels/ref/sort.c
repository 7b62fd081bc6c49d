/* Reference sorting and selection kernels: sort, topk, kthvalue, median, mode, nonzero_static.
 *
 * The ops work on rows along one dim: a contiguous input split [outer, n, inner] around the dim
 * (a 0-d input is one row of one element), a row's elements `inner` apart. A row is sorted as
 * (key, index) pairs by a stable bottom-up merge sort in planned scratch (four arrays of n 64-bit
 * words). The key is an order-preserving uint64 image of the element: signed integers offset by
 * 2^63, float32 bits turned so that unsigned order is numeric order, with -0.0 read as 0.0 and every
 * NaN the largest key. So one sort serves every dtype, NaN sorts as the largest value and equal
 * elements keep their input order, as PyTorch's stable sort. Output values are copied from the
 * input element the index names (a -0.0 or a NaN's payload stays what it was). */
#include <stdint.h>

#include "kernels/kernel.h"

/* plan->params layout */
enum { P_OUTER, P_N, P_INNER, P_K, P_FLAG };

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

static const uint64_t k_nan_key = UINT64_MAX;

/* The order key of element i. */
static uint64_t key_at(const oa_tensor_t *x, int64_t i) {
  const uint64_t bias = (uint64_t)1 << 63;
  switch (x->dtype) {
    case OA_DTYPE_FLOAT32: {
      float f = ((const float *)x->data)[i];
      if (f != f) return k_nan_key;
      if (f == 0.0f) f = 0.0f; /* -0.0 == 0.0 */
      uint32_t b;
      memcpy(&b, &f, sizeof b);
      return (b & 0x80000000u) ? (uint64_t)~b : (uint64_t)(b | 0x80000000u);
    }
    case OA_DTYPE_INT32: return (uint64_t)(int64_t)((const int32_t *)x->data)[i] ^ bias;
    case OA_DTYPE_INT64: return (uint64_t)((const int64_t *)x->data)[i] ^ bias;
    case OA_DTYPE_INT8: return (uint64_t)(int64_t)((const int8_t *)x->data)[i] ^ bias;
    default: return ((const uint8_t *)x->data)[i]; /* uint8, bool */
  }
}

/* Row `r` of the [outer, n, inner] split: element i of it is at start + i * inner. */
static int64_t row_start(int64_t r, int64_t n, int64_t inner) { return (r / inner) * n * inner + r % inner; }

/* Sort row (start, n, inner) of x: on return *keys / *idx point at the sorted keys and indices
 * (into the row) inside `scratch` (4 n words). Stable: equal keys keep their input order, and with
 * `descending` the larger keys come first. */
static void sort_row(const oa_tensor_t *x, int64_t start, int64_t n, int64_t inner, int descending, uint64_t *scratch,
                     const uint64_t **keys, const int64_t **idx) {
  uint64_t *ka = scratch, *kb = scratch + 2 * n;
  int64_t *ia = (int64_t *)(void *)(scratch + n), *ib = (int64_t *)(void *)(scratch + 3 * n);
  for (int64_t i = 0; i < n; i++) {
    ka[i] = key_at(x, start + i * inner);
    ia[i] = i;
  }
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t l = lo, r = mid, o = lo;
      while (l < mid && r < hi) {
        int left = descending ? ka[l] >= ka[r] : ka[l] <= ka[r];
        if (left) {
          kb[o] = ka[l];
          ib[o++] = ia[l++];
        } else {
          kb[o] = ka[r];
          ib[o++] = ia[r++];
        }
      }
      for (; l < mid; l++, o++) {
        kb[o] = ka[l];
        ib[o] = ia[l];
      }
      for (; r < hi; r++, o++) {
        kb[o] = ka[r];
        ib[o] = ia[r];
      }
    }
    uint64_t *tk = ka;
    int64_t *ti = ia;
    ka = kb;
    ia = ib;
    kb = tk;
    ib = ti;
  }
  *keys = ka;
  *idx = ia;
}

/* ---- checks ---------------------------------------------------------------------------------- */

/* The dim argument ints[i] (normalized by the exporter): 0 <= dim < max(ndim, 1). */
static oa_status_t check_dim(const oa_op_call_t *call, const oa_tensor_t *x, uint32_t i, int32_t *out_dim,
                             oa_diag_t *diag) {
  int64_t dim = iarg(call, i);
  int32_t lim = x->ndim > 0 ? x->ndim : 1;
  if (dim < 0 || dim >= lim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dim = %lld: expected 0 <= dim < %d (input has %d dims)",
                        (long long)dim, lim, x->ndim);
  *out_dim = (int32_t)dim;
  return OA_OK;
}

static oa_status_t check_flag(const oa_op_call_t *call, uint32_t i, const char *arg, oa_diag_t *diag) {
  int64_t v = iarg(call, i);
  if (v != 0 && v != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld: expected 0 or 1", arg, (long long)v);
  return OA_OK;
}

/* [outer, n, inner] around dim into plan->params; scratch for sorting one row. */
static oa_status_t plan_rows(const oa_tensor_t *x, int32_t dim, oa_op_plan_t *plan, oa_diag_t *diag) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (d < dim) outer *= x->shape[d];
    else if (d == dim) n = x->shape[d];
    else inner *= x->shape[d];
  }
  plan->params[P_OUTER] = outer;
  plan->params[P_N] = n;
  plan->params[P_INNER] = inner;
  if ((uint64_t)n > (uint64_t)(SIZE_MAX / (4 * sizeof(uint64_t))))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "rows of %lld elements do not fit this platform's address space",
                        (long long)n);
  plan->scratch_bytes = (size_t)n * 4 * sizeof(uint64_t);
  return OA_OK;
}

/* Output `i` of dtype `dtype` (or the input's when dtype < 0) and `shape`. */
static oa_status_t check_output(const oa_op_call_t *call, uint32_t i, int32_t dtype, const int64_t *shape,
                                int32_t ndim, const char *arg, oa_diag_t *diag) {
  const oa_tensor_t *y = call->outputs[i];
  oa_status_t st = dtype < 0 ? oa_check_same_dtype(call, y, call->inputs[0], arg, diag)
                             : oa_check_dtype(call, y, OA_DTYPE_BIT(dtype), arg, diag);
  if (st) return st;
  return oa_check_shape(call, y, shape, ndim, arg, diag);
}

/* The shape of x reduced over dim (kept as 1 with keepdim); a 0-d input gives a 0-d output. */
static int32_t reduced_shape(const oa_tensor_t *x, int32_t dim, int keepdim, int64_t *shape) {
  int32_t nd = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (d != dim) shape[nd++] = x->shape[d];
    else if (keepdim) shape[nd++] = 1;
  }
  return nd;
}

/* Common prepare of the ops reducing a row to one element (kthvalue, median, mode): input, dim,
 * keepdim, outputs (values like the input, indices int64) of the reduced shape. */
static oa_status_t select_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, uint64_t dtypes, uint32_t dim_arg,
                                  uint32_t keepdim_arg, uint32_t min_out, oa_diag_t *diag) {
  oa_status_t st;
  if (call->n_outputs < min_out || call->n_outputs > 2)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected %s outputs (values, indices), received %u",
                        min_out == 2 ? "2" : "1 or 2", call->n_outputs);
  if ((st = oa_check_arity(call, 1, 1, call->n_outputs, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, dtypes, "input 0 (self)", diag))) return st;
  int32_t dim = 0;
  if ((st = check_dim(call, x, dim_arg, &dim, diag))) return st;
  if ((st = check_flag(call, keepdim_arg, "keepdim", diag))) return st;
  int64_t shape[OA_MAX_DIMS];
  int32_t nd = reduced_shape(x, dim, (int)iarg(call, keepdim_arg), shape);
  if ((st = check_output(call, 0, -1, shape, nd, "output 0 (values)", diag))) return st;
  if (call->n_outputs > 1 && (st = check_output(call, 1, OA_DTYPE_INT64, shape, nd, "output 1 (indices)", diag)))
    return st;
  if ((st = plan_rows(x, dim, plan, diag))) return st;
  if (plan->params[P_N] == 0 && call->outputs[0]->numel > 0) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 0 (self) ('%s'): cannot take %s over an empty dim (shape %s)",
                        x->name, call->op, oa_shape_str(x, s, sizeof s));
  }
  return OA_OK;
}

/* Write the selected element `pos` of row r (its index into the row) as output element r. */
static void store_selected(const oa_op_call_t *call, const oa_op_plan_t *plan, int64_t r, int64_t pos) {
  const oa_tensor_t *x = call->inputs[0];
  int64_t n = plan->params[P_N], inner = plan->params[P_INNER];
  oa_copy_elem(call->outputs[0]->data, r, x->data, row_start(r, n, inner) + pos * inner, oa_dtype_size(x->dtype));
  if (call->n_outputs > 1) ((int64_t *)call->outputs[1]->data)[r] = pos;
}

/* ---- sort ------------------------------------------------------------------------------------ */

oa_status_t oa_ref_sort_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 2, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  int32_t dim = 0;
  if ((st = check_dim(call, x, OA_ARG_SORT_DIM, &dim, diag))) return st;
  if ((st = check_flag(call, OA_ARG_SORT_DESCENDING, "descending", diag))) return st;
  if ((st = check_output(call, 0, -1, x->shape, x->ndim, "output 0 (values)", diag)) ||
      (st = check_output(call, 1, OA_DTYPE_INT64, x->shape, x->ndim, "output 1 (indices)", diag)))
    return st;
  plan->params[P_FLAG] = iarg(call, OA_ARG_SORT_DESCENDING);
  return plan_rows(x, dim, plan, diag);
}

/* The first `k` of each sorted row into outputs of [outer, k, inner] (sort: k = n). */
static void sorted_rows(const oa_op_call_t *call, const oa_op_plan_t *plan, int64_t k, int descending, void *scratch) {
  const oa_tensor_t *x = call->inputs[0];
  int64_t n = plan->params[P_N], inner = plan->params[P_INNER], rows = plan->params[P_OUTER] * inner;
  size_t es = oa_dtype_size(x->dtype);
  void *vals = call->outputs[0]->data;
  int64_t *out_idx = (int64_t *)call->outputs[1]->data;
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t *keys;
    const int64_t *idx;
    int64_t start = row_start(r, n, inner), ostart = row_start(r, k, inner);
    sort_row(x, start, n, inner, descending, (uint64_t *)scratch, &keys, &idx);
    for (int64_t i = 0; i < k; i++) {
      oa_copy_elem(vals, ostart + i * inner, x->data, start + idx[i] * inner, es);
      out_idx[ostart + i * inner] = idx[i];
    }
  }
}

oa_status_t oa_ref_sort_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  sorted_rows(call, plan, plan->params[P_N], (int)plan->params[P_FLAG], scratch);
  return OA_OK;
}

/* ---- topk ------------------------------------------------------------------------------------ */

oa_status_t oa_ref_topk_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 2, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_NUM | OA_DT_U8 | OA_DT_I8, "input 0 (self)", diag))) return st;
  int32_t dim = 0;
  if ((st = check_dim(call, x, OA_ARG_TOPK_DIM, &dim, diag))) return st;
  if ((st = check_flag(call, OA_ARG_TOPK_LARGEST, "largest", diag))) return st;
  if ((st = plan_rows(x, dim, plan, diag))) return st;
  /* k from the values output: x's shape with dim's size k <= n */
  int64_t shape[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
  int64_t k = x->ndim > 0 && y->ndim == x->ndim ? y->shape[dim] : 1;
  if (k > plan->params[P_N]) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "output 0 (values) ('%s'): k = %lld (its size in dim %d) is larger than that dim of input 0 "
                        "(self) ('%s') %s", y->name, (long long)k, dim, x->name, oa_shape_str(x, s, sizeof s));
  }
  if (x->ndim > 0) shape[dim] = k;
  if ((st = check_output(call, 0, -1, shape, x->ndim, "output 0 (values)", diag)) ||
      (st = check_output(call, 1, OA_DTYPE_INT64, shape, x->ndim, "output 1 (indices)", diag)))
    return st;
  plan->params[P_K] = k;
  plan->params[P_FLAG] = iarg(call, OA_ARG_TOPK_LARGEST);
  return OA_OK;
}

oa_status_t oa_ref_topk_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  sorted_rows(call, plan, plan->params[P_K], (int)plan->params[P_FLAG], scratch);
  return OA_OK;
}

/* ---- kthvalue -------------------------------------------------------------------------------- */

oa_status_t oa_ref_kthvalue_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                    oa_diag_t *diag) {
  (void)env;
  oa_status_t st = select_prepare(call, plan, OA_DT_NUM | OA_DT_U8 | OA_DT_I8, OA_ARG_KTHVALUE_DIM,
                                  OA_ARG_KTHVALUE_KEEPDIM, 2, diag);
  if (st) return st;
  int64_t k = iarg(call, OA_ARG_KTHVALUE_K), n = plan->params[P_N];
  if (k < 1 || k > n)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument k = %lld is out of range (expected 1 to %lld, the size "
                        "of dim %lld)", (long long)k, (long long)n, (long long)iarg(call, OA_ARG_KTHVALUE_DIM));
  plan->params[P_K] = k;
  return OA_OK;
}

oa_status_t oa_ref_kthvalue_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  int64_t n = plan->params[P_N], inner = plan->params[P_INNER], rows = plan->params[P_OUTER] * inner;
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t *keys;
    const int64_t *idx;
    sort_row(call->inputs[0], row_start(r, n, inner), n, inner, 0, (uint64_t *)scratch, &keys, &idx);
    store_selected(call, plan, r, idx[plan->params[P_K] - 1]);
  }
  return OA_OK;
}

/* ---- median ---------------------------------------------------------------------------------- */

oa_status_t oa_ref_median_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  oa_status_t st = select_prepare(call, plan, OA_DT_NUM | OA_DT_U8 | OA_DT_I8, OA_ARG_MEDIAN_DIM,
                                  OA_ARG_MEDIAN_KEEPDIM, 1, diag);
  if (st) return st;
  if ((st = check_flag(call, OA_ARG_MEDIAN_IGNORE_NAN, "ignore_nan", diag))) return st;
  plan->params[P_FLAG] = iarg(call, OA_ARG_MEDIAN_IGNORE_NAN);
  return OA_OK;
}

oa_status_t oa_ref_median_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  int64_t n = plan->params[P_N], inner = plan->params[P_INNER], rows = plan->params[P_OUTER] * inner;
  int ignore_nan = (int)plan->params[P_FLAG];
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t *keys;
    const int64_t *idx;
    sort_row(call->inputs[0], row_start(r, n, inner), n, inner, 0, (uint64_t *)scratch, &keys, &idx);
    int64_t m = n; /* NaNs sort last: m = the count of the others */
    while (m > 0 && keys[m - 1] == k_nan_key) m--;
    int64_t pos;
    if (m == n) pos = (n - 1) / 2;
    else if (ignore_nan) pos = m > 0 ? (m - 1) / 2 : 0; /* all NaN: the first one */
    else pos = m;                                        /* a NaN: the first one */
    store_selected(call, plan, r, idx[pos]);
  }
  return OA_OK;
}

/* ---- mode ------------------------------------------------------------------------------------ */

oa_status_t oa_ref_mode_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  return select_prepare(call, plan, OA_DT_ALL, OA_ARG_MODE_DIM, OA_ARG_MODE_KEEPDIM, 2, diag);
}

oa_status_t oa_ref_mode_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  int64_t n = plan->params[P_N], inner = plan->params[P_INNER], rows = plan->params[P_OUTER] * inner;
  for (int64_t r = 0; r < rows; r++) {
    const uint64_t *keys;
    const int64_t *idx;
    sort_row(call->inputs[0], row_start(r, n, inner), n, inner, 0, (uint64_t *)scratch, &keys, &idx);
    /* the longest run of equal keys, the first (smallest value) among equally long ones; its last
     * element is the value's last occurrence (the sort is stable) */
    int64_t best = 0, best_len = 0;
    for (int64_t i = 0; i < n;) {
      int64_t j = i + 1;
      while (j < n && keys[j] == keys[i]) j++;
      if (j - i > best_len) {
        best_len = j - i;
        best = j - 1;
      }
      i = j;
    }
    store_selected(call, plan, r, idx[best]);
  }
  return OA_OK;
}

/* ---- nonzero_static -------------------------------------------------------------------------- */

oa_status_t oa_ref_nonzero_static_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                          oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I64, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, y, 2, 2, "output 0", diag))) return st;
  int64_t want[2] = {y->shape[0], x->ndim};
  return oa_check_shape(call, y, want, 2, "output 0", diag);
}

static int is_nonzero(const oa_tensor_t *x, int64_t i) {
  switch (x->dtype) {
    case OA_DTYPE_FLOAT32: return ((const float *)x->data)[i] != 0.0f; /* NaN is nonzero */
    case OA_DTYPE_INT32: return ((const int32_t *)x->data)[i] != 0;
    case OA_DTYPE_INT64: return ((const int64_t *)x->data)[i] != 0;
    default: return ((const uint8_t *)x->data)[i] != 0; /* bool, uint8, int8 */
  }
}

oa_status_t oa_ref_nonzero_static_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                      const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int64_t *out = (int64_t *)y->data, size = y->shape[0], nd = x->ndim, rows = 0;
  int64_t pos[OA_MAX_DIMS] = {0};
  for (int64_t i = 0; i < x->numel && rows < size; i++) {
    if (is_nonzero(x, i)) {
      for (int64_t d = 0; d < nd; d++) out[rows * nd + d] = pos[d];
      rows++;
    }
    for (int64_t d = nd - 1; d >= 0; d--) { /* row-major odometer */
      if (++pos[d] < x->shape[d]) break;
      pos[d] = 0;
    }
  }
  int64_t fill = iarg(call, OA_ARG_NONZERO_STATIC_FILL_VALUE);
  for (int64_t i = rows * nd; i < size * nd; i++) out[i] = fill;
  return OA_OK;
}
