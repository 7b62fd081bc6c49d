/* Reference indexing kernels: embedding, index_select, gather (aten.index with several index
 * tensors, and the scatter family: ref/scatter.c). Index tensors are int32 or int64
 * and are range-checked at run time (the only data-dependent failure): the error names the
 * index value and its position in the index tensor. */
#include "kernels/kernel.h"

static size_t elsize(const oa_tensor_t *t) { return oa_dtype_size(t->dtype); }

static int64_t prod(const int64_t *shape, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t d = from; d < to; d++) p *= shape[d];
  return p;
}

/* ---- embedding ---------------------------------------------------------------------------- */

oa_status_t oa_ref_embedding_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (weight)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (indices)", diag)))
    return st;
  const oa_tensor_t *w = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, w, OA_DT_ALL, "input 0 (weight)", diag))) return st;
  if ((st = oa_check_dtype(call, idx, OA_DT_INT, "input 1 (indices)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, w, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, w, 2, 2, "input 0 (weight)", diag))) return st;
  if ((st = oa_check_ndim(call, idx, 0, OA_MAX_DIMS - 1, "input 1 (indices)", diag))) return st;
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < idx->ndim; d++) want[d] = idx->shape[d];
  want[idx->ndim] = w->shape[1];
  return oa_check_shape(call, y, want, idx->ndim + 1, "output 0", diag);
}

oa_status_t oa_ref_embedding_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *w = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  int64_t rows = w->shape[0], row = w->shape[1] * (int64_t)elsize(w);
  const uint8_t *src = (const uint8_t *)w->data;
  uint8_t *dst = (uint8_t *)y->data;
  for (int64_t i = 0; i < idx->numel; i++) {
    int64_t v = oa_load_index(idx, i);
    if (v < 0 || v >= rows) {
      char p[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "input 1 (indices) ('%s'): index %lld at position %s is out of range for input 0 (weight) "
                          "('%s') with %lld rows (expected 0 to %lld)", idx->name, (long long)v,
                          oa_position_str(idx, i, p, sizeof p), w->name, (long long)rows, (long long)rows - 1);
    }
    if (row) memcpy(dst + i * row, src + v * row, (size_t)row);
  }
  return OA_OK;
}

/* ---- index_select ------------------------------------------------------------------------- */

oa_status_t oa_ref_index_select_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                        oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (index)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_MOVE, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, idx, OA_DT_INT, "input 1 (index)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  if ((st = oa_check_ndim(call, idx, 0, 1, "input 1 (index)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_INDEX_SELECT_DIM];
  if (dim < 0 || dim >= x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dim = %lld is out of range for a %d-dim tensor "
                        "(expected 0 to %d)", (long long)dim, x->ndim, x->ndim - 1);
  int64_t wrap = call->n_ints > OA_ARG_INDEX_SELECT_NEGATIVE_WRAPS ? call->ints[OA_ARG_INDEX_SELECT_NEGATIVE_WRAPS] : 0;
  if (wrap != 0 && wrap != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument negative_wraps = %lld: expected 0 or 1",
                        (long long)wrap);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  want[dim] = idx->numel;
  return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
}

oa_status_t oa_ref_index_select_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  int32_t dim = (int32_t)call->ints[OA_ARG_INDEX_SELECT_DIM];
  int wrap = call->n_ints > OA_ARG_INDEX_SELECT_NEGATIVE_WRAPS && call->ints[OA_ARG_INDEX_SELECT_NEGATIVE_WRAPS] == 1;
  int64_t size = x->shape[dim], n = idx->numel;
  /* check every index first so a bad one fails before any output is written */
  for (int64_t j = 0; j < n; j++) {
    int64_t v = oa_load_index(idx, j);
    if (wrap && v < 0) v += size;
    if (v < 0 || v >= size) {
      char p[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "input 1 (index) ('%s'): index %lld at position %s is out of range for dim %d of input 0 "
                          "(self) ('%s') with size %lld (expected %s%lld to %lld)", idx->name,
                          (long long)oa_load_index(idx, j), oa_position_str(idx, j, p, sizeof p), dim, x->name,
                          (long long)size, wrap ? "-" : "", (long long)(wrap ? size : 0), (long long)size - 1);
    }
  }
  int64_t es = (int64_t)elsize(x);
  int64_t outer = prod(x->shape, 0, dim), inner = prod(x->shape, dim + 1, x->ndim) * es;
  if (!inner) return OA_OK;
  const uint8_t *src = (const uint8_t *)x->data;
  uint8_t *dst = (uint8_t *)y->data;
  for (int64_t o = 0; o < outer; o++) {
    const uint8_t *s = src + o * size * inner;
    uint8_t *d = dst + o * n * inner;
    for (int64_t j = 0; j < n; j++) {
      int64_t v = oa_load_index(idx, j);
      if (v < 0) v += size;
      memcpy(d + j * inner, s + v * inner, (size_t)inner);
    }
  }
  return OA_OK;
}

/* ---- gather ------------------------------------------------------------------------------- */

oa_status_t oa_ref_gather_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (index)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, idx, OA_DT_INT, "input 1 (index)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, idx, x->ndim, x->ndim, "input 1 (index)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_GATHER_DIM];
  int32_t nd = x->ndim > 0 ? x->ndim : 1;
  if (dim < 0 || dim >= nd)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dim = %lld is out of range for a %d-dim tensor "
                        "(expected 0 to %d)", (long long)dim, x->ndim, nd - 1);
  for (int32_t d = 0; d < x->ndim; d++)
    if (d != dim && idx->shape[d] > x->shape[d]) {
      char a[128], b[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "input 1 (index) ('%s'): shape %s is larger than input 0 (self) ('%s') %s in dim %d", idx->name,
                          oa_shape_str(idx, a, sizeof a), x->name, oa_shape_str(x, b, sizeof b), d);
    }
  return oa_check_same_shape(call, y, idx, "output 0", diag);
}

oa_status_t oa_ref_gather_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *y = call->outputs[0];
  int32_t dim = (int32_t)call->ints[OA_ARG_GATHER_DIM];
  size_t es = elsize(x);
  int64_t xs[OA_MAX_DIMS], zero[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  int64_t size = x->ndim > 0 ? x->shape[dim] : 1, dim_stride = x->ndim > 0 ? xs[dim] : 0;
  for (int32_t d = 0; d < x->ndim; d++) zero[d] = 0;
  if (x->ndim > 0) xs[dim] = 0; /* the index along `dim` comes from the index tensor */
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, idx->shape, idx->ndim, 1, xs, zero, zero);
  const uint8_t *src = (const uint8_t *)x->data;
  uint8_t *dst = (uint8_t *)y->data;
  for (int64_t i = 0; i < idx->numel; i++) {
    int64_t v = oa_load_index(idx, i);
    if (v < 0 || v >= size) {
      char p[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                          "input 1 (index) ('%s'): index %lld at position %s is out of range for dim %d of input 0 "
                          "(self) ('%s') with size %lld (expected 0 to %lld)", idx->name, (long long)v,
                          oa_position_str(idx, i, p, sizeof p), dim, x->name, (long long)size, (long long)size - 1);
    }
    oa_copy_elem(dst, i, src, it.off[0] + v * dim_stride, es);
    oa_nd_iter_next(&it);
  }
  return OA_OK;
}
