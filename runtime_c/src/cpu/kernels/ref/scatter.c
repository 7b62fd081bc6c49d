/* Reference scatter and advanced-indexing kernels: index (aten.index.Tensor with several index
 * tensors), index_put, scatter (scatter, scatter_add, scatter_reduce), slice_scatter,
 * masked_scatter.
 *
 * Index values are data: every one is range-checked before the first element is written (the
 * output may share self's bytes, so a bad index leaves the tensor as it was), and the error names
 * the index tensor, the value, its position and the bound. Nothing is written outside the output. */
#include <math.h>

#include "kernels/kernel.h"

#define MAX_INDICES OA_MAX_DIMS /* index tensors of one index / index_put */

static size_t elsize(const oa_tensor_t *t) { return oa_dtype_size(t->dtype); }

/* How many ints a variadic tail has from `start` on. */
static uint32_t tail_len(const oa_op_call_t *call, uint32_t start) {
  return call->n_ints > start ? call->n_ints - start : 0;
}

/* out = self (nothing to do when the output shares self's bytes). */
static void copy_self(const oa_tensor_t *x, const oa_tensor_t *y) {
  if (x->nbytes && x->data != y->data) memmove(y->data, x->data, x->nbytes);
}

/* A row-major counter over `shape` carrying element offsets into up to 2 + MAX_INDICES operands. */
#define IT_OPS (MAX_INDICES + 2)
typedef struct it {
  int32_t ndim, nops;
  int64_t shape[OA_MAX_DIMS], idx[OA_MAX_DIMS];
  int64_t st[IT_OPS][OA_MAX_DIMS];
  int64_t off[IT_OPS];
} it_t;

static void it_init(it_t *it, const int64_t *shape, int32_t ndim, int32_t nops) {
  memset(it, 0, sizeof *it);
  it->ndim = ndim;
  it->nops = nops;
  for (int32_t d = 0; d < ndim; d++) it->shape[d] = shape[d];
}

static void it_next(it_t *it) {
  for (int32_t d = it->ndim - 1; d >= 0; d--) {
    for (int32_t k = 0; k < it->nops; k++) it->off[k] += it->st[k][d];
    if (++it->idx[d] < it->shape[d]) return;
    for (int32_t k = 0; k < it->nops; k++) it->off[k] -= it->st[k][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

/* ---- typed element operations (integers wrap like PyTorch's, without signed overflow) ------ */

static int64_t wrap_i64(uint64_t u) { return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1; }
static int32_t wrap_i32(uint64_t u) {
  uint32_t lo = (uint32_t)u;
  return lo <= (uint32_t)INT32_MAX ? (int32_t)lo : -(int32_t)(~lo) - 1;
}
static int8_t wrap_i8(uint64_t u) {
  uint8_t lo = (uint8_t)u;
  return lo <= 127u ? (int8_t)lo : (int8_t)(-(int)(uint8_t)~lo - 1);
}

/* Python-style floor division of integers; b != 0; b == -1 negates with wrap-around. */
static int64_t floor_div(int64_t a, int64_t b, int32_t dt) {
  if (b == -1) {
    uint64_t n = 0u - (uint64_t)a;
    return dt == OA_DTYPE_INT64 ? wrap_i64(n) : dt == OA_DTYPE_INT32 ? wrap_i32(n) : wrap_i8(n);
  }
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

enum { RED_NONE = 0, RED_SUM = 1, RED_PROD = 2, RED_MEAN = 3, RED_AMAX = 4, RED_AMIN = 5 };

/* dst[i] = reduce(dst[i], src[j]) for one dtype (mean sums here and divides at the end). */
static void combine(uint8_t *dst, int64_t i, const uint8_t *src, int64_t j, int32_t dt, int64_t red) {
  switch (dt) {
    case OA_DTYPE_FLOAT32: {
      float *o = (float *)(void *)dst + i, b = ((const float *)(const void *)src)[j], a = *o;
      switch (red) {
        case RED_SUM: case RED_MEAN: *o = a + b; break;
        case RED_PROD: *o = a * b; break;
        case RED_AMAX: *o = isnan(b) ? b : (a < b ? b : a); break;
        case RED_AMIN: *o = isnan(b) ? b : (b < a ? b : a); break;
        default: *o = b; break;
      }
      return;
    }
    case OA_DTYPE_INT64: {
      int64_t *o = (int64_t *)(void *)dst + i, b = ((const int64_t *)(const void *)src)[j], a = *o;
      switch (red) {
        case RED_SUM: case RED_MEAN: *o = wrap_i64((uint64_t)a + (uint64_t)b); break;
        case RED_PROD: *o = wrap_i64((uint64_t)a * (uint64_t)b); break;
        case RED_AMAX: *o = a < b ? b : a; break;
        case RED_AMIN: *o = b < a ? b : a; break;
        default: *o = b; break;
      }
      return;
    }
    case OA_DTYPE_INT32: {
      int32_t *o = (int32_t *)(void *)dst + i, b = ((const int32_t *)(const void *)src)[j], a = *o;
      switch (red) {
        case RED_SUM: case RED_MEAN: *o = wrap_i32((uint64_t)(uint32_t)a + (uint32_t)b); break;
        case RED_PROD: *o = wrap_i32((uint64_t)(uint32_t)a * (uint32_t)b); break;
        case RED_AMAX: *o = a < b ? b : a; break;
        case RED_AMIN: *o = b < a ? b : a; break;
        default: *o = b; break;
      }
      return;
    }
    case OA_DTYPE_INT8: {
      int8_t *o = (int8_t *)(void *)dst + i, b = ((const int8_t *)(const void *)src)[j], a = *o;
      switch (red) {
        case RED_SUM: case RED_MEAN: *o = wrap_i8((uint64_t)(int64_t)a + (uint64_t)(int64_t)b); break;
        case RED_PROD: *o = wrap_i8((uint64_t)((int64_t)a * (int64_t)b)); break;
        case RED_AMAX: *o = a < b ? b : a; break;
        case RED_AMIN: *o = b < a ? b : a; break;
        default: *o = b; break;
      }
      return;
    }
    case OA_DTYPE_UINT8: {
      uint8_t *o = dst + i, b = src[j], a = *o;
      switch (red) {
        case RED_SUM: case RED_MEAN: *o = (uint8_t)(a + b); break;
        case RED_PROD: *o = (uint8_t)((unsigned)a * b); break;
        case RED_AMAX: *o = a < b ? b : a; break;
        case RED_AMIN: *o = b < a ? b : a; break;
        default: *o = b; break;
      }
      return;
    }
    default: { /* bool: sum and amax are or, prod and amin are and */
      uint8_t *o = dst + i, b = src[j] != 0, a = *o != 0;
      switch (red) {
        case RED_SUM: case RED_AMAX: *o = (uint8_t)(a | b); break;
        case RED_PROD: case RED_AMIN: *o = (uint8_t)(a & b); break;
        default: *o = b; break;
      }
      return;
    }
  }
}

/* dst[i] = the identity of `red` (where include_self is false). */
static void set_identity(uint8_t *dst, int64_t i, int32_t dt, int64_t red) {
  int lo = red == RED_AMAX, hi = red == RED_AMIN, one = red == RED_PROD;
  switch (dt) {
    case OA_DTYPE_FLOAT32: ((float *)(void *)dst)[i] = lo ? -INFINITY : hi ? INFINITY : one ? 1.0f : 0.0f; break;
    case OA_DTYPE_INT64: ((int64_t *)(void *)dst)[i] = lo ? INT64_MIN : hi ? INT64_MAX : one; break;
    case OA_DTYPE_INT32: ((int32_t *)(void *)dst)[i] = lo ? INT32_MIN : hi ? INT32_MAX : one; break;
    case OA_DTYPE_INT8: ((int8_t *)(void *)dst)[i] = (int8_t)(lo ? INT8_MIN : hi ? INT8_MAX : one); break;
    case OA_DTYPE_UINT8: dst[i] = (uint8_t)(lo ? 0 : hi ? UINT8_MAX : one); break;
    default: dst[i] = (uint8_t)(hi || one); break;
  }
}

/* dst[i] = dst[i] / count as PyTorch's scatter_reduce mean: the count in the dtype (wrapping; 0 taken
 * as 1), true division for float32, floor division for integers. */
static void mean_divide(uint8_t *dst, int64_t i, int32_t dt, int64_t count) {
  switch (dt) {
    case OA_DTYPE_FLOAT32: ((float *)(void *)dst)[i] /= (float)count; break;
    case OA_DTYPE_INT64: {
      int64_t *o = (int64_t *)(void *)dst + i;
      *o = floor_div(*o, count, dt);
      break;
    }
    case OA_DTYPE_INT32: {
      int32_t *o = (int32_t *)(void *)dst + i, c = wrap_i32((uint64_t)count);
      *o = (int32_t)floor_div(*o, c ? c : 1, dt);
      break;
    }
    case OA_DTYPE_INT8: {
      int8_t *o = (int8_t *)(void *)dst + i, c = wrap_i8((uint64_t)count);
      *o = wrap_i8((uint64_t)floor_div(*o, c ? c : 1, dt));
      break;
    }
    case OA_DTYPE_UINT8: {
      uint8_t c = (uint8_t)count;
      dst[i] = (uint8_t)(dst[i] / (c ? c : 1));
      break;
    }
    default: break;
  }
}

/* An index value out of range: the one message of every kernel here. */
static oa_status_t index_error(oa_diag_t *diag, uint32_t input, const char *what, const oa_tensor_t *idx, int64_t pos,
                               int64_t v, int32_t dim, const oa_tensor_t *x, int64_t size, int wraps) {
  char p[128];
  return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT,
                      "input %u (%s) ('%s'): index %lld at position %s is out of range for dim %d of input 0 (self) "
                      "('%s') with size %lld (expected %s%lld to %lld)", input, what, idx->name, (long long)v,
                      oa_position_str(idx, pos, p, sizeof p), dim, x->name, (long long)size, wraps && size ? "-" : "",
                      (long long)(wraps ? size : 0), (long long)size - 1);
}

/* ==== advanced indexing: index, index_put =================================================== */

/* The geometry of self[indices] with integer index tensors: the indices broadcast to B; the
 * result is pre + B + post (consecutive dims) or B + the unindexed dims. For each result dim:
 * self's element stride (unindexed dims) and each index tensor's (B dims). */
typedef struct adv {
  int32_t k;                         /* index tensors */
  int32_t rdim;                      /* result dims */
  int64_t rshape[OA_MAX_DIMS];
  int64_t xst[OA_MAX_DIMS];          /* self's element stride per result dim (0 on B dims) */
  int64_t ist[MAX_INDICES][OA_MAX_DIMS]; /* index k's element stride per result dim (0 elsewhere) */
  int64_t size[MAX_INDICES];         /* size of the dim index k indexes */
  int64_t step[MAX_INDICES];         /* self's element stride of that dim */
  int32_t dim[MAX_INDICES];
  int64_t numel;
} adv_t;

/* Read and check dims*, the index tensors (inputs first .. first + k - 1) and build `g`. */
static oa_status_t adv_prepare(const oa_op_call_t *call, const oa_tensor_t *x, uint32_t first, uint32_t dims_at,
                               adv_t *g, oa_diag_t *diag) {
  memset(g, 0, sizeof *g);
  int32_t k = (int32_t)(call->n_inputs - first);
  if (k < 1 || k > MAX_INDICES || k > (x->ndim > 0 ? x->ndim : 0))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "expected 1 to %d index tensors for a %d-dim input 0 (self), "
                        "received %d", x->ndim < MAX_INDICES ? x->ndim : MAX_INDICES, x->ndim, k);
  if (tail_len(call, dims_at) != (uint32_t)k)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: expected %d entries (one per index tensor), "
                        "received %u", k, tail_len(call, dims_at));
  g->k = k;
  int32_t nb = 0;
  oa_status_t st;
  for (int32_t i = 0; i < k; i++) {
    char arg[48];
    oa_format(arg, sizeof arg, "input %u (indices[%d])", first + (uint32_t)i, i);
    if ((st = oa_check_present(call, first + (uint32_t)i, arg, diag))) return st;
    const oa_tensor_t *t = call->inputs[first + (uint32_t)i];
    if ((st = oa_check_dtype(call, t, OA_DT_INT, arg, diag))) return st;
    int64_t d = call->ints[dims_at + (uint32_t)i];
    if (d < 0 || d >= x->ndim || (i > 0 && d <= g->dim[i - 1]))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%d] = %lld: expected increasing dims of "
                          "input 0 (self) in 0 to %d", i, (long long)d, x->ndim - 1);
    g->dim[i] = (int32_t)d;
    if (t->ndim > nb) nb = t->ndim;
  }
  /* B: the index tensors broadcast together */
  int64_t b[OA_MAX_DIMS];
  for (int32_t d = 0; d < nb; d++) b[d] = 1;
  for (int32_t i = 0; i < k; i++) {
    const oa_tensor_t *t = call->inputs[first + (uint32_t)i];
    for (int32_t d = 0; d < t->ndim; d++) {
      int64_t n = t->shape[d], *o = &b[nb - t->ndim + d];
      if (n == *o || n == 1) continue;
      if (*o != 1) {
        char s[128];
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input %u (indices[%d]) ('%s'): shape %s does not broadcast "
                            "with the other index tensors (dim %d: %lld vs %lld)", first + (uint32_t)i, i, t->name,
                            oa_shape_str(t, s, sizeof s), d, (long long)n, (long long)*o);
      }
      *o = n;
    }
  }
  int32_t consecutive = g->dim[k - 1] - g->dim[0] == k - 1;
  int32_t rdim = x->ndim - k + nb;
  if (rdim > OA_MAX_DIMS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "the indexed result has %d dims (at most %d)", rdim, OA_MAX_DIMS);
  int64_t xs[OA_MAX_DIMS];
  oa_contiguous_strides(x->shape, x->ndim, xs);
  int32_t at = consecutive ? g->dim[0] : 0; /* where B sits in the result */
  int32_t r = 0;
  for (int32_t d = 0; d < x->ndim; d++) { /* unindexed dims, in order, around B */
    if (r == at) r += nb;
    int indexed = 0;
    for (int32_t i = 0; i < k; i++) indexed |= g->dim[i] == d;
    if (indexed) continue;
    g->rshape[r] = x->shape[d];
    g->xst[r] = xs[d];
    r++;
  }
  for (int32_t d = 0; d < nb; d++) g->rshape[at + d] = b[d];
  g->rdim = rdim;
  for (int32_t i = 0; i < k; i++) {
    const oa_tensor_t *t = call->inputs[first + (uint32_t)i];
    int64_t ts[OA_MAX_DIMS];
    oa_contiguous_strides(t->shape, t->ndim, ts);
    for (int32_t d = 0; d < t->ndim; d++)
      g->ist[i][at + nb - t->ndim + d] = t->shape[d] == 1 ? 0 : ts[d];
    g->size[i] = x->shape[g->dim[i]];
    g->step[i] = xs[g->dim[i]];
  }
  g->numel = 1;
  for (int32_t d = 0; d < rdim; d++) g->numel *= g->rshape[d];
  return OA_OK;
}

/* Every index value in range (negative ones count from the end). Nothing is read when the
 * result is empty, as in PyTorch. */
static oa_status_t adv_check(const oa_op_call_t *call, const oa_tensor_t *x, uint32_t first, const adv_t *g,
                             oa_diag_t *diag) {
  if (!g->numel) return OA_OK;
  for (int32_t i = 0; i < g->k; i++) {
    const oa_tensor_t *t = call->inputs[first + (uint32_t)i];
    char what[32];
    oa_format(what, sizeof what, "indices[%d]", i);
    for (int64_t j = 0; j < t->numel; j++) {
      int64_t v = oa_load_index(t, j);
      if (v < -g->size[i] || v >= g->size[i])
        return index_error(diag, first + (uint32_t)i, what, t, j, v, g->dim[i], x, g->size[i], 1);
    }
  }
  return OA_OK;
}

/* The iterator over the result: operand 0 self's offset of the unindexed dims, 1..k the index
 * tensors' offsets, k + 1 an extra operand (index_put's values) with strides `extra`. */
static void adv_iter(const adv_t *g, const int64_t *extra, it_t *it) {
  it_init(it, g->rshape, g->rdim, g->k + 2);
  for (int32_t d = 0; d < g->rdim; d++) {
    it->st[0][d] = g->xst[d];
    for (int32_t i = 0; i < g->k; i++) it->st[1 + i][d] = g->ist[i][d];
    it->st[g->k + 1][d] = extra ? extra[d] : 0;
  }
}

/* self's element offset of the iterator's position. */
static int64_t adv_offset(const oa_op_call_t *call, uint32_t first, const adv_t *g, const it_t *it) {
  int64_t off = it->off[0];
  for (int32_t i = 0; i < g->k; i++) {
    int64_t v = oa_load_index(call->inputs[first + (uint32_t)i], it->off[1 + i]);
    off += (v < 0 ? v + g->size[i] : v) * g->step[i];
  }
  return off;
}

/* ---- index -------------------------------------------------------------------------------- */

oa_status_t oa_ref_index_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                 oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 1 + MAX_INDICES, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  adv_t g;
  if ((st = adv_prepare(call, x, 1, OA_ARG_INDEX_DIMS, &g, diag))) return st;
  return oa_check_shape(call, y, g.rshape, g.rdim, "output 0", diag);
}

oa_status_t oa_ref_index_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                             const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  adv_t g;
  oa_status_t st;
  if ((st = adv_prepare(call, x, 1, OA_ARG_INDEX_DIMS, &g, diag)) || (st = adv_check(call, x, 1, &g, diag)))
    return st;
  if (!g.numel) return OA_OK;
  /* the result's trailing unindexed dims (self's dims after the last indexed one) are rows of
   * contiguous bytes in both tensors */
  int32_t post = x->ndim - 1 - g.dim[g.k - 1];
  int64_t row = 1;
  for (int32_t d = g.rdim - post; d < g.rdim; d++) row *= g.rshape[d];
  const size_t es = elsize(x), bytes = (size_t)row * es;
  g.rdim -= post;
  it_t it;
  adv_iter(&g, NULL, &it);
  const uint8_t *src = (const uint8_t *)x->data;
  uint8_t *dst = (uint8_t *)y->data;
  for (int64_t r = 0; r < g.numel / row; r++) {
    memcpy(dst + (size_t)r * bytes, src + adv_offset(call, 1, &g, &it) * (int64_t)es, bytes);
    it_next(&it);
  }
  return OA_OK;
}

/* ---- index_put ---------------------------------------------------------------------------- */

/* The bool-mask form: the mask covers dims [d0, d0 + m) of self; the result is
 * self.shape[:d0] + [count of true elements] + self.shape[d0 + m:]. */
typedef struct mask_geo {
  int32_t d0, m;
  int64_t outer, span, inner; /* self as [outer, span (the mask's elements), inner] */
  int32_t vdim;               /* values' dim matching the count (-1: none, broadcast) */
  int64_t vst_outer[OA_MAX_DIMS], vst_inner[OA_MAX_DIMS], vst_count;
  int32_t n_outer, n_inner;
  int64_t outer_shape[OA_MAX_DIMS], inner_shape[OA_MAX_DIMS];
} mask_geo_t;

static oa_status_t mask_prepare(const oa_op_call_t *call, const oa_tensor_t *x, const oa_tensor_t *v,
                                const oa_tensor_t *mask, mask_geo_t *g, oa_diag_t *diag) {
  memset(g, 0, sizeof *g);
  char s[128], t[128];
  if (call->n_inputs != 3)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "a bool mask must be the only index tensor, received %u",
                        call->n_inputs - 2);
  if (tail_len(call, OA_ARG_INDEX_PUT_DIMS) != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: expected 1 entry (one per index tensor), "
                        "received %u", tail_len(call, OA_ARG_INDEX_PUT_DIMS));
  int64_t d0 = call->ints[OA_ARG_INDEX_PUT_DIMS];
  if (mask->ndim < 1 || d0 < 0 || d0 + mask->ndim > x->ndim ||
      memcmp(mask->shape, x->shape + d0, (size_t)mask->ndim * sizeof(int64_t)) != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 2 (indices[0]) ('%s'): mask shape %s does not match "
                        "the dims of input 0 (self) ('%s') %s from dims[0] = %lld", mask->name,
                        oa_shape_str(mask, s, sizeof s), x->name, oa_shape_str(x, t, sizeof t), (long long)d0);
  g->d0 = (int32_t)d0;
  g->m = mask->ndim;
  g->outer = g->span = g->inner = 1;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (d < g->d0) {
      g->outer *= x->shape[d];
      g->outer_shape[g->n_outer++] = x->shape[d];
    } else if (d < g->d0 + g->m) {
      g->span *= x->shape[d];
    } else {
      g->inner *= x->shape[d];
      g->inner_shape[g->n_inner++] = x->shape[d];
    }
  }
  /* values broadcast to [outer dims..., count, inner dims...]: right-aligned */
  int32_t rdim = g->n_outer + 1 + g->n_inner;
  if (v->ndim > rdim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (values) ('%s'): shape %s has more dims than the "
                        "indexed result (%d)", v->name, oa_shape_str(v, s, sizeof s), rdim);
  int64_t vs[OA_MAX_DIMS];
  oa_contiguous_strides(v->shape, v->ndim, vs);
  g->vdim = -1;
  for (int32_t r = 0; r < rdim; r++) {
    int32_t vd = r - (rdim - v->ndim);
    int64_t n = vd >= 0 ? v->shape[vd] : 1, st = vd >= 0 && n != 1 ? vs[vd] : 0;
    if (r == g->n_outer) { /* the count of true elements: known at run time */
      if (n != 1) g->vdim = vd;
      g->vst_count = st;
      continue;
    }
    int64_t want = r < g->n_outer ? g->outer_shape[r] : g->inner_shape[r - g->n_outer - 1];
    if (n != 1 && n != want)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (values) ('%s'): shape %s does not broadcast to the "
                          "indexed result (dim %d: %lld vs %lld)", v->name, oa_shape_str(v, s, sizeof s), vd,
                          (long long)n, (long long)want);
    if (r < g->n_outer) g->vst_outer[r] = st;
    else g->vst_inner[r - g->n_outer - 1] = st;
  }
  return OA_OK;
}

oa_status_t oa_ref_index_put_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 2 + MAX_INDICES, 1, 2, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (values)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (indices[0])", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *v = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, v, x, "input 1 (values)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  int64_t acc = call->ints[OA_ARG_INDEX_PUT_ACCUMULATE];
  if (acc != 0 && acc != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument accumulate = %lld: expected 0 or 1", (long long)acc);
  if (call->inputs[2]->dtype == OA_DTYPE_BOOL) {
    mask_geo_t mg;
    return mask_prepare(call, x, v, call->inputs[2], &mg, diag);
  }
  adv_t g;
  if ((st = adv_prepare(call, x, 2, OA_ARG_INDEX_PUT_DIMS, &g, diag))) return st;
  int64_t vst[OA_MAX_DIMS];
  return oa_broadcast_strides(call, v, g.rshape, g.rdim, vst, "input 1 (values)", diag);
}

static oa_status_t index_put_mask(const oa_op_call_t *call, oa_diag_t *diag) {
  const oa_tensor_t *x = call->inputs[0], *v = call->inputs[1], *mask = call->inputs[2], *y = call->outputs[0];
  mask_geo_t g;
  oa_status_t st = mask_prepare(call, x, v, mask, &g, diag);
  if (st) return st;
  const uint8_t *mk = (const uint8_t *)mask->data;
  int64_t count = 0;
  for (int64_t j = 0; j < g.span; j++) count += mk[j] != 0;
  if (g.vdim >= 0 && v->shape[g.vdim] != count) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "input 1 (values) ('%s'): shape %s gives %lld values along "
                        "dim %d, input 2 (indices[0]) ('%s') selects %lld elements", v->name,
                        oa_shape_str(v, s, sizeof s), (long long)v->shape[g.vdim], g.vdim, mask->name,
                        (long long)count);
  }
  copy_self(x, y);
  const int accumulate = call->ints[OA_ARG_INDEX_PUT_ACCUMULATE] == 1;
  const size_t es = elsize(x);
  uint8_t *dst = (uint8_t *)y->data;
  const uint8_t *val = (const uint8_t *)v->data;
  it_t outer, inner;
  it_init(&outer, g.outer_shape, g.n_outer, 1);
  for (int32_t d = 0; d < g.n_outer; d++) outer.st[0][d] = g.vst_outer[d];
  it_init(&inner, g.inner_shape, g.n_inner, 1);
  for (int32_t d = 0; d < g.n_inner; d++) inner.st[0][d] = g.vst_inner[d];
  for (int64_t o = 0; o < g.outer; o++, it_next(&outer)) {
    int64_t n = 0; /* the position of this true element among the true ones */
    for (int64_t j = 0; j < g.span; j++) {
      if (!mk[j]) continue;
      int64_t base = (o * g.span + j) * g.inner, vbase = outer.off[0] + n * g.vst_count;
      n++;
      for (int64_t q = 0; q < g.inner; q++, it_next(&inner)) {
        if (accumulate) combine(dst, base + q, val, vbase + inner.off[0], x->dtype, RED_SUM);
        else oa_copy_elem(dst, base + q, val, vbase + inner.off[0], es);
      }
    }
  }
  return OA_OK;
}

oa_status_t oa_ref_index_put_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  if (call->inputs[2]->dtype == OA_DTYPE_BOOL) return index_put_mask(call, diag);
  const oa_tensor_t *x = call->inputs[0], *v = call->inputs[1], *y = call->outputs[0];
  adv_t g;
  int64_t vst[OA_MAX_DIMS];
  oa_status_t st;
  if ((st = adv_prepare(call, x, 2, OA_ARG_INDEX_PUT_DIMS, &g, diag)) || (st = adv_check(call, x, 2, &g, diag)) ||
      (st = oa_broadcast_strides(call, v, g.rshape, g.rdim, vst, "input 1 (values)", diag)))
    return st;
  copy_self(x, y);
  const int accumulate = call->ints[OA_ARG_INDEX_PUT_ACCUMULATE] == 1;
  const size_t es = elsize(x);
  uint8_t *dst = (uint8_t *)y->data;
  const uint8_t *val = (const uint8_t *)v->data;
  it_t it;
  adv_iter(&g, vst, &it);
  for (int64_t r = 0; r < g.numel; r++, it_next(&it)) {
    int64_t off = adv_offset(call, 2, &g, &it);
    if (accumulate) combine(dst, off, val, it.off[g.k + 1], x->dtype, RED_SUM);
    else oa_copy_elem(dst, off, val, it.off[g.k + 1], es);
  }
  return OA_OK;
}

/* ==== scatter =============================================================================== */

oa_status_t oa_ref_scatter_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 3, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (index)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (src)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *src = call->inputs[2], *y = call->outputs[0];
  int64_t red = call->n_ints > OA_ARG_SCATTER_REDUCE ? call->ints[OA_ARG_SCATTER_REDUCE] : 0;
  int64_t inc = call->n_ints > OA_ARG_SCATTER_INCLUDE_SELF ? call->ints[OA_ARG_SCATTER_INCLUDE_SELF] : 0;
  if (red < RED_NONE || red > RED_AMIN)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument reduce = %lld: expected 0 (none), 1 (sum), 2 (prod), "
                        "3 (mean), 4 (amax) or 5 (amin)", (long long)red);
  if (inc != 0 && inc != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument include_self = %lld: expected 0 or 1", (long long)inc);
  if ((st = oa_check_dtype(call, x, red == RED_MEAN ? OA_DT_ALL & ~OA_DT_BOOL : OA_DT_ALL, "input 0 (self)", diag)))
    return st;
  if ((st = oa_check_dtype(call, idx, OA_DT_INT, "input 1 (index)", diag))) return st;
  if ((st = oa_check_same_dtype(call, src, x, "input 2 (src)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, idx, x->ndim, x->ndim, "input 1 (index)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_SCATTER_DIM];
  int32_t nd = x->ndim > 0 ? x->ndim : 1;
  if (dim < 0 || dim >= nd)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dim = %lld is out of range for a %d-dim tensor "
                        "(expected 0 to %d)", (long long)dim, x->ndim, nd - 1);
  if (src->ndim != 0 && (st = oa_check_ndim(call, src, idx->ndim, idx->ndim, "input 2 (src)", diag))) return st;
  char a[128], b[128];
  for (int32_t d = 0; d < idx->ndim; d++) {
    if (src->ndim && idx->shape[d] > src->shape[d])
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (index) ('%s'): shape %s is larger than input 2 "
                          "(src) ('%s') %s in dim %d", idx->name, oa_shape_str(idx, a, sizeof a), src->name,
                          oa_shape_str(src, b, sizeof b), d);
    if (d != dim && idx->shape[d] > x->shape[d])
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 1 (index) ('%s'): shape %s is larger than input 0 "
                          "(self) ('%s') %s in dim %d", idx->name, oa_shape_str(idx, a, sizeof a), x->name,
                          oa_shape_str(x, b, sizeof b), d);
  }
  plan->scratch_bytes = 0;
  if (red == RED_MEAN) { /* a contribution count per element of self */
    if ((uint64_t)x->numel > (uint64_t)(SIZE_MAX / sizeof(int64_t)))
      return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%lld counts do not fit this platform's address space",
                          (long long)x->numel);
    plan->scratch_bytes = (size_t)x->numel * sizeof(int64_t);
  }
  return OA_OK;
}

oa_status_t oa_ref_scatter_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *idx = call->inputs[1], *src = call->inputs[2], *y = call->outputs[0];
  const int32_t dim = (int32_t)call->ints[OA_ARG_SCATTER_DIM];
  const int64_t red = call->n_ints > OA_ARG_SCATTER_REDUCE ? call->ints[OA_ARG_SCATTER_REDUCE] : 0;
  const int inc = call->n_ints > OA_ARG_SCATTER_INCLUDE_SELF && call->ints[OA_ARG_SCATTER_INCLUDE_SELF] == 1;
  const int64_t size = x->ndim > 0 ? x->shape[dim] : 1;
  for (int64_t i = 0; i < idx->numel; i++) {
    int64_t v = oa_load_index(idx, i);
    if (v < 0 || v >= size) return index_error(diag, 1, "index", idx, i, v, dim, x, size, 0);
  }
  copy_self(x, y);
  if (!idx->numel) return OA_OK;
  /* operand 0: the target in the output (its `dim` term comes from the index), 1: src */
  int64_t ys[OA_MAX_DIMS], ss[OA_MAX_DIMS];
  oa_contiguous_strides(y->shape, y->ndim, ys);
  oa_contiguous_strides(src->shape, src->ndim, ss);
  const int64_t dim_stride = x->ndim > 0 ? ys[dim] : 0;
  it_t it;
  it_init(&it, idx->shape, idx->ndim, 2);
  for (int32_t d = 0; d < idx->ndim; d++) {
    it.st[0][d] = d == dim ? 0 : ys[d];
    it.st[1][d] = src->ndim ? ss[d] : 0;
  }
  uint8_t *dst = (uint8_t *)y->data;
  const uint8_t *s = (const uint8_t *)src->data;
  const size_t es = elsize(x);
  if (red == RED_NONE) {
    for (int64_t i = 0; i < idx->numel; i++, it_next(&it))
      oa_copy_elem(dst, it.off[0] + oa_load_index(idx, i) * dim_stride, s, it.off[1], es);
    return OA_OK;
  }
  if (!inc) { /* the targets start from the identity (self is not part of the reduction) */
    it_t t = it;
    for (int64_t i = 0; i < idx->numel; i++, it_next(&t))
      set_identity(dst, t.off[0] + oa_load_index(idx, i) * dim_stride, x->dtype, red);
  }
  int64_t *count = (int64_t *)scratch;
  if (red == RED_MEAN) memset(count, 0, (size_t)x->numel * sizeof(int64_t));
  for (int64_t i = 0; i < idx->numel; i++, it_next(&it)) {
    int64_t o = it.off[0] + oa_load_index(idx, i) * dim_stride;
    combine(dst, o, s, it.off[1], x->dtype, red);
    if (red == RED_MEAN) count[o]++;
  }
  if (red == RED_MEAN)
    for (int64_t e = 0; e < x->numel; e++)
      if (count[e]) mean_divide(dst, e, x->dtype, count[e] + inc);
  return OA_OK;
}

/* ==== slice_scatter ========================================================================= */

oa_status_t oa_ref_slice_scatter_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                         oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 4, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (src)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *src = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, src, x, "input 1 (src)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_ndim(call, x, 1, OA_MAX_DIMS, "input 0 (self)", diag))) return st;
  int64_t dim = call->ints[OA_ARG_SLICE_SCATTER_DIM], start = call->ints[OA_ARG_SLICE_SCATTER_START];
  int64_t end = call->ints[OA_ARG_SLICE_SCATTER_END], step = call->ints[OA_ARG_SLICE_SCATTER_STEP];
  int64_t want[OA_MAX_DIMS];
  if ((st = oa_check_slice(x, dim, start, end, step, want, diag))) return st;
  return oa_check_shape(call, src, want, x->ndim, "input 1 (src)", diag);
}

oa_status_t oa_ref_slice_scatter_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  (void)diag;
  const oa_tensor_t *x = call->inputs[0], *src = call->inputs[1], *y = call->outputs[0];
  copy_self(x, y);
  if (!src->numel) return OA_OK;
  const int32_t dim = (int32_t)call->ints[OA_ARG_SLICE_SCATTER_DIM];
  const int64_t start = call->ints[OA_ARG_SLICE_SCATTER_START], step = call->ints[OA_ARG_SLICE_SCATTER_STEP];
  /* [outer, n, inner] rows: src row (o, j) goes to output row (o, start + j * step) */
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < dim; d++) outer *= x->shape[d];
  for (int32_t d = dim + 1; d < x->ndim; d++) inner *= x->shape[d];
  const int64_t n = src->shape[dim], size = x->shape[dim];
  const size_t row = (size_t)inner * elsize(x);
  const uint8_t *s = (const uint8_t *)src->data;
  uint8_t *dst = (uint8_t *)y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < n; j++)
      memcpy(dst + (size_t)(o * size + start + j * step) * row, s + (size_t)(o * n + j) * row, row);
  return OA_OK;
}

/* ==== masked_scatter ======================================================================== */

oa_status_t oa_ref_masked_scatter_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                          oa_diag_t *diag) {
  (void)env;
  (void)plan;
  oa_status_t st;
  if ((st = oa_check_arity(call, 3, 3, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (mask)", diag)) ||
      (st = oa_check_present(call, 2, "input 2 (source)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *mask = call->inputs[1], *src = call->inputs[2], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, mask, OA_DT_BOOL, "input 1 (mask)", diag))) return st;
  if ((st = oa_check_same_dtype(call, src, x, "input 2 (source)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  int64_t xs[OA_MAX_DIMS], ms[OA_MAX_DIMS];
  if ((st = oa_broadcast_strides(call, x, y->shape, y->ndim, xs, "input 0 (self)", diag)) ||
      (st = oa_broadcast_strides(call, mask, y->shape, y->ndim, ms, "input 1 (mask)", diag)))
    return st;
  /* the output is self and mask broadcast together: each of its dims is one of theirs */
  for (int32_t d = 0; d < y->ndim; d++) {
    int32_t dx = d - (y->ndim - x->ndim), dm = d - (y->ndim - mask->ndim);
    int64_t nx = dx >= 0 ? x->shape[dx] : 1, nm = dm >= 0 ? mask->shape[dm] : 1;
    if (y->shape[d] != (nx != 1 ? nx : nm)) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): shape %s is not input 0 (self) and input 1 "
                          "(mask) broadcast together (dim %d)", y->name, oa_shape_str(y, s, sizeof s), d);
    }
  }
  return OA_OK;
}

oa_status_t oa_ref_masked_scatter_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                      const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)plan;
  (void)scratch;
  (void)env;
  const oa_tensor_t *x = call->inputs[0], *mask = call->inputs[1], *src = call->inputs[2], *y = call->outputs[0];
  int64_t xs[OA_MAX_DIMS], ms[OA_MAX_DIMS];
  oa_status_t st;
  if ((st = oa_broadcast_strides(call, x, y->shape, y->ndim, xs, "input 0 (self)", diag)) ||
      (st = oa_broadcast_strides(call, mask, y->shape, y->ndim, ms, "input 1 (mask)", diag)))
    return st;
  const uint8_t *mk = (const uint8_t *)mask->data;
  oa_nd_iter_t it;
  oa_nd_iter_init(&it, y->shape, y->ndim, 1, ms, NULL, NULL);
  int64_t count = 0;
  for (int64_t i = 0; i < y->numel; i++, oa_nd_iter_next(&it)) count += mk[it.off[0]] != 0;
  if (count > src->numel) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "input 2 (source) ('%s'): shape %s has %lld elements, input 1 "
                        "(mask) ('%s') selects %lld", src->name, oa_shape_str(src, s, sizeof s),
                        (long long)src->numel, mask->name, (long long)count);
  }
  const size_t es = elsize(x);
  const uint8_t *a = (const uint8_t *)x->data, *s = (const uint8_t *)src->data;
  uint8_t *dst = (uint8_t *)y->data;
  oa_nd_iter_init(&it, y->shape, y->ndim, 2, xs, ms, NULL);
  int64_t j = 0;
  for (int64_t i = 0; i < y->numel; i++, oa_nd_iter_next(&it)) {
    if (mk[it.off[1]]) oa_copy_elem(dst, i, s, j++, es);
    else oa_copy_elem(dst, i, a, it.off[0], es);
  }
  return OA_OK;
}
