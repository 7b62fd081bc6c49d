/* Reference data-movement kernels: copy, permute, expand, slice, select, cat, split, pad, flip,
 * repeat. They move bytes only, so every dtype of a given element size shares one code path.
 *
 * Most of them are "strided copies": the output (or a box of it) is filled from the input read
 * with arbitrary per-dim byte strides (0 for broadcast, negative for flip). `xfer_t` describes
 * one such copy; xfer_simplify drops size-1 dims and merges dims that are contiguous in both
 * operands, so a slice of the last dim becomes a loop of memcpy rows. */
#include "kernels/kernel.h"

#define XF_MAX (2 * OA_MAX_DIMS) /* repeat splits each output dim in two */
#define CAT_MAX_INPUTS 64u
#define PAD_LIMIT (INT64_C(1) << 50) /* loader bound on numel: larger pads are never valid */

/* How many ints a variadic tail (permute's dims*, pad's pads*, flip's dims*) has: those from its
 * OA_ARG_<OP>_<TAIL> start on; its k-th entry is ints[OA_ARG_<OP>_<TAIL> + k]. */
static uint32_t tail_len(const oa_op_call_t *call, uint32_t start) {
  return call->n_ints > start ? call->n_ints - start : 0;
}

typedef struct xfer {
  int32_t ndim;
  int64_t shape[XF_MAX];
  int64_t ds[XF_MAX]; /* destination byte strides */
  int64_t ss[XF_MAX]; /* source byte strides */
  int64_t d0, s0;     /* starting byte offsets */
} xfer_t;

static void xfer_init(xfer_t *x) { memset(x, 0, sizeof *x); }

static void xfer_dim(xfer_t *x, int64_t n, int64_t ds, int64_t ss) {
  x->shape[x->ndim] = n;
  x->ds[x->ndim] = ds;
  x->ss[x->ndim] = ss;
  x->ndim++;
}

/* Drop size-1 dims; merge a dim into the next one when both operands are contiguous across them. */
static void xfer_simplify(xfer_t *x) {
  int32_t n = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    x->shape[n] = x->shape[d];
    x->ds[n] = x->ds[d];
    x->ss[n] = x->ss[d];
    n++;
  }
  x->ndim = n;
  if (n < 2) return;
  int32_t m = 0; /* index of the last kept (merged) dim, processed from the innermost outwards */
  int64_t shape[XF_MAX], ds[XF_MAX], ss[XF_MAX];
  shape[0] = x->shape[n - 1];
  ds[0] = x->ds[n - 1];
  ss[0] = x->ss[n - 1];
  for (int32_t d = n - 2; d >= 0; d--) {
    if (x->ds[d] == ds[m] * shape[m] && x->ss[d] == ss[m] * shape[m]) {
      shape[m] *= x->shape[d];
    } else {
      m++;
      shape[m] = x->shape[d];
      ds[m] = x->ds[d];
      ss[m] = x->ss[d];
    }
  }
  x->ndim = m + 1;
  for (int32_t d = 0; d <= m; d++) {
    x->shape[d] = shape[m - d];
    x->ds[d] = ds[m - d];
    x->ss[d] = ss[m - d];
  }
}

static void copy_row(uint8_t *dst, const uint8_t *src, int64_t n, int64_t ds, int64_t ss, size_t es) {
  if (ds == (int64_t)es && ss == (int64_t)es) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  int64_t de = ds / (int64_t)es, se = ss / (int64_t)es;
  switch (es) {
    case 1:
      for (int64_t i = 0; i < n; i++) dst[i * de] = src[i * se];
      break;
    case 2: {
      uint16_t *o = (uint16_t *)(void *)dst;
      const uint16_t *a = (const uint16_t *)(const void *)src;
      for (int64_t i = 0; i < n; i++) o[i * de] = a[i * se];
      break;
    }
    case 4: {
      uint32_t *o = (uint32_t *)(void *)dst;
      const uint32_t *a = (const uint32_t *)(const void *)src;
      for (int64_t i = 0; i < n; i++) o[i * de] = a[i * se];
      break;
    }
    case 8: {
      uint64_t *o = (uint64_t *)(void *)dst;
      const uint64_t *a = (const uint64_t *)(const void *)src;
      for (int64_t i = 0; i < n; i++) o[i * de] = a[i * se];
      break;
    }
    default:
      for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, es);
      break;
  }
}

/* Run a strided copy. Offsets stay within both tensors: prepare validated every extent. */
static void xfer_run(uint8_t *dst, const uint8_t *src, xfer_t *x, size_t es) {
  for (int32_t d = 0; d < x->ndim; d++)
    if (x->shape[d] == 0) return;
  xfer_simplify(x);
  int32_t nd = x->ndim;
  if (nd == 0) {
    memcpy(dst + x->d0, src + x->s0, es);
    return;
  }
  int64_t idx[XF_MAX];
  for (int32_t d = 0; d < nd; d++) idx[d] = 0;
  int64_t doff = x->d0, soff = x->s0;
  int64_t n = x->shape[nd - 1], dsi = x->ds[nd - 1], ssi = x->ss[nd - 1];
  for (;;) {
    copy_row(dst + doff, src + soff, n, dsi, ssi, es);
    int32_t d = nd - 2;
    for (; d >= 0; d--) {
      doff += x->ds[d];
      soff += x->ss[d];
      if (++idx[d] < x->shape[d]) break;
      doff -= x->ds[d] * x->shape[d];
      soff -= x->ss[d] * x->shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

/* ---- shared prepare pieces ---------------------------------------------------------------- */

/* One present input `self` of any supported dtype, one output of the same dtype. */
static oa_status_t unary_move_prepare(const oa_op_call_t *call, uint32_t min_ints, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, min_ints, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, call->inputs[0], OA_DT_MOVE, "input 0 (self)", diag))) return st;
  return oa_check_same_dtype(call, call->outputs[0], call->inputs[0], "output 0", diag);
}

static size_t elsize(const oa_tensor_t *t) { return oa_dtype_size(t->dtype); }

static int64_t prod(const int64_t *shape, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t d = from; d < to; d++) p *= shape[d];
  return p;
}

/* A dim argument that must already be normalized to [0, ndim). */
static oa_status_t check_dim_arg(int64_t dim, int32_t ndim, const char *arg, oa_diag_t *diag) {
  if (dim < 0 || dim >= ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld is out of range for a %d-dim tensor "
                        "(expected 0 to %d)", arg, (long long)dim, ndim, ndim - 1);
  return OA_OK;
}

/* ---- copy --------------------------------------------------------------------------------- */

oa_status_t oa_ref_copy_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (x->numel != y->numel) {
    char a[128], b[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "output 0 ('%s'): shape %s has %lld elements, input 0 (self) ('%s') %s has %lld", y->name,
                        oa_shape_str(y, a, sizeof a), (long long)y->numel, x->name, oa_shape_str(x, b, sizeof b),
                        (long long)x->numel);
  }
  return OA_OK;
}

oa_status_t oa_ref_copy_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (x->nbytes && x->data != y->data) memmove(y->data, x->data, x->nbytes);
  return OA_OK;
}

/* ---- permute ------------------------------------------------------------------------------ */

oa_status_t oa_ref_permute_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (tail_len(call, OA_ARG_PERMUTE_DIMS) != (uint32_t)x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: expected %d entries (one per input dim), "
                        "received %u", x->ndim, tail_len(call, OA_ARG_PERMUTE_DIMS));
  uint32_t seen = 0;
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) {
    int64_t p = call->ints[OA_ARG_PERMUTE_DIMS + d];
    if (p < 0 || p >= x->ndim || (seen & (1u << p)))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument dims[%d] = %lld: expected a permutation of 0 to %d (each dim once)", d,
                          (long long)p, x->ndim - 1);
    seen |= 1u << p;
    want[d] = x->shape[p];
  }
  return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
}

oa_status_t oa_ref_permute_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  int64_t xs[OA_MAX_DIMS], ys[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  oa_contiguous_strides(y->shape, y->ndim, ys);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < y->ndim; d++)
    xfer_dim(&t, y->shape[d], ys[d] * (int64_t)es, xs[call->ints[OA_ARG_PERMUTE_DIMS + d]] * (int64_t)es);
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- expand ------------------------------------------------------------------------------- */

oa_status_t oa_ref_expand_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int64_t strides[OA_MAX_DIMS];
  return oa_broadcast_strides(call, x, y->shape, y->ndim, strides, "input 0 (self)", diag);
}

oa_status_t oa_ref_expand_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  int64_t xs[OA_MAX_DIMS], ys[OA_MAX_DIMS];
  oa_status_t st = oa_broadcast_strides(call, x, y->shape, y->ndim, xs, "input 0 (self)", diag);
  if (st) return st;
  oa_contiguous_strides(y->shape, y->ndim, ys);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < y->ndim; d++) xfer_dim(&t, y->shape[d], ys[d] * (int64_t)es, xs[d] * (int64_t)es);
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- slice -------------------------------------------------------------------------------- */

oa_status_t oa_ref_slice_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 4, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_SLICE_DIM], start = call->ints[OA_ARG_SLICE_START];
  int64_t end = call->ints[OA_ARG_SLICE_END], step = call->ints[OA_ARG_SLICE_STEP];
  int64_t want[OA_MAX_DIMS];
  if ((st = oa_check_slice(x, dim, start, end, step, want, diag))) return st;
  return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
}

oa_status_t oa_ref_slice_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  int64_t dim = call->ints[OA_ARG_SLICE_DIM];
  int64_t xs[OA_MAX_DIMS], ys[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  oa_contiguous_strides(y->shape, y->ndim, ys);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < y->ndim; d++) {
    int64_t s = xs[d] * (int64_t)es;
    /* the step only matters when two or more elements are taken (then step < size: no overflow) */
    xfer_dim(&t, y->shape[d], ys[d] * (int64_t)es,
             d == dim && y->shape[d] > 1 ? s * call->ints[OA_ARG_SLICE_STEP] : s);
  }
  if (y->numel) t.s0 = call->ints[OA_ARG_SLICE_START] * xs[dim] * (int64_t)es;
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- select ------------------------------------------------------------------------------- */

oa_status_t oa_ref_select_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 2, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_SELECT_DIM], index = call->ints[OA_ARG_SELECT_INDEX];
  if ((st = check_dim_arg(dim, x->ndim, "dim", diag))) return st;
  if (index < 0 || index >= x->shape[dim])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument index = %lld is out of range for dim %lld of size "
                        "%lld (expected 0 to %lld)", (long long)index, (long long)dim, (long long)x->shape[dim],
                        (long long)x->shape[dim] - 1);
  int64_t want[OA_MAX_DIMS];
  int32_t n = 0;
  for (int32_t d = 0; d < x->ndim; d++)
    if (d != dim) want[n++] = x->shape[d];
  return oa_check_shape(call, y, want, n, "output 0", diag);
}

oa_status_t oa_ref_select_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  int64_t dim = call->ints[OA_ARG_SELECT_DIM], index = call->ints[OA_ARG_SELECT_INDEX];
  /* [outer, inner] rows: output row o is input bytes at (o * size + index) * inner */
  int64_t outer = prod(x->shape, 0, (int32_t)dim), inner = prod(x->shape, (int32_t)dim + 1, x->ndim) * (int64_t)es;
  int64_t size = x->shape[dim];
  const uint8_t *src = (const uint8_t *)x->data;
  uint8_t *dst = (uint8_t *)y->data;
  if (!inner) return OA_OK;
  for (int64_t o = 0; o < outer; o++) memcpy(dst + o * inner, src + (o * size + index) * inner, (size_t)inner);
  return OA_OK;
}

/* ---- cat ---------------------------------------------------------------------------------- */

oa_status_t oa_ref_cat_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                               oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, CAT_MAX_INPUTS, 1, 1, 0, diag))) return st;
  const oa_tensor_t *y = call->outputs[0];
  if ((st = oa_check_dtype(call, y, OA_DT_MOVE, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, y, 1, OA_MAX_DIMS, "output 0", diag))) return st;
  int64_t dim = call->ints[OA_ARG_CAT_DIM];
  if ((st = check_dim_arg(dim, y->ndim, "dim", diag))) return st;
  int64_t total = 0;
  for (uint32_t i = 0; i < call->n_inputs; i++) {
    char arg[48];
    oa_format(arg, sizeof arg, "input %u (tensors[%u])", i, i);
    if ((st = oa_check_present(call, i, arg, diag))) return st;
    const oa_tensor_t *x = call->inputs[i];
    if ((st = oa_check_same_dtype(call, x, y, arg, diag))) return st;
    if ((st = oa_check_ndim(call, x, y->ndim, y->ndim, arg, diag))) return st;
    int64_t want[OA_MAX_DIMS];
    for (int32_t d = 0; d < y->ndim; d++) want[d] = y->shape[d];
    want[dim] = x->shape[dim];
    if ((st = oa_check_shape(call, x, want, y->ndim, arg, diag))) return st;
    total += x->shape[dim];
  }
  if (total != y->shape[dim])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "output 0 ('%s'): dim %lld has size %lld, the inputs add up to %lld", y->name,
                        (long long)dim, (long long)y->shape[dim], (long long)total);
  return OA_OK;
}

oa_status_t oa_ref_cat_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *y = call->outputs[0];
  int32_t dim = (int32_t)call->ints[OA_ARG_CAT_DIM];
  int64_t es = (int64_t)elsize(y);
  int64_t outer = prod(y->shape, 0, dim), inner = prod(y->shape, dim + 1, y->ndim) * es;
  int64_t out_row = y->shape[dim] * inner;
  uint8_t *dst = (uint8_t *)y->data;
  int64_t off = 0;
  for (uint32_t i = 0; i < call->n_inputs; i++) {
    const oa_tensor_t *x = call->inputs[i];
    int64_t row = x->shape[dim] * inner;
    if (row) {
      const uint8_t *src = (const uint8_t *)x->data;
      for (int64_t o = 0; o < outer; o++) memcpy(dst + o * out_row + off, src + o * row, (size_t)row);
    }
    off += row;
  }
  return OA_OK;
}

/* ---- split -------------------------------------------------------------------------------- */

oa_status_t oa_ref_split_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if (call->n_inputs != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected 1 input, received %u", call->n_inputs);
  if (call->n_outputs < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected at least 1 output, received 0");
  if (call->n_ints < 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected at least 1 integer arguments, received 0");
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_MOVE, "input 0 (self)", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_SPLIT_DIM];
  if ((st = check_dim_arg(dim, x->ndim, "dim", diag))) return st;
  int64_t total = 0;
  for (uint32_t i = 0; i < call->n_outputs; i++) {
    char arg[32];
    oa_format(arg, sizeof arg, "output %u", i);
    const oa_tensor_t *y = call->outputs[i];
    if (!y) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s is missing", arg);
    if ((st = oa_check_same_dtype(call, y, x, arg, diag))) return st;
    if ((st = oa_check_ndim(call, y, x->ndim, x->ndim, arg, diag))) return st;
    int64_t want[OA_MAX_DIMS];
    for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
    want[dim] = y->shape[dim];
    if ((st = oa_check_shape(call, y, want, x->ndim, arg, diag))) return st;
    total += y->shape[dim];
  }
  if (total != x->shape[dim])
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "outputs: sizes along dim %lld add up to %lld, input 0 (self) ('%s') has %lld", (long long)dim,
                        (long long)total, x->name, (long long)x->shape[dim]);
  return OA_OK;
}

oa_status_t oa_ref_split_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0];
  int32_t dim = (int32_t)call->ints[OA_ARG_SPLIT_DIM];
  int64_t es = (int64_t)elsize(x);
  int64_t outer = prod(x->shape, 0, dim), inner = prod(x->shape, dim + 1, x->ndim) * es;
  int64_t in_row = x->shape[dim] * inner;
  const uint8_t *src = (const uint8_t *)x->data;
  int64_t off = 0;
  for (uint32_t i = 0; i < call->n_outputs; i++) {
    const oa_tensor_t *y = call->outputs[i];
    int64_t row = y->shape[dim] * inner;
    if (row) {
      uint8_t *dst = (uint8_t *)y->data;
      for (int64_t o = 0; o < outer; o++) memcpy(dst + o * row, src + o * in_row + off, (size_t)row);
    }
    off += row;
  }
  return OA_OK;
}

/* ---- pad (constant_pad_nd) ---------------------------------------------------------------- */

oa_status_t oa_ref_pad_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                               oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  const uint32_t n_pads = tail_len(call, OA_ARG_PAD_PADS);
  if (n_pads % 2 || n_pads / 2 > (uint32_t)x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument pads: expected an even number of entries, at most %d (2 per input dim), "
                        "received %u", 2 * x->ndim, n_pads);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) want[d] = x->shape[d];
  for (uint32_t k = 0; k < n_pads; k++) {
    int64_t p = call->ints[OA_ARG_PAD_PADS + k];
    if (p < -PAD_LIMIT || p > PAD_LIMIT)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument pads[%u] = %lld is out of range", k, (long long)p);
    want[x->ndim - 1 - (int32_t)(k / 2)] += p;
  }
  for (int32_t d = 0; d < x->ndim; d++)
    if (want[d] < 0) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument pads: dim %d of input 0 (self) ('%s') %s would get negative size %lld", d,
                          x->name, oa_shape_str(x, s, sizeof s), (long long)want[d]);
    }
  return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
}

oa_status_t oa_ref_pad_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                           const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  if (!y->numel) return OA_OK;
  /* fill with the value: one element converted (saturating), then doubled with memcpy */
  union {
    double d;
    int64_t i;
    uint8_t b[8];
  } v;
  v.i = 0;
  oa_store_from_double(v.b, y->dtype, 0, call->n_floats > OA_ARG_PAD_VALUE ? call->floats[OA_ARG_PAD_VALUE] : 0.0);
  uint8_t *dst = (uint8_t *)y->data;
  int zero = 1;
  for (size_t k = 0; k < es && k < sizeof v.b; k++) zero &= v.b[k] == 0;
  if (zero) {
    memset(dst, 0, y->nbytes);
  } else {
    memcpy(dst, v.b, es);
    size_t done = es;
    while (done < y->nbytes) {
      size_t n = done < y->nbytes - done ? done : y->nbytes - done;
      memcpy(dst + done, dst, n);
      done += n;
    }
  }
  /* copy the part of the input that survives the (possibly negative) pads */
  int64_t xs[OA_MAX_DIMS], ys[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  oa_contiguous_strides(y->shape, y->ndim, ys);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < x->ndim; d++) {
    int64_t before = 0, after = 0;
    uint32_t k = 2u * (uint32_t)(x->ndim - 1 - d);
    if (k < tail_len(call, OA_ARG_PAD_PADS)) {
      before = call->ints[OA_ARG_PAD_PADS + k];
      after = call->ints[OA_ARG_PAD_PADS + k + 1];
    }
    int64_t crop_b = before < 0 ? -before : 0, crop_a = after < 0 ? -after : 0;
    int64_t len = x->shape[d] - crop_b - crop_a;
    if (len <= 0) return OA_OK;
    t.s0 += crop_b * xs[d] * (int64_t)es;
    t.d0 += (before > 0 ? before : 0) * ys[d] * (int64_t)es;
    xfer_dim(&t, len, ys[d] * (int64_t)es, xs[d] * (int64_t)es);
  }
  xfer_run(dst, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- flip --------------------------------------------------------------------------------- */

oa_status_t oa_ref_flip_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int32_t nd = x->ndim > 0 ? x->ndim : 1;
  uint32_t seen = 0;
  for (uint32_t k = 0; k < tail_len(call, OA_ARG_FLIP_DIMS); k++) {
    int64_t d = call->ints[OA_ARG_FLIP_DIMS + k];
    if (d < 0 || d >= nd || (seen & (1u << d)))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument dims[%u] = %lld: expected distinct dims in 0 to %d", k, (long long)d, nd - 1);
    seen |= 1u << d;
  }
  plan->params[0] = (int64_t)seen;
  return oa_check_same_shape(call, y, x, "output 0", diag);
}

oa_status_t oa_ref_flip_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                            const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  size_t es = elsize(x);
  uint32_t flipped = (uint32_t)plan->params[0];
  int64_t xs[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < x->ndim; d++) {
    int64_t s = xs[d] * (int64_t)es;
    if ((flipped & (1u << d)) && x->shape[d] > 1) {
      t.s0 += (x->shape[d] - 1) * s;
      s = -s;
    }
    xfer_dim(&t, x->shape[d], xs[d] * (int64_t)es, s);
  }
  if (!x->numel) return OA_OK;
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- repeat ------------------------------------------------------------------------------- */

oa_status_t oa_ref_repeat_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 0, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_ndim(call, y, x->ndim, OA_MAX_DIMS, "output 0", diag))) return st;
  int32_t lead = y->ndim - x->ndim;
  for (int32_t d = 0; d < y->ndim; d++) {
    int64_t s = d < lead ? 1 : x->shape[d - lead], o = y->shape[d];
    if (s == 0 ? o != 0 : o % s != 0) {
      char a[128], b[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "output 0 ('%s'): shape %s is not a tiling of input 0 (self) ('%s') %s (dim %d: %lld is "
                          "not a multiple of %lld)", y->name, oa_shape_str(y, a, sizeof a), x->name,
                          oa_shape_str(x, b, sizeof b), d, (long long)o, (long long)s);
    }
  }
  return OA_OK;
}

oa_status_t oa_ref_repeat_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!y->numel) return OA_OK;
  size_t es = elsize(x);
  int64_t xs[OA_MAX_DIMS], ys[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  oa_contiguous_strides(y->shape, y->ndim, ys);
  int32_t lead = y->ndim - x->ndim;
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < y->ndim; d++) {
    int64_t s = d < lead ? 1 : x->shape[d - lead];
    int64_t sstride = d < lead ? 0 : xs[d - lead] * (int64_t)es;
    int64_t dstride = ys[d] * (int64_t)es;
    xfer_dim(&t, y->shape[d] / s, s * dstride, 0); /* repetitions */
    xfer_dim(&t, s, dstride, sstride);             /* the input's own extent */
  }
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, es);
  return OA_OK;
}

/* ---- pad_mode (reflect, replicate, circular) ------------------------------------------------- */

enum { PAD_REFLECT = 1, PAD_REPLICATE = 2, PAD_CIRCULAR = 3 };

/* The (before, after) pads of dim `d` (0, 0 for a dim the pads do not reach). */
static void pad_pair(const oa_op_call_t *call, int32_t ndim, int32_t d, int64_t *before, int64_t *after) {
  uint32_t k = 2u * (uint32_t)(ndim - 1 - d);
  *before = *after = 0;
  if (k < tail_len(call, OA_ARG_PAD_MODE_PADS)) {
    *before = call->ints[OA_ARG_PAD_MODE_PADS + k];
    *after = call->ints[OA_ARG_PAD_MODE_PADS + k + 1];
  }
}

oa_status_t oa_ref_pad_mode_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                    oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 1, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int64_t mode = call->ints[OA_ARG_PAD_MODE_MODE];
  if (mode < PAD_REFLECT || mode > PAD_CIRCULAR)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument mode = %lld: expected 1 (reflect), 2 (replicate) or 3 (circular)", (long long)mode);
  const uint32_t n_pads = tail_len(call, OA_ARG_PAD_MODE_PADS);
  if (n_pads % 2 || n_pads / 2 > (uint32_t)x->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument pads: expected an even number of entries, at most %d (2 per input dim), "
                        "received %u", 2 * x->ndim, n_pads);
  int64_t want[OA_MAX_DIMS];
  for (int32_t d = 0; d < x->ndim; d++) {
    int64_t before, after, n = x->shape[d];
    pad_pair(call, x->ndim, d, &before, &after);
    if (before < -PAD_LIMIT || before > PAD_LIMIT || after < -PAD_LIMIT || after > PAD_LIMIT)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument pads: (%lld, %lld) for dim %d is out of range",
                          (long long)before, (long long)after, d);
    want[d] = n + before + after;
    char s[128];
    if (want[d] < 0)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument pads: dim %d of input 0 (self) ('%s') %s would get negative size %lld", d, x->name,
                          oa_shape_str(x, s, sizeof s), (long long)want[d]);
    if (want[d] == 0 || (before == 0 && after == 0)) continue;
    /* the source index of every output position must exist */
    int64_t kept = n - (before < 0 ? -before : 0) - (after < 0 ? -after : 0);
    if (mode == PAD_REFLECT && (before >= n || after >= n))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument pads: reflect padding (%lld, %lld) of dim %d of input 0 (self) ('%s') %s: expected "
                          "each pad smaller than the dim's size %lld", (long long)before, (long long)after, d, x->name,
                          oa_shape_str(x, s, sizeof s), (long long)n);
    if ((mode == PAD_REPLICATE && n < 1) || (mode == PAD_CIRCULAR && kept < 1))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "argument pads: %s padding (%lld, %lld) of dim %d of input 0 (self) ('%s') %s leaves no "
                          "element to repeat", mode == PAD_REPLICATE ? "replicate" : "circular", (long long)before,
                          (long long)after, d, x->name, oa_shape_str(x, s, sizeof s));
  }
  return oa_check_shape(call, y, want, x->ndim, "output 0", diag);
}

/* The source index along a dim of size n for output position o (prepare checked it exists). */
static int64_t pad_source(int64_t mode, int64_t o, int64_t n, int64_t before, int64_t after) {
  if (mode == PAD_CIRCULAR) {
    int64_t crop = before < 0 ? -before : 0;
    int64_t kept = n - crop - (after < 0 ? -after : 0);
    int64_t c = (o - (before > 0 ? before : 0)) % kept;
    return crop + (c < 0 ? c + kept : c);
  }
  int64_t j = o - before;
  if (mode == PAD_REPLICATE) return j < 0 ? 0 : (j >= n ? n - 1 : j);
  if (j < 0) j = -j;
  if (j >= n) j = 2 * (n - 1) - j;
  return j;
}

oa_status_t oa_ref_pad_mode_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!y->numel) return OA_OK;
  const int64_t mode = call->ints[OA_ARG_PAD_MODE_MODE];
  const size_t es = elsize(x);
  const int32_t nd = x->ndim;
  int64_t xs[OA_MAX_DIMS], before[OA_MAX_DIMS], after[OA_MAX_DIMS], idx[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, nd, xs);
  for (int32_t d = 0; d < nd; d++) {
    pad_pair(call, nd, d, &before[d], &after[d]);
    idx[d] = 0;
  }
  if (nd == 0) {
    memcpy(y->data, x->data, es);
    return OA_OK;
  }
  const uint8_t *src = (const uint8_t *)x->data;
  uint8_t *dst = (uint8_t *)y->data;
  const int32_t last = nd - 1;
  const int64_t w = y->shape[last], n = x->shape[last], b = before[last], a = after[last];
  /* along the last dim, output positions [lo, hi) read consecutive input elements from `first` on;
   * the positions before and after them are padding, read one by one */
  int64_t lo, hi, first;
  if (mode == PAD_CIRCULAR) {
    int64_t crop = b < 0 ? -b : 0, kept = n - crop - (a < 0 ? -a : 0);
    lo = b > 0 ? b : 0;
    hi = lo + kept;
    first = crop;
  } else {
    lo = b > 0 ? b : 0;
    hi = n + b;
    first = lo - b;
  }
  if (lo > w) lo = w; /* a negative pad after can crop into the padding before */
  if (hi > w) hi = w;
  if (hi < lo) hi = lo;
  for (int64_t row = 0; row < y->numel / w; row++) {
    int64_t base = 0; /* the source element offset of this output row's outer coordinates */
    for (int32_t d = 0; d < last; d++) base += pad_source(mode, idx[d], x->shape[d], before[d], after[d]) * xs[d];
    uint8_t *o = dst + row * w * (int64_t)es;
    const uint8_t *r = src + base * (int64_t)es;
    for (int64_t k = 0; k < lo; k++) memcpy(o + k * (int64_t)es, r + pad_source(mode, k, n, b, a) * (int64_t)es, es);
    if (hi > lo) memcpy(o + lo * (int64_t)es, r + first * (int64_t)es, (size_t)(hi - lo) * es);
    for (int64_t k = hi; k < w; k++) memcpy(o + k * (int64_t)es, r + pad_source(mode, k, n, b, a) * (int64_t)es, es);
    for (int32_t d = last - 1; d >= 0; d--) {
      if (++idx[d] < y->shape[d]) break;
      idx[d] = 0;
    }
  }
  return OA_OK;
}

/* ---- as_strided ------------------------------------------------------------------------------ */

#define STRIDE_LIMIT (INT64_C(1) << 50)

oa_status_t oa_ref_as_strided_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                      oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = unary_move_prepare(call, 1, diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (tail_len(call, OA_ARG_AS_STRIDED_STRIDES) != (uint32_t)y->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument strides: expected %d entries (one per output dim), "
                        "received %u", y->ndim, tail_len(call, OA_ARG_AS_STRIDED_STRIDES));
  int64_t offset = call->ints[OA_ARG_AS_STRIDED_STORAGE_OFFSET];
  if (offset < 0 || offset > STRIDE_LIMIT)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument storage_offset = %lld: expected 0 to 2^50",
                        (long long)offset);
  int64_t last = offset; /* the largest element offset read */
  for (int32_t d = 0; d < y->ndim; d++) {
    int64_t s = call->ints[OA_ARG_AS_STRIDED_STRIDES + d];
    if (s < 0 || s > STRIDE_LIMIT)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument strides[%d] = %lld: expected 0 to 2^50", d,
                          (long long)s);
    /* shapes are at most 2^50 elements (the loader's bound): the product is checked before it is formed */
    if (y->numel && s && y->shape[d] - 1 > (INT64_MAX - last) / s)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument strides[%d] = %lld: the view reaches past 2^63", d,
                          (long long)s);
    if (y->numel) last += (y->shape[d] - 1) * s;
  }
  if (y->numel && last >= x->numel) {
    char a[128], b[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "output 0 ('%s') %s with storage_offset %lld and these strides reads element %lld of input 0 "
                        "(self) ('%s') %s, which has %lld", y->name, oa_shape_str(y, a, sizeof a), (long long)offset,
                        (long long)last, x->name, oa_shape_str(x, b, sizeof b), (long long)x->numel);
  }
  return OA_OK;
}

oa_status_t oa_ref_as_strided_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!y->numel) return OA_OK;
  const int64_t es = (int64_t)elsize(x);
  int64_t ys[OA_MAX_DIMS];
  oa_contiguous_strides(y->shape, y->ndim, ys);
  xfer_t t;
  xfer_init(&t);
  for (int32_t d = 0; d < y->ndim; d++) xfer_dim(&t, y->shape[d], ys[d] * es, call->ints[OA_ARG_AS_STRIDED_STRIDES + d] * es);
  t.s0 = call->ints[OA_ARG_AS_STRIDED_STORAGE_OFFSET] * es;
  xfer_run((uint8_t *)y->data, (const uint8_t *)x->data, &t, (size_t)es);
  return OA_OK;
}
