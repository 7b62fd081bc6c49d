/* Reference reductions: softmax, log_softmax, sum, mean, amax, amin, prod, any, all, var (and
 * var_mean), argmax, argmin, and the cumulative ops cumsum, cumprod, cummax, cummin, logcumsumexp.
 *
 * Float sums (sum, mean, var, cumsum, softmax's denominators) and products accumulate in double
 * and round once; integer sums and products wrap modulo 2^64 (two's complement, as PyTorch's
 * int64 arithmetic) without signed overflow. NaN handling follows PyTorch: amax/amin propagate
 * NaN, argmax/argmin return the first NaN, softmax of a row holding a NaN is NaN; cummax/cummin
 * follow PyTorch's CPU kernel (a NaN, or a later equal element, takes the running index).
 *
 * The dim-list reductions coalesce the input (contiguous, row-major) into alternating runs of
 * kept and reduced dims (size-1 dims dropped). When the innermost run is reduced each output
 * element reduces contiguous runs into a scalar (the global-average-pool case: mean over H, W of
 * NCHW is one contiguous run per output); when it is kept, a row of double accumulators walks
 * the input contiguously. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

typedef union acc {
  double d;   /* float inputs */
  uint64_t u; /* integer sums / products (wrapping), any / all flags */
  int64_t i;  /* integer amax / amin */
} acc_t;

enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_PROD, R_ANY, R_ALL, R_VAR, R_VAR2 };

static const char *const k_names[] = {"sum", "mean", "amax", "amin", "prod", "any", "all", "var", "var"};

/* One helper serves several ops with one argument layout and reads it by the first op's names:
 * the others' layouts in opset.py must agree. */
#define RED_SAME(OP) (OA_ARG_##OP##_KEEPDIM == OA_ARG_SUM_KEEPDIM && OA_ARG_##OP##_DIMS == OA_ARG_SUM_DIMS)
_Static_assert(RED_SAME(MEAN) && RED_SAME(AMAX) && RED_SAME(AMIN) && RED_SAME(PROD) && RED_SAME(ANY) && RED_SAME(ALL) &&
                   RED_SAME(VAR),
               "the reductions no longer share sum's keepdim, dims* layout (red_prepare)");
_Static_assert(OA_ARG_ARGMIN_HAS_DIM == OA_ARG_ARGMAX_HAS_DIM && OA_ARG_ARGMIN_DIM == OA_ARG_ARGMAX_DIM &&
                   OA_ARG_ARGMIN_KEEPDIM == OA_ARG_ARGMAX_KEEPDIM,
               "argmin no longer shares argmax's has_dim, dim, keepdim layout (arg_prepare)");
_Static_assert(OA_ARG_LOG_SOFTMAX_DIM == OA_ARG_SOFTMAX_DIM,
               "log_softmax no longer shares softmax's dim (softmax_prepare)");

static int is_float(int32_t dt) { return dt == OA_DTYPE_FLOAT32; }

/* int64 / int32 two's complement value of a wrapped sum, without implementation-defined casts */
static int64_t u64_to_i64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}
static int32_t u64_to_i32(uint64_t u) {
  uint32_t lo = (uint32_t)u;
  return lo <= (uint32_t)INT32_MAX ? (int32_t)lo : -(int32_t)(~lo) - 1;
}

/* Scratch for `n` accumulators (times `copies`); fails when it cannot be addressed (32-bit). */
static oa_status_t acc_scratch(int64_t n, int64_t copies, oa_op_plan_t *plan, oa_diag_t *diag) {
  if ((uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(acc_t) / (uint64_t)copies))
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%lld accumulators do not fit this platform's address space",
                        (long long)n);
  plan->scratch_bytes = (size_t)n * (size_t)copies * sizeof(acc_t);
  return OA_OK;
}

/* [outer, n, inner] split of a contiguous tensor around `dim` (0-d: 1, 1, 1). */
static void split_at(const oa_tensor_t *x, int32_t dim, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1;
  *n = 1;
  *inner = 1;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (d < dim) *outer *= x->shape[d];
    else if (d == dim) *n = x->shape[d];
    else *inner *= x->shape[d];
  }
}

/* The single dim argument `ints[idx]`, idx an OA_ARG_* index (already normalized by the exporter),
 * checked against x. */
static oa_status_t check_dim(const oa_op_call_t *call, const oa_tensor_t *x, uint32_t idx, const char *arg,
                             int32_t *out_dim, oa_diag_t *diag) {
  int64_t dim = idx < call->n_ints ? call->ints[idx] : 0;
  int32_t lim = x->ndim > 0 ? x->ndim : 1;
  if (dim < 0 || dim >= lim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld: expected 0 <= %s < %d (input has %d dims)",
                        arg, (long long)dim, arg, lim, x->ndim);
  *out_dim = (int32_t)dim;
  return OA_OK;
}

static oa_status_t check_flag(const oa_op_call_t *call, uint32_t idx, const char *arg, oa_diag_t *diag) {
  int64_t v = idx < call->n_ints ? call->ints[idx] : 0;
  if (v != 0 && v != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument %s = %lld: expected 0 or 1", arg, (long long)v);
  return OA_OK;
}

/* Output shape of reducing x over the dims set in `mask`. */
static int32_t reduced_shape(const oa_tensor_t *x, uint32_t mask, int keepdim, int64_t *shape) {
  int32_t nd = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (mask & (1u << d)) {
      if (keepdim) shape[nd++] = 1;
    } else {
      shape[nd++] = x->shape[d];
    }
  }
  return nd;
}

/* ---- softmax / log_softmax ------------------------------------------------------------------- */

enum { S_OUTER, S_N, S_INNER };

static oa_status_t softmax_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  int32_t dim = 0;
  if ((st = check_dim(call, x, OA_ARG_SOFTMAX_DIM, "dim", &dim, diag))) return st;
  split_at(x, dim, &plan->params[S_OUTER], &plan->params[S_N], &plan->params[S_INNER]);
  if (plan->params[S_INNER] > 1) return acc_scratch(plan->params[S_INNER], 2, plan, diag);
  return OA_OK;
}

/* y = softmax(x) (or log_softmax) over n elements at stride `inner`, for `inner` interleaved rows
 * at once: mx/sum are `inner` double accumulators. The max is taken ignoring NaN; a NaN then
 * makes the sum and the whole row NaN, as in PyTorch. A row of -inf gives NaN (-inf - -inf). */
static void softmax_block(const float *x, float *y, int64_t n, int64_t inner, int log_mode, double *mx, double *sum) {
  for (int64_t j = 0; j < inner; j++) {
    mx[j] = -INFINITY;
    sum[j] = 0.0;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < inner; j++) {
      double v = x[i * inner + j];
      if (v > mx[j]) mx[j] = v;
    }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < inner; j++) sum[j] += exp((double)x[i * inner + j] - mx[j]);
  if (log_mode) {
    for (int64_t j = 0; j < inner; j++) sum[j] = log(sum[j]);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < inner; j++) y[i * inner + j] = (float)((double)x[i * inner + j] - mx[j] - sum[j]);
  } else {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < inner; j++)
        y[i * inner + j] = (float)(exp((double)x[i * inner + j] - mx[j]) / sum[j]);
  }
}

static oa_status_t softmax_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch, int log_mode) {
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  int64_t outer = plan->params[S_OUTER], n = plan->params[S_N], inner = plan->params[S_INNER];
  double one_mx, one_sum;
  double *mx = inner > 1 ? (double *)scratch : &one_mx;
  double *sum = inner > 1 ? (double *)scratch + inner : &one_sum;
  for (int64_t o = 0; o < outer; o++) softmax_block(x + o * n * inner, y + o * n * inner, n, inner, log_mode, mx, sum);
  return OA_OK;
}

oa_status_t oa_ref_softmax_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)env;
  return softmax_prepare(call, plan, diag);
}
oa_status_t oa_ref_softmax_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return softmax_run(call, plan, scratch, 0);
}
oa_status_t oa_ref_log_softmax_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                       oa_diag_t *diag) {
  (void)env;
  return softmax_prepare(call, plan, diag);
}
oa_status_t oa_ref_log_softmax_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                   const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return softmax_run(call, plan, scratch, 1);
}

/* ---- dim-list reductions --------------------------------------------------------------------- */

/* The input coalesced into runs: the innermost run (`inner` elements, reduced or kept) and the
 * outer kept / reduced runs with their element strides. */
typedef struct red_layout {
  int32_t nk, nr;
  int64_t ksize[OA_MAX_DIMS], kstride[OA_MAX_DIMS];
  int64_t rsize[OA_MAX_DIMS], rstride[OA_MAX_DIMS];
  int64_t rcount; /* product of rsize */
  int64_t inner;
  int inner_reduced;
} red_layout_t;

static void build_layout(const oa_tensor_t *x, uint32_t mask, red_layout_t *L) {
  int64_t size[OA_MAX_DIMS], stride[OA_MAX_DIMS], cs[OA_MAX_DIMS];
  int red[OA_MAX_DIMS];
  int32_t ng = 0;
  oa_contiguous_strides(x->shape, x->ndim, cs);
  for (int32_t d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    int r = (mask >> d) & 1u;
    if (ng > 0 && red[ng - 1] == r) {
      size[ng - 1] *= x->shape[d];
      stride[ng - 1] = cs[d];
    } else {
      size[ng] = x->shape[d];
      stride[ng] = cs[d];
      red[ng] = r;
      ng++;
    }
  }
  if (ng == 0) { /* a single element */
    size[0] = 1;
    stride[0] = 1;
    red[0] = 1;
    ng = 1;
  }
  L->inner = size[ng - 1];
  L->inner_reduced = red[ng - 1];
  L->nk = L->nr = 0;
  L->rcount = 1;
  for (int32_t g = 0; g < ng - 1; g++) {
    if (red[g]) {
      L->rsize[L->nr] = size[g];
      L->rstride[L->nr++] = stride[g];
      L->rcount *= size[g];
    } else {
      L->ksize[L->nk] = size[g];
      L->kstride[L->nk++] = stride[g];
    }
  }
}

/* A row-major odometer over runs, tracking an element offset. */
typedef struct odo {
  int32_t n;
  const int64_t *size, *stride;
  int64_t idx[OA_MAX_DIMS];
  int64_t off;
} odo_t;

static void odo_init(odo_t *o, int32_t n, const int64_t *size, const int64_t *stride) {
  o->n = n;
  o->size = size;
  o->stride = stride;
  for (int32_t d = 0; d < n; d++) o->idx[d] = 0;
  o->off = 0;
}
static void odo_next(odo_t *o) {
  for (int32_t d = o->n - 1; d >= 0; d--) {
    o->off += o->stride[d];
    if (++o->idx[d] < o->size[d]) return;
    o->off -= o->stride[d] * o->size[d];
    o->idx[d] = 0;
  }
}

/* Run STMT for each element v (type T) of the run p[0..len). */
#define EACH(T, ...)                          \
  do {                                        \
    const T *q_ = (const T *)p;               \
    for (int64_t j = 0; j < len; j++) {       \
      T v = q_[j];                            \
      __VA_ARGS__;                            \
    }                                         \
  } while (0)
/* EACH for the integer dtypes (bool and uint8 as uint8). */
#define EACH_INT(dt, ...)                                   \
  do {                                                      \
    switch (dt) {                                           \
      case OA_DTYPE_INT32: EACH(int32_t, __VA_ARGS__); break; \
      case OA_DTYPE_INT64: EACH(int64_t, __VA_ARGS__); break; \
      case OA_DTYPE_INT8: EACH(int8_t, __VA_ARGS__); break;   \
      default: EACH(uint8_t, __VA_ARGS__); break;           \
    }                                                       \
  } while (0)

static acc_t acc_init(int op, int32_t dt) {
  acc_t a;
  a.u = 0;
  int f = is_float(dt);
  switch (op) {
    case R_PROD:
      if (f) a.d = 1.0;
      else a.u = 1;
      break;
    case R_AMAX:
      if (f) a.d = -INFINITY;
      else a.i = INT64_MIN;
      break;
    case R_AMIN:
      if (f) a.d = INFINITY;
      else a.i = INT64_MAX;
      break;
    case R_ALL: a.u = 1; break;
    default:
      if (f) a.d = 0.0;
      break;
  }
  return a;
}

/* Float sum of a contiguous run with four double partial sums (breaks the add dependency). */
static double sum_f32(const float *q, int64_t len) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t j = 0;
  for (; j + 4 <= len; j += 4) {
    s0 += q[j];
    s1 += q[j + 1];
    s2 += q[j + 2];
    s3 += q[j + 3];
  }
  for (; j < len; j++) s0 += q[j];
  return (s0 + s1) + (s2 + s3);
}

/* Reduce the run p[0..len) into one accumulator. */
static void acc_scalar(int op, int32_t dt, acc_t *a, const void *p, int64_t len, double mean) {
  if (is_float(dt)) {
    const float *q = (const float *)p;
    double s = a->d;
    uint64_t f = a->u;
    switch (op) {
      case R_SUM: a->d = s + sum_f32(q, len); break;
      case R_VAR2:
        for (int64_t j = 0; j < len; j++) {
          double t = q[j] - mean;
          s += t * t;
        }
        a->d = s;
        break;
      case R_PROD:
        for (int64_t j = 0; j < len; j++) s *= q[j];
        a->d = s;
        break;
      case R_AMAX:
        for (int64_t j = 0; j < len; j++) {
          double v = q[j];
          if (v != v || v > s) s = v; /* a NaN sticks: nothing compares greater than it */
        }
        a->d = s;
        break;
      case R_AMIN:
        for (int64_t j = 0; j < len; j++) {
          double v = q[j];
          if (v != v || v < s) s = v;
        }
        a->d = s;
        break;
      case R_ANY:
        for (int64_t j = 0; j < len; j++) f |= q[j] != 0.0f;
        a->u = f;
        break;
      case R_ALL:
        for (int64_t j = 0; j < len; j++) f &= q[j] != 0.0f;
        a->u = f;
        break;
      default: break;
    }
    return;
  }
  uint64_t u = a->u;
  int64_t m = a->i;
  switch (op) {
    case R_SUM: EACH_INT(dt, u += (uint64_t)v); a->u = u; break;
    case R_PROD: EACH_INT(dt, u *= (uint64_t)v); a->u = u; break;
    case R_AMAX: EACH_INT(dt, if ((int64_t)v > m) m = v); a->i = m; break;
    case R_AMIN: EACH_INT(dt, if ((int64_t)v < m) m = v); a->i = m; break;
    case R_ANY: EACH_INT(dt, u |= v != 0); a->u = u; break;
    case R_ALL: EACH_INT(dt, u &= v != 0); a->u = u; break;
    default: break;
  }
}

/* Reduce the run p[0..len) elementwise into the accumulators a[0..len). */
static void acc_vec(int op, int32_t dt, acc_t *a, const void *p, int64_t len, const acc_t *mean) {
  if (is_float(dt)) {
    const float *q = (const float *)p;
    switch (op) {
      case R_SUM: for (int64_t j = 0; j < len; j++) a[j].d += q[j]; break;
      case R_VAR2:
        for (int64_t j = 0; j < len; j++) {
          double t = q[j] - mean[j].d;
          a[j].d += t * t;
        }
        break;
      case R_PROD: for (int64_t j = 0; j < len; j++) a[j].d *= q[j]; break;
      case R_AMAX:
        for (int64_t j = 0; j < len; j++) {
          double v = q[j];
          if (v != v || v > a[j].d) a[j].d = v;
        }
        break;
      case R_AMIN:
        for (int64_t j = 0; j < len; j++) {
          double v = q[j];
          if (v != v || v < a[j].d) a[j].d = v;
        }
        break;
      case R_ANY: for (int64_t j = 0; j < len; j++) a[j].u |= q[j] != 0.0f; break;
      case R_ALL: for (int64_t j = 0; j < len; j++) a[j].u &= q[j] != 0.0f; break;
      default: break;
    }
    return;
  }
  switch (op) {
    case R_SUM: EACH_INT(dt, a[j].u += (uint64_t)v); break;
    case R_PROD: EACH_INT(dt, a[j].u *= (uint64_t)v); break;
    case R_AMAX: EACH_INT(dt, if ((int64_t)v > a[j].i) a[j].i = v); break;
    case R_AMIN: EACH_INT(dt, if ((int64_t)v < a[j].i) a[j].i = v); break;
    case R_ANY: EACH_INT(dt, a[j].u |= v != 0); break;
    case R_ALL: EACH_INT(dt, a[j].u &= v != 0); break;
    default: break;
  }
}

/* Write one finished accumulator as output element o. */
static void acc_store(int op, int32_t in_dt, const oa_tensor_t *y, int64_t o, acc_t a, double count, double corr) {
  switch (op) {
    case R_MEAN: ((float *)y->data)[o] = (float)(a.d / count); break;
    case R_VAR: {
      /* PyTorch: divisor = max(N - correction, 0); M2 / 0 gives inf (or NaN when M2 == 0) */
      double divisor = count > corr ? count - corr : 0.0;
      ((float *)y->data)[o] = (float)(a.d / divisor);
      break;
    }
    case R_ANY:
    case R_ALL: ((uint8_t *)y->data)[o] = (uint8_t)(a.u != 0); break;
    default:
      if (is_float(in_dt)) {
        ((float *)y->data)[o] = (float)a.d;
      } else if (op == R_AMAX || op == R_AMIN) {
        if (y->dtype == OA_DTYPE_INT64) ((int64_t *)y->data)[o] = a.i;
        else ((int32_t *)y->data)[o] = (int32_t)a.i; /* an int32 input's own value */
      } else {
        if (y->dtype == OA_DTYPE_INT64) ((int64_t *)y->data)[o] = u64_to_i64(a.u);
        else ((int32_t *)y->data)[o] = u64_to_i32(a.u);
      }
      break;
  }
}

/* plan->params layout for the dim-list reductions */
enum { RD_MASK, RD_COUNT };

static uint64_t red_dtypes(int op) {
  switch (op) {
    case R_SUM:
    case R_PROD: return OA_DT_F32 | OA_DT_INT | OA_DT_BOOL;
    case R_AMAX:
    case R_AMIN: return OA_DT_NUM;
    case R_ANY:
    case R_ALL: return OA_DT_ALL;
    default: return OA_DT_F32; /* mean, var */
  }
}

static oa_status_t red_prepare(int op, const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  /* var: an optional second output, the mean (var_mean) */
  if ((st = oa_check_arity(call, 1, 1, op == R_VAR && call->n_outputs == 2 ? 2 : 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, red_dtypes(op), "input 0 (self)", diag))) return st;
  /* output dtype */
  uint64_t out_ok;
  switch (op) {
    case R_SUM:
    case R_PROD:
      out_ok = is_float(x->dtype) ? OA_DT_F32 : (x->dtype == OA_DTYPE_INT32 ? OA_DT_INT : OA_DT_I64);
      break;
    case R_ANY:
    case R_ALL: out_ok = x->dtype == OA_DTYPE_UINT8 ? OA_DT_U8 : OA_DT_BOOL; break;
    default: out_ok = OA_DTYPE_BIT(x->dtype); break;
  }
  if (y->dtype < 0 || y->dtype > 63 || !(out_ok & OA_DTYPE_BIT(y->dtype))) {
    const char *want = out_ok == OA_DT_INT ? "int64 or int32" : oa_dtype_name(out_ok == OA_DT_F32 ? OA_DTYPE_FLOAT32
                                                                          : out_ok == OA_DT_I64 ? OA_DTYPE_INT64
                                                                          : out_ok == OA_DT_U8 ? OA_DTYPE_UINT8
                                                                          : out_ok == OA_DT_BOOL ? OA_DTYPE_BOOL
                                                                                                 : x->dtype);
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): expected dtype %s for %s of %s, received %s",
                        y->name, want, k_names[op], oa_dtype_name(x->dtype), oa_dtype_name(y->dtype));
  }
  if ((st = check_flag(call, OA_ARG_SUM_KEEPDIM, "keepdim", diag))) return st;
  int keepdim = call->n_ints > OA_ARG_SUM_KEEPDIM && call->ints[OA_ARG_SUM_KEEPDIM] == 1;
  /* dims: the variadic tail from OA_ARG_SUM_DIMS, none listed = all dims */
  int32_t lim = x->ndim > 0 ? x->ndim : 1;
  uint32_t ndims = call->n_ints > OA_ARG_SUM_DIMS ? call->n_ints - OA_ARG_SUM_DIMS : 0, mask = 0;
  if (ndims > (uint32_t)lim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims: %u dims listed, the input has %d", ndims, x->ndim);
  for (uint32_t i = 0; i < ndims; i++) {
    int64_t d = call->ints[OA_ARG_SUM_DIMS + i];
    if (d < 0 || d >= lim)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld: expected 0 <= dim < %d", i,
                          (long long)d, lim);
    if (mask & (1u << d))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument dims[%u] = %lld appears more than once", i,
                          (long long)d);
    mask |= 1u << d;
  }
  if (ndims == 0) mask = (1u << lim) - 1u;
  if (x->ndim == 0) mask = 0; /* a 0-d input reduces one element whatever the dims */
  int64_t shape[OA_MAX_DIMS];
  int32_t nd = reduced_shape(x, mask, keepdim, shape);
  if ((st = oa_check_shape(call, y, shape, nd, "output 0", diag))) return st;
  if (call->n_outputs == 2 && ((st = oa_check_same_dtype(call, call->outputs[1], y, "output 1 (mean)", diag)) ||
                               (st = oa_check_shape(call, call->outputs[1], shape, nd, "output 1 (mean)", diag))))
    return st;
  int64_t count = 1;
  for (int32_t d = 0; d < x->ndim; d++)
    if (mask & (1u << d)) count *= x->shape[d];
  if ((op == R_AMAX || op == R_AMIN) && count == 0 && y->numel > 0) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (self) ('%s'): cannot compute %s over an empty dim (shape %s): it has no identity",
                        x->name, k_names[op], oa_shape_str(x, s, sizeof s));
  }
  plan->params[RD_MASK] = mask;
  plan->params[RD_COUNT] = count;
  plan->scratch_bytes = 0;
  if (x->numel > 0) {
    red_layout_t L;
    build_layout(x, mask, &L);
    if (!L.inner_reduced) return acc_scratch(L.inner, op == R_VAR ? 2 : 1, plan, diag);
  }
  return OA_OK;
}

static oa_status_t red_run(int op, const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch) {
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int32_t dt = x->dtype;
  double count = (double)plan->params[RD_COUNT];
  double corr = op == R_VAR && call->n_floats > OA_ARG_VAR_CORRECTION ? call->floats[OA_ARG_VAR_CORRECTION] : 0.0;
  int op1 = op == R_MEAN || op == R_VAR ? R_SUM : op; /* the first (or only) pass */
  const oa_tensor_t *mean_out = call->n_outputs == 2 ? call->outputs[1] : NULL; /* var_mean */
  if (x->numel == 0) { /* empty reduced dims: every output is the identity */
    acc_t a = acc_init(op1, dt);
    for (int64_t o = 0; o < y->numel; o++) {
      acc_store(op, dt, y, o, a, count, corr);
      if (mean_out) acc_store(R_MEAN, dt, mean_out, o, a, count, corr);
    }
    return OA_OK;
  }
  red_layout_t L;
  build_layout(x, (uint32_t)plan->params[RD_MASK], &L);
  const uint8_t *base = (const uint8_t *)x->data;
  size_t es = oa_dtype_size(dt);
  odo_t ko, ro;
  odo_init(&ko, L.nk, L.ksize, L.kstride);
  if (L.inner_reduced) {
    for (int64_t o = 0; o < y->numel; o++) {
      acc_t a = acc_init(op1, dt);
      odo_init(&ro, L.nr, L.rsize, L.rstride);
      for (int64_t c = 0; c < L.rcount; c++) {
        acc_scalar(op1, dt, &a, base + (size_t)(ko.off + ro.off) * es, L.inner, 0.0);
        odo_next(&ro);
      }
      if (op == R_MEAN) {
        a.d /= count;
        acc_store(R_SUM, dt, y, o, a, count, corr);
      } else if (op == R_VAR) {
        if (mean_out) acc_store(R_MEAN, dt, mean_out, o, a, count, corr);
        double mean = a.d / count;
        a.d = 0.0;
        odo_init(&ro, L.nr, L.rsize, L.rstride);
        for (int64_t c = 0; c < L.rcount; c++) {
          acc_scalar(R_VAR2, dt, &a, base + (size_t)(ko.off + ro.off) * es, L.inner, mean);
          odo_next(&ro);
        }
        acc_store(R_VAR, dt, y, o, a, count, corr);
      } else {
        acc_store(op, dt, y, o, a, count, corr);
      }
      odo_next(&ko);
    }
    return OA_OK;
  }
  int64_t inner = L.inner, rows = y->numel / inner;
  acc_t *acc = (acc_t *)scratch, *acc2 = acc + inner;
  for (int64_t r = 0; r < rows; r++) {
    acc_t init = acc_init(op1, dt);
    for (int64_t j = 0; j < inner; j++) acc[j] = init;
    odo_init(&ro, L.nr, L.rsize, L.rstride);
    for (int64_t c = 0; c < L.rcount; c++) {
      acc_vec(op1, dt, acc, base + (size_t)(ko.off + ro.off) * es, inner, NULL);
      odo_next(&ro);
    }
    if (op == R_VAR) {
      for (int64_t j = 0; j < inner; j++) {
        if (mean_out) acc_store(R_MEAN, dt, mean_out, r * inner + j, acc[j], count, corr);
        acc[j].d /= count;
        acc2[j].d = 0.0;
      }
      odo_init(&ro, L.nr, L.rsize, L.rstride);
      for (int64_t c = 0; c < L.rcount; c++) {
        acc_vec(R_VAR2, dt, acc2, base + (size_t)(ko.off + ro.off) * es, inner, acc);
        odo_next(&ro);
      }
      for (int64_t j = 0; j < inner; j++) acc_store(R_VAR, dt, y, r * inner + j, acc2[j], count, corr);
    } else {
      for (int64_t j = 0; j < inner; j++) acc_store(op, dt, y, r * inner + j, acc[j], count, corr);
    }
    odo_next(&ko);
  }
  return OA_OK;
}

#define RED_KERNEL(name, OP)                                                                                 \
  oa_status_t oa_ref_##name##_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, \
                                      oa_diag_t *diag) {                                                     \
    (void)env;                                                                                               \
    return red_prepare(OP, call, plan, diag);                                                                \
  }                                                                                                          \
  oa_status_t oa_ref_##name##_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,          \
                                  const oa_kernel_env_t *env, oa_diag_t *diag) {                             \
    (void)env;                                                                                               \
    (void)diag;                                                                                              \
    return red_run(OP, call, plan, scratch);                                                                 \
  }

RED_KERNEL(sum, R_SUM)
RED_KERNEL(mean, R_MEAN)
RED_KERNEL(amax, R_AMAX)
RED_KERNEL(amin, R_AMIN)
RED_KERNEL(prod, R_PROD)
RED_KERNEL(any, R_ANY)
RED_KERNEL(all, R_ALL)
RED_KERNEL(var, R_VAR)

/* ---- argmax / argmin ------------------------------------------------------------------------- */

enum { A_OUTER, A_N, A_INNER };

static oa_status_t arg_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 0, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_NUM, "input 0 (self)", diag))) return st;
  if ((st = oa_check_dtype(call, y, OA_DT_I64, "output 0", diag))) return st;
  if ((st = check_flag(call, OA_ARG_ARGMAX_HAS_DIM, "has_dim", diag)) ||
      (st = check_flag(call, OA_ARG_ARGMAX_KEEPDIM, "keepdim", diag)))
    return st;
  int has_dim = call->n_ints > OA_ARG_ARGMAX_HAS_DIM && call->ints[OA_ARG_ARGMAX_HAS_DIM] == 1;
  int keepdim = call->n_ints > OA_ARG_ARGMAX_KEEPDIM && call->ints[OA_ARG_ARGMAX_KEEPDIM] == 1;
  int64_t shape[OA_MAX_DIMS];
  int32_t nd;
  if (has_dim) {
    int32_t dim = 0;
    if ((st = check_dim(call, x, OA_ARG_ARGMAX_DIM, "dim", &dim, diag))) return st;
    nd = reduced_shape(x, x->ndim ? 1u << dim : 0u, keepdim, shape);
    split_at(x, dim, &plan->params[A_OUTER], &plan->params[A_N], &plan->params[A_INNER]);
  } else { /* over the flattened input: a 0-d output, or all ones with keepdim */
    nd = keepdim ? x->ndim : 0;
    for (int32_t d = 0; d < nd; d++) shape[d] = 1;
    plan->params[A_OUTER] = 1;
    plan->params[A_N] = x->numel;
    plan->params[A_INNER] = 1;
  }
  if ((st = oa_check_shape(call, y, shape, nd, "output 0", diag))) return st;
  if (plan->params[A_N] == 0 && y->numel > 0) {
    char s[128];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "input 0 (self) ('%s'): cannot take %s over an empty dim (shape %s)", x->name, call->op,
                        oa_shape_str(x, s, sizeof s));
  }
  if (plan->params[A_INNER] > 1) return acc_scratch(plan->params[A_INNER], 1, plan, diag);
  return OA_OK;
}

/* Index of the max (is_min: min) along n at stride `inner`, for `inner` interleaved rows: the
 * first occurrence wins, and a NaN beats everything (its first occurrence, as PyTorch). */
static void arg_block(const oa_tensor_t *x, int64_t start, int64_t n, int64_t inner, int is_min, int64_t *idx,
                      acc_t *best) {
  const void *data = x->data;
  if (is_float(x->dtype)) {
    const float *q = (const float *)data + start;
    for (int64_t j = 0; j < inner; j++) {
      best[j].d = q[j];
      idx[j] = 0;
    }
    for (int64_t i = 1; i < n; i++)
      for (int64_t j = 0; j < inner; j++) {
        double b = best[j].d, v = q[i * inner + j];
        if (b != b) continue;
        if (v != v || (is_min ? v < b : v > b)) {
          best[j].d = v;
          idx[j] = i;
        }
      }
    return;
  }
  int is64 = x->dtype == OA_DTYPE_INT64;
  const int64_t *q64 = (const int64_t *)data + start;
  const int32_t *q32 = (const int32_t *)data + start;
  for (int64_t j = 0; j < inner; j++) {
    best[j].i = is64 ? q64[j] : q32[j];
    idx[j] = 0;
  }
  for (int64_t i = 1; i < n; i++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t v = is64 ? q64[i * inner + j] : q32[i * inner + j];
      if (is_min ? v < best[j].i : v > best[j].i) {
        best[j].i = v;
        idx[j] = i;
      }
    }
}

static oa_status_t arg_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch, int is_min) {
  int64_t outer = plan->params[A_OUTER], n = plan->params[A_N], inner = plan->params[A_INNER];
  int64_t *y = (int64_t *)call->outputs[0]->data;
  acc_t one;
  acc_t *best = inner > 1 ? (acc_t *)scratch : &one;
  if (n == 0) return OA_OK; /* then the output is empty (checked in prepare) */
  for (int64_t o = 0; o < outer; o++) arg_block(call->inputs[0], o * n * inner, n, inner, is_min, y + o * inner, best);
  return OA_OK;
}

oa_status_t oa_ref_argmax_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return arg_prepare(call, plan, diag);
}
oa_status_t oa_ref_argmax_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return arg_run(call, plan, scratch, 0);
}
oa_status_t oa_ref_argmin_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return arg_prepare(call, plan, diag);
}
oa_status_t oa_ref_argmin_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return arg_run(call, plan, scratch, 1);
}

/* ---- cumsum / cumprod ------------------------------------------------------------------------ */

enum { C_OUTER, C_N, C_INNER };

_Static_assert(OA_ARG_CUMPROD_DIM == OA_ARG_CUMSUM_DIM && OA_ARG_CUMMAX_DIM == OA_ARG_CUMSUM_DIM &&
                   OA_ARG_CUMMIN_DIM == OA_ARG_CUMSUM_DIM && OA_ARG_LOGCUMSUMEXP_DIM == OA_ARG_CUMSUM_DIM,
               "the cumulative ops no longer share cumsum's dim (cum_split)");

/* The dim argument and the [outer, n, inner] split of the cumulative ops; scratch for `copies`
 * rows of `inner` accumulators when inner > 1. */
static oa_status_t cum_split(const oa_op_call_t *call, oa_op_plan_t *plan, int64_t copies, oa_diag_t *diag) {
  int32_t dim = 0;
  oa_status_t st = check_dim(call, call->inputs[0], OA_ARG_CUMSUM_DIM, "dim", &dim, diag);
  if (st) return st;
  split_at(call->inputs[0], dim, &plan->params[C_OUTER], &plan->params[C_N], &plan->params[C_INNER]);
  if (copies > 0 && plan->params[C_INNER] > 1) return acc_scratch(plan->params[C_INNER], copies, plan, diag);
  return OA_OK;
}

static oa_status_t cum_prepare(int op, const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_NUM | OA_DT_BOOL, "input 0 (self)", diag))) return st;
  /* float -> float32; integers and bool -> int64 (PyTorch), int32 -> int32 with dtype=int32 */
  uint64_t out_ok = is_float(x->dtype) ? OA_DT_F32 : (x->dtype == OA_DTYPE_INT32 ? OA_DT_INT : OA_DT_I64);
  if (y->dtype < 0 || y->dtype > 63 || !(out_ok & OA_DTYPE_BIT(y->dtype)))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "output 0 ('%s'): expected dtype %s for %s of %s, received %s",
                        y->name, is_float(x->dtype) ? "float32" : (out_ok == OA_DT_INT ? "int64 or int32" : "int64"),
                        op == R_SUM ? "cumsum" : "cumprod", oa_dtype_name(x->dtype), oa_dtype_name(y->dtype));
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  return cum_split(call, plan, 1, diag);
}

static oa_status_t cum_run(int op, const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch) {
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  int64_t outer = plan->params[C_OUTER], n = plan->params[C_N], inner = plan->params[C_INNER];
  acc_t one;
  acc_t *acc = inner > 1 ? (acc_t *)scratch : &one;
  int32_t dt = x->dtype;
  for (int64_t o = 0; o < outer; o++) {
    acc_t init = acc_init(op, dt);
    for (int64_t j = 0; j < inner; j++) acc[j] = init;
    for (int64_t i = 0; i < n; i++) {
      int64_t at = (o * n + i) * inner;
      const void *p = (const uint8_t *)x->data + (size_t)at * oa_dtype_size(dt);
      acc_vec(op, dt, acc, p, inner, NULL);
      for (int64_t j = 0; j < inner; j++) acc_store(op, dt, y, at + j, acc[j], 0.0, 0.0);
    }
  }
  return OA_OK;
}

oa_status_t oa_ref_cumsum_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return cum_prepare(R_SUM, call, plan, diag);
}
oa_status_t oa_ref_cumsum_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return cum_run(R_SUM, call, plan, scratch);
}
oa_status_t oa_ref_cumprod_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                   oa_diag_t *diag) {
  (void)env;
  return cum_prepare(R_PROD, call, plan, diag);
}
oa_status_t oa_ref_cumprod_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                               const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)env;
  (void)diag;
  return cum_run(R_PROD, call, plan, scratch);
}

/* ---- cummax / cummin ------------------------------------------------------------------------- */

static oa_status_t cumext_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 2, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_ALL, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, call->outputs[0], x, "output 0 (values)", diag)) ||
      (st = oa_check_same_shape(call, call->outputs[0], x, "output 0 (values)", diag)) ||
      (st = oa_check_dtype(call, call->outputs[1], OA_DT_I64, "output 1 (indices)", diag)) ||
      (st = oa_check_same_shape(call, call->outputs[1], x, "output 1 (indices)", diag)))
    return st;
  return cum_split(call, plan, 0, diag);
}

/* Element i of an integer (or bool) tensor as int64. */
static int64_t int_at(const oa_tensor_t *t, int64_t i) {
  switch (t->dtype) {
    case OA_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case OA_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case OA_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
  }
}

/* PyTorch's cummax_cummin_helper: element i replaces the running value (and index) when it is NaN,
 * or when the running value is not NaN and i is >= it (cummin: <=). */
static oa_status_t cumext_run(const oa_op_call_t *call, const oa_op_plan_t *plan, int is_min) {
  const oa_tensor_t *x = call->inputs[0];
  int64_t outer = plan->params[C_OUTER], n = plan->params[C_N], inner = plan->params[C_INNER];
  size_t es = oa_dtype_size(x->dtype);
  uint8_t *vals = (uint8_t *)call->outputs[0]->data;
  int64_t *idx = (int64_t *)call->outputs[1]->data;
  int f = is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * n * inner + j, best = 0;
      for (int64_t i = 0; i < n; i++) {
        int64_t at = base + i * inner, cur = base + best * inner;
        int take;
        if (f) {
          float v = ((const float *)x->data)[at], m = ((const float *)x->data)[cur];
          take = v != v || (m == m && (is_min ? v <= m : v >= m));
        } else {
          int64_t v = int_at(x, at), m = int_at(x, cur);
          take = is_min ? v <= m : v >= m;
        }
        if (take) best = i;
        memcpy(vals + (size_t)at * es, (const uint8_t *)x->data + (size_t)(base + best * inner) * es, es);
        idx[at] = best;
      }
    }
  return OA_OK;
}

oa_status_t oa_ref_cummax_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return cumext_prepare(call, plan, diag);
}
oa_status_t oa_ref_cummax_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  return cumext_run(call, plan, 0);
}
oa_status_t oa_ref_cummin_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                  oa_diag_t *diag) {
  (void)env;
  return cumext_prepare(call, plan, diag);
}
oa_status_t oa_ref_cummin_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                              const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  return cumext_run(call, plan, 1);
}

/* ---- logcumsumexp ---------------------------------------------------------------------------- */

oa_status_t oa_ref_logcumsumexp_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                        oa_diag_t *diag) {
  (void)env;
  oa_status_t st;
  if ((st = oa_check_arity(call, 1, 1, 1, 1, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (self)", diag))) return st;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (self)", diag))) return st;
  if ((st = oa_check_same_dtype(call, y, x, "output 0", diag))) return st;
  if ((st = oa_check_same_shape(call, y, x, "output 0", diag))) return st;
  return cum_split(call, plan, 0, diag);
}

/* log(exp(x) + exp(acc)) as PyTorch's _log_add_exp_helper: NaN propagates, and two equal
 * infinities give that infinity (not inf - inf). */
static double log_add_exp(double x, double acc) {
  if (x != x || acc != acc) return NAN;
  double lo = x < acc ? x : acc, hi = x < acc ? acc : x;
  if (lo != hi || isfinite(lo)) return log1p(exp(lo - hi)) + hi;
  return x;
}

oa_status_t oa_ref_logcumsumexp_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const float *x = (const float *)call->inputs[0]->data;
  float *y = (float *)call->outputs[0]->data;
  int64_t outer = plan->params[C_OUTER], n = plan->params[C_N], inner = plan->params[C_INNER];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      double acc = -INFINITY;
      for (int64_t i = 0; i < n; i++) {
        int64_t at = (o * n + i) * inner + j;
        acc = log_add_exp((double)x[at], acc);
        y[at] = (float)acc;
      }
    }
  return OA_OK;
}
