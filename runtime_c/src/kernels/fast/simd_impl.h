/* SIMD kernels for the hot non-GEMM ops, written once on the simd_vec.h abstraction and compiled
 * per ISA by x86/simd_avx2.c ("avx2"), arm/simd_neon.c ("neon") and fast/simd_portable.c
 * ("fast", plain C11 for every target). The including file defines the backend macro and
 * OA_SIMD_FN(name), which names the exported functions (oa_simd_<variant>_<op>_prepare/_run).
 *
 * Selection (kernel.h): the reference kernel's prepare has validated the call before any of these
 * prepares runs, so prepare here only re-checks what run relies on (counts, dtypes, layouts),
 * checks the CPU (env->features) and declines anything it does not handle with
 * OA_ERR_UNSUPPORTED, leaving the call to the reference kernel. run never fails.
 *
 * Threads: work is split with oa_parallel_for over outputs only (element blocks, rows, output
 * rows of a plane, query-row blocks of a head); every output is computed by the same code in the
 * same order whatever the split, so results do not depend on the thread count.
 *
 * Numerics (tolerances are checked by tests/ops/test_simd_kernels.py against the reference kernels
 * and PyTorch):
 *   relu / hardtanh / clamp / add / sub / mul / div: exactly the reference's float operations.
 *   exp / sigmoid / tanh / silu / gelu / erf: simd_math.h, a few ulp (<= 3 measured; the gelu
 *     erf form in its far negative tail up to ~10 ulp, where PyTorch's own 1 + erf cancels).
 *   softmax / log_softmax / layer_norm / mean / sum / avg pooling: float sums in vector lanes,
 *     flushed to double every 1024 elements (the reference sums in double): ~1e-7 relative.
 *   max pooling: exact. sdpa: float dot products and an online (flash) softmax over key blocks of
 *     64 (the reference materializes double scores): ~1e-6 relative. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../cpu/threadpool.h"
#include "../kernel.h"
#include "simd_math.h"

#ifndef OA_SIMD_FN
#error "define OA_SIMD_FN(name) before including simd_impl.h"
#endif

/* ---- common ---------------------------------------------------------------------------------- */

static int simd_cpu_ok(const oa_kernel_env_t *env) {
#if defined(OA_SIMD_AVX2)
  return env && env->features && env->features->avx2 && env->features->fma;
#elif defined(OA_SIMD_NEON)
  return env && env->features && env->features->neon;
#else
  (void)env;
  return 1;
#endif
}

static int simd_is_f32(const oa_tensor_t *t) { return t && t->dtype == OA_DTYPE_FLOAT32; }

static int64_t simd_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t simd_max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Sum of n floats: vector lanes in float, flushed to a double every 1024 elements. */
#define SIMD_SUM_BLOCK 1024
static double simd_sum(const float *x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += SIMD_SUM_BLOCK) {
    const int64_t e = simd_min64(n, b + SIMD_SUM_BLOCK);
    vf a0 = vf_zero(), a1 = vf_zero();
    int64_t i = b;
    for (; i + 2 * VW <= e; i += 2 * VW) {
      a0 = vf_add(a0, vf_load(x + i));
      a1 = vf_add(a1, vf_load(x + i + VW));
    }
    for (; i + VW <= e; i += VW) a0 = vf_add(a0, vf_load(x + i));
    if (i < e) a1 = vf_add(a1, vf_load_part(x + i, e - i, 0.0f));
    total += (double)vf_hsum(vf_add(a0, a1));
  }
  return total;
}

/* ---- unary elementwise ------------------------------------------------------------------------ */

enum simd_unary { SU_RELU, SU_HARDTANH, SU_CLAMP, SU_SIGMOID, SU_TANH, SU_SILU, SU_GELU, SU_EXP, SU_ERF };

/* plan->params */
enum { UP_OP, UP_HAS_LO, UP_HAS_HI, UP_APPROX };

#define SU_BLOCK 1024 /* elements per parallel_for item */

typedef struct {
  const float *x;
  float *y;
  int64_t n;
  int op, has_lo, has_hi, approx;
  float lo, hi;
} su_ctx_t;

/* y[i] = EXPR(v) over [i0, i1), v the vector of x; the tail goes through a padded buffer */
#define SU_LOOP(EXPR)                                                                      \
  do {                                                                                     \
    int64_t i = i0;                                                                        \
    for (; i + VW <= i1; i += VW) {                                                        \
      const vf v = vf_load(x + i);                                                         \
      vf_store(y + i, (EXPR));                                                             \
    }                                                                                      \
    if (i < i1) {                                                                          \
      const vf v = vf_load_part(x + i, i1 - i, 0.0f);                                      \
      vf_store_part(y + i, i1 - i, (EXPR));                                                \
    }                                                                                      \
  } while (0)

static void su_range(void *p, int64_t b, int64_t e) {
  const su_ctx_t *c = (const su_ctx_t *)p;
  const float *x = c->x;
  float *y = c->y;
  const int64_t i0 = b * SU_BLOCK, i1 = simd_min64(e * SU_BLOCK, c->n);
  const vf zero = vf_zero(), lo = vf_set1(c->lo), hi = vf_set1(c->hi);
  switch (c->op) {
    case SU_RELU: SU_LOOP(vf_max_keep(v, zero)); break;
    case SU_HARDTANH: SU_LOOP(vf_min_keep(vf_max_keep(v, lo), hi)); break;
    case SU_CLAMP:
      if (c->has_lo && c->has_hi) SU_LOOP(vf_min_keep(vf_max_keep(v, lo), hi));
      else if (c->has_lo) SU_LOOP(vf_max_keep(v, lo));
      else if (c->has_hi) SU_LOOP(vf_min_keep(v, hi));
      else SU_LOOP(v);
      break;
    case SU_SIGMOID: SU_LOOP(vsigmoid(v)); break;
    case SU_TANH: SU_LOOP(vtanh(v)); break;
    case SU_SILU: SU_LOOP(vsilu(v)); break;
    case SU_GELU:
      if (c->approx) SU_LOOP(vgelu_tanh(v));
      else SU_LOOP(vgelu_erf(v));
      break;
    case SU_EXP: SU_LOOP(vexp(v)); break;
    case SU_ERF: SU_LOOP(verf(v)); break;
    default: break;
  }
}

static oa_status_t su_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, int op) {
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  if (call->n_inputs != 1 || call->n_outputs != 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!simd_is_f32(x) || !simd_is_f32(y) || x->numel != y->numel) return OA_ERR_UNSUPPORTED;
  plan->params[UP_OP] = op;
  if (op == SU_HARDTANH || op == SU_CLAMP) {
    int64_t has_lo = 1, has_hi = 1;
    if (op == SU_CLAMP) {
      has_lo = call->n_ints > 0 ? call->ints[0] : 0;
      has_hi = call->n_ints > 1 ? call->ints[1] : 0;
    }
    const double lo = call->n_floats > 0 ? call->floats[0] : 0.0, hi = call->n_floats > 1 ? call->floats[1] : 0.0;
    /* NaN bounds (the result is NaN) stay with the reference kernel */
    if ((has_lo && (float)lo != (float)lo) || (has_hi && (float)hi != (float)hi)) return OA_ERR_UNSUPPORTED;
    plan->params[UP_HAS_LO] = has_lo != 0;
    plan->params[UP_HAS_HI] = has_hi != 0;
  }
  if (op == SU_GELU) {
    const int64_t approx = call->n_ints > 0 ? call->ints[0] : 0;
    if (approx != 0 && approx != 1) return OA_ERR_UNSUPPORTED;
    plan->params[UP_APPROX] = approx;
  }
  return OA_OK;
}

static oa_status_t su_run(const oa_op_call_t *call, const oa_op_plan_t *plan, const oa_kernel_env_t *env) {
  su_ctx_t c;
  c.x = (const float *)call->inputs[0]->data;
  c.y = (float *)call->outputs[0]->data;
  c.n = call->inputs[0]->numel;
  c.op = (int)plan->params[UP_OP];
  c.has_lo = (int)plan->params[UP_HAS_LO];
  c.has_hi = (int)plan->params[UP_HAS_HI];
  c.approx = (int)plan->params[UP_APPROX];
  c.lo = (float)(call->n_floats > 0 ? call->floats[0] : 0.0);
  c.hi = (float)(call->n_floats > 1 ? call->floats[1] : 0.0);
  /* cheap ops: 32K elements per thread at least; transcendental ones: 4K */
  const int cheap = c.op == SU_RELU || c.op == SU_HARDTANH || c.op == SU_CLAMP;
  oa_parallel_for(env ? env->pool : NULL, (c.n + SU_BLOCK - 1) / SU_BLOCK, cheap ? 32 : 4, su_range, &c);
  return OA_OK;
}

#define SIMD_UNARY(name, code)                                                                             \
  oa_status_t OA_SIMD_FN(name##_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env,             \
                                         oa_op_plan_t *plan, oa_diag_t *diag) {                            \
    (void)diag;                                                                                            \
    return su_prepare(call, env, plan, code);                                                              \
  }                                                                                                        \
  oa_status_t OA_SIMD_FN(name##_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,    \
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {                        \
    (void)scratch;                                                                                         \
    (void)diag;                                                                                            \
    return su_run(call, plan, env);                                                                        \
  }

SIMD_UNARY(relu, SU_RELU)
SIMD_UNARY(hardtanh, SU_HARDTANH)
SIMD_UNARY(clamp, SU_CLAMP)
SIMD_UNARY(sigmoid, SU_SIGMOID)
SIMD_UNARY(tanh, SU_TANH)
SIMD_UNARY(silu, SU_SILU)
SIMD_UNARY(gelu, SU_GELU)
SIMD_UNARY(exp, SU_EXP)
SIMD_UNARY(erf, SU_ERF)

/* ---- binary: add, sub, mul, div (float32, broadcasting) --------------------------------------- */

enum simd_binary { SB_ADD, SB_SUB, SB_MUL, SB_DIV };

typedef struct {
  const float *a, *b;
  float *o;
  int op;
  float alpha;
  int32_t nd;                      /* collapsed outer dims (rows) */
  int64_t shape[OA_MAX_DIMS];
  int64_t sa[OA_MAX_DIMS], sb[OA_MAX_DIMS];
  int64_t inner;                   /* row length */
  int ia, ib;                      /* row strides: 1 contiguous, 0 broadcast */
  int64_t rows;                    /* numel / inner */
  int64_t rows_per_task, parts;    /* a task is rows_per_task rows, or 1 / parts of a row */
} sb_ctx_t;

/* O[i] = EXPR(va, vb) for a row, with A / B contiguous (IA / IB = 1) or one broadcast value */
#define SB_ROW(EXPR)                                                                               \
  do {                                                                                             \
    int64_t i = 0;                                                                                 \
    if (ia && ib) {                                                                                \
      for (; i + VW <= n; i += VW) {                                                               \
        const vf va = vf_load(A + i), vb = vf_load(B + i);                                         \
        vf_store(O + i, (EXPR));                                                                   \
      }                                                                                            \
      if (i < n) {                                                                                 \
        const vf va = vf_load_part(A + i, n - i, 1.0f), vb = vf_load_part(B + i, n - i, 1.0f);     \
        vf_store_part(O + i, n - i, (EXPR));                                                       \
      }                                                                                            \
    } else if (ia) {                                                                               \
      const vf vb = vf_set1(B[0]);                                                                 \
      for (; i + VW <= n; i += VW) {                                                               \
        const vf va = vf_load(A + i);                                                              \
        vf_store(O + i, (EXPR));                                                                   \
      }                                                                                            \
      if (i < n) {                                                                                 \
        const vf va = vf_load_part(A + i, n - i, 1.0f);                                            \
        vf_store_part(O + i, n - i, (EXPR));                                                       \
      }                                                                                            \
    } else {                                                                                       \
      const vf va = vf_set1(A[0]);                                                                 \
      if (ib) {                                                                                    \
        for (; i + VW <= n; i += VW) {                                                             \
          const vf vb = vf_load(B + i);                                                            \
          vf_store(O + i, (EXPR));                                                                 \
        }                                                                                          \
        if (i < n) {                                                                               \
          const vf vb = vf_load_part(B + i, n - i, 1.0f);                                          \
          vf_store_part(O + i, n - i, (EXPR));                                                     \
        }                                                                                          \
      } else {                                                                                     \
        const vf vb = vf_set1(B[0]);                                                               \
        float r[VW];                                                                               \
        vf_store(r, (EXPR));                                                                       \
        for (; i < n; i++) O[i] = r[0];                                                            \
      }                                                                                            \
    }                                                                                              \
  } while (0)

static void sb_row(int op, float alpha, const float *A, int ia, const float *B, int ib, float *O, int64_t n) {
  switch (op) {
    case SB_ADD:
      if (alpha == 1.0f) SB_ROW(vf_add(va, vb));
      else {
        const vf al = vf_set1(alpha);
        SB_ROW(vf_add(va, vf_mul(al, vb)));
      }
      break;
    case SB_SUB:
      if (alpha == 1.0f) SB_ROW(vf_sub(va, vb));
      else {
        const vf al = vf_set1(alpha);
        SB_ROW(vf_sub(va, vf_mul(al, vb)));
      }
      break;
    case SB_MUL: SB_ROW(vf_mul(va, vb)); break;
    case SB_DIV: SB_ROW(vf_div(va, vb)); break;
    default: break;
  }
}

/* element offsets of row r in a and b */
static void sb_row_offsets(const sb_ctx_t *c, int64_t r, int64_t *idx, int64_t *oa, int64_t *ob) {
  *oa = 0;
  *ob = 0;
  for (int32_t d = c->nd - 1; d >= 0; d--) {
    idx[d] = r % c->shape[d];
    r /= c->shape[d];
    *oa += idx[d] * c->sa[d];
    *ob += idx[d] * c->sb[d];
  }
}

static void sb_range(void *p, int64_t t0, int64_t t1) {
  const sb_ctx_t *c = (const sb_ctx_t *)p;
  int64_t idx[OA_MAX_DIMS], oa, ob;
  if (c->parts > 1) { /* tasks are parts of rows */
    const int64_t chunk = (c->inner + c->parts - 1) / c->parts;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t r = t / c->parts, k = t % c->parts;
      const int64_t s = k * chunk, n = simd_min64(c->inner - s, chunk);
      if (n <= 0) continue;
      sb_row_offsets(c, r, idx, &oa, &ob);
      sb_row(c->op, c->alpha, c->a + oa + s * c->ia, c->ia, c->b + ob + s * c->ib, c->ib, c->o + r * c->inner + s, n);
    }
    return;
  }
  int64_t r = t0 * c->rows_per_task;
  const int64_t last = simd_min64(t1 * c->rows_per_task, c->rows);
  if (r >= last) return;
  sb_row_offsets(c, r, idx, &oa, &ob);
  for (; r < last; r++) {
    sb_row(c->op, c->alpha, c->a + oa, c->ia, c->b + ob, c->ib, c->o + r * c->inner, c->inner);
    for (int32_t d = c->nd - 1; d >= 0; d--) { /* next row: carry through the outer dims */
      oa += c->sa[d];
      ob += c->sb[d];
      if (++idx[d] < c->shape[d]) break;
      oa -= c->sa[d] * c->shape[d];
      ob -= c->sb[d] * c->shape[d];
      idx[d] = 0;
    }
  }
}

static oa_status_t sb_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan, int op) {
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
#if !defined(OA_SIMD_HAS_DIV)
  if (op == SB_DIV) return OA_ERR_UNSUPPORTED; /* no exact vector division (armv7) */
#endif
  if (call->n_inputs != 2 || call->n_outputs != 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *o = call->outputs[0];
  if (!simd_is_f32(a) || !simd_is_f32(b) || !simd_is_f32(o)) return OA_ERR_UNSUPPORTED;
  if (a->ndim > o->ndim || b->ndim > o->ndim) return OA_ERR_UNSUPPORTED;
  if (op == SB_DIV && call->n_ints > 0 && call->ints[0] != 0) return OA_ERR_UNSUPPORTED; /* rounding modes */
  plan->params[0] = op;
  return OA_OK;
}

static oa_status_t sb_run(const oa_op_call_t *call, const oa_op_plan_t *plan, const oa_kernel_env_t *env) {
  const oa_tensor_t *a = call->inputs[0], *b = call->inputs[1], *o = call->outputs[0];
  if (o->numel == 0) return OA_OK;
  sb_ctx_t c;
  c.a = (const float *)a->data;
  c.b = (const float *)b->data;
  c.o = (float *)o->data;
  c.op = (int)plan->params[0];
  c.alpha = (c.op == SB_ADD || c.op == SB_SUB) && call->n_floats > 0 ? (float)call->floats[0] : 1.0f;
  /* broadcast strides (the reference validated the shapes), then drop size-1 dims and merge
   * dims contiguous for both operands, as the reference does */
  int64_t st[2][OA_MAX_DIMS], cs[2][OA_MAX_DIMS], shape[OA_MAX_DIMS];
  const oa_tensor_t *in[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    const oa_tensor_t *t = in[k];
    int64_t stride = 1;
    for (int32_t d = o->ndim - 1; d >= 0; d--) {
      const int32_t td = d - (o->ndim - t->ndim);
      if (td < 0 || t->shape[td] == 1) {
        st[k][d] = 0;
      } else {
        st[k][d] = stride;
        stride *= t->shape[td];
      }
    }
  }
  int32_t nd = 0;
  for (int32_t d = 0; d < o->ndim; d++) {
    const int64_t sz = o->shape[d];
    if (sz == 1) continue;
    if (nd > 0 && cs[0][nd - 1] == st[0][d] * sz && cs[1][nd - 1] == st[1][d] * sz) {
      shape[nd - 1] *= sz;
      cs[0][nd - 1] = st[0][d];
      cs[1][nd - 1] = st[1][d];
    } else {
      shape[nd] = sz;
      cs[0][nd] = st[0][d];
      cs[1][nd] = st[1][d];
      nd++;
    }
  }
  if (nd == 0) {
    shape[0] = 1;
    cs[0][0] = cs[1][0] = 0;
    nd = 1;
  }
  c.inner = shape[nd - 1];
  c.ia = cs[0][nd - 1] != 0;
  c.ib = cs[1][nd - 1] != 0;
  c.nd = nd - 1;
  for (int32_t d = 0; d < c.nd; d++) {
    c.shape[d] = shape[d];
    c.sa[d] = cs[0][d];
    c.sb[d] = cs[1][d];
  }
  const int64_t rows = o->numel / c.inner;
  c.rows = rows;
  const int64_t target = 16384; /* elements per task */
  int64_t tasks;
  if (c.inner >= 2 * target) {
    c.parts = (c.inner + target - 1) / target;
    c.rows_per_task = 1;
    tasks = rows * c.parts;
  } else {
    c.parts = 1;
    c.rows_per_task = simd_max64(1, target / c.inner);
    tasks = (rows + c.rows_per_task - 1) / c.rows_per_task;
  }
  oa_parallel_for(env ? env->pool : NULL, tasks, 1, sb_range, &c);
  return OA_OK;
}

#define SIMD_BINARY(name, code)                                                                            \
  oa_status_t OA_SIMD_FN(name##_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env,             \
                                         oa_op_plan_t *plan, oa_diag_t *diag) {                            \
    (void)diag;                                                                                            \
    return sb_prepare(call, env, plan, code);                                                              \
  }                                                                                                        \
  oa_status_t OA_SIMD_FN(name##_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,    \
                                     const oa_kernel_env_t *env, oa_diag_t *diag) {                        \
    (void)scratch;                                                                                         \
    (void)diag;                                                                                            \
    return sb_run(call, plan, env);                                                                        \
  }

SIMD_BINARY(add, SB_ADD)
SIMD_BINARY(sub, SB_SUB)
SIMD_BINARY(mul, SB_MUL)
SIMD_BINARY(div, SB_DIV)

/* ---- softmax / log_softmax over the last dim ------------------------------------------------- */

typedef struct {
  const float *x;
  float *y;
  int64_t n;
  int log_mode;
} ssm_ctx_t;

static void ssm_row(const float *x, float *y, int64_t n, int log_mode) {
  /* 1. max (a NaN anywhere makes the row NaN below, whatever the max is) */
  vf m0 = vf_set1(-INFINITY), m1 = m0;
  int64_t i = 0;
  for (; i + 2 * VW <= n; i += 2 * VW) {
    m0 = vf_max_nan(m0, vf_load(x + i));
    m1 = vf_max_nan(m1, vf_load(x + i + VW));
  }
  for (; i + VW <= n; i += VW) m0 = vf_max_nan(m0, vf_load(x + i));
  if (i < n) m1 = vf_max_nan(m1, vf_load_part(x + i, n - i, -INFINITY));
  const float mx = vf_hmax(vf_max_nan(m0, m1));
  const vf vmx = vf_set1(mx);
  /* 2. sum of exp(x - max), stored in y for softmax (padding lanes: exp(-inf) = 0) */
  double total = 0.0;
  for (int64_t b = 0; b < n; b += SIMD_SUM_BLOCK) {
    const int64_t e = simd_min64(n, b + SIMD_SUM_BLOCK);
    vf s0 = vf_zero(), s1 = vf_zero();
    for (i = b; i + 2 * VW <= e; i += 2 * VW) {
      const vf e0 = vexp_neg(vf_sub(vf_load(x + i), vmx)), e1 = vexp_neg(vf_sub(vf_load(x + i + VW), vmx));
      if (!log_mode) {
        vf_store(y + i, e0);
        vf_store(y + i + VW, e1);
      }
      s0 = vf_add(s0, e0);
      s1 = vf_add(s1, e1);
    }
    for (; i + VW <= e; i += VW) {
      const vf e0 = vexp_neg(vf_sub(vf_load(x + i), vmx));
      if (!log_mode) vf_store(y + i, e0);
      s0 = vf_add(s0, e0);
    }
    if (i < e) {
      const vf e0 = vexp_neg(vf_sub(vf_load_part(x + i, e - i, -INFINITY), vmx));
      if (!log_mode) vf_store_part(y + i, e - i, e0);
      s1 = vf_add(s1, e0);
    }
    total += (double)vf_hsum(vf_add(s0, s1));
  }
  /* 3. scale (softmax) or shift (log_softmax) */
  if (log_mode) {
    const vf lse = vf_set1((float)log(total));
    for (i = 0; i + VW <= n; i += VW) vf_store(y + i, vf_sub(vf_sub(vf_load(x + i), vmx), lse));
    if (i < n) vf_store_part(y + i, n - i, vf_sub(vf_sub(vf_load_part(x + i, n - i, 0.0f), vmx), lse));
  } else {
    const vf inv = vf_set1((float)(1.0 / total));
    for (i = 0; i + VW <= n; i += VW) vf_store(y + i, vf_mul(vf_load(y + i), inv));
    if (i < n) vf_store_part(y + i, n - i, vf_mul(vf_load_part(y + i, n - i, 0.0f), inv));
  }
}

static void ssm_range(void *p, int64_t r0, int64_t r1) {
  const ssm_ctx_t *c = (const ssm_ctx_t *)p;
  for (int64_t r = r0; r < r1; r++) ssm_row(c->x + r * c->n, c->y + r * c->n, c->n, c->log_mode);
}

static oa_status_t ssm_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan) {
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_ints < 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!simd_is_f32(x) || !simd_is_f32(y) || x->numel != y->numel || x->ndim < 1) return OA_ERR_UNSUPPORTED;
  if (call->ints[0] != x->ndim - 1) return OA_ERR_UNSUPPORTED; /* other dims: the reference kernel */
  const int64_t n = x->shape[x->ndim - 1];
  if (n < 1) return OA_ERR_UNSUPPORTED;
  plan->params[0] = n;
  plan->scratch_bytes = 0;
  return OA_OK;
}

static oa_status_t ssm_run(const oa_op_call_t *call, const oa_op_plan_t *plan, const oa_kernel_env_t *env,
                           int log_mode) {
  ssm_ctx_t c;
  c.x = (const float *)call->inputs[0]->data;
  c.y = (float *)call->outputs[0]->data;
  c.n = plan->params[0];
  c.log_mode = log_mode;
  const int64_t rows = call->inputs[0]->numel / c.n;
  oa_parallel_for(env ? env->pool : NULL, rows, simd_max64(1, 4096 / c.n), ssm_range, &c);
  return OA_OK;
}

oa_status_t OA_SIMD_FN(softmax_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                        oa_diag_t *diag) {
  (void)diag;
  return ssm_prepare(call, env, plan);
}
oa_status_t OA_SIMD_FN(softmax_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                    const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  return ssm_run(call, plan, env, 0);
}
oa_status_t OA_SIMD_FN(log_softmax_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                            oa_op_plan_t *plan, oa_diag_t *diag) {
  (void)diag;
  return ssm_prepare(call, env, plan);
}
oa_status_t OA_SIMD_FN(log_softmax_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                        const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  return ssm_run(call, plan, env, 1);
}

/* ---- layer_norm over the trailing (contiguous) dims -------------------------------------------- */

typedef struct {
  const float *x, *w, *b;
  float *y, *mean, *rstd;
  int64_t n;
  double eps;
} sln_ctx_t;

static void sln_range(void *p, int64_t r0, int64_t r1) {
  const sln_ctx_t *c = (const sln_ctx_t *)p;
  const int64_t n = c->n;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = c->x + r * n;
    float *y = c->y + r * n;
    const double mean = simd_sum(x, n) / (double)n;
    const float mf = (float)mean;
    const vf vm_ = vf_set1(mf);
    /* biased variance around the (float) mean, blocked like simd_sum */
    double ss = 0.0;
    for (int64_t b = 0; b < n; b += SIMD_SUM_BLOCK) {
      const int64_t e = simd_min64(n, b + SIMD_SUM_BLOCK);
      vf a0 = vf_zero(), a1 = vf_zero();
      int64_t i = b;
      for (; i + 2 * VW <= e; i += 2 * VW) {
        const vf d0 = vf_sub(vf_load(x + i), vm_), d1 = vf_sub(vf_load(x + i + VW), vm_);
        a0 = vf_fma(d0, d0, a0);
        a1 = vf_fma(d1, d1, a1);
      }
      for (; i + VW <= e; i += VW) {
        const vf d0 = vf_sub(vf_load(x + i), vm_);
        a0 = vf_fma(d0, d0, a0);
      }
      if (i < e) {
        const vf d0 = vf_sub(vf_load_part(x + i, e - i, mf), vm_);
        a1 = vf_fma(d0, d0, a1);
      }
      ss += (double)vf_hsum(vf_add(a0, a1));
    }
    const double rstd = 1.0 / sqrt(ss / (double)n + c->eps);
    if (c->mean) c->mean[r] = mf;
    if (c->rstd) c->rstd[r] = (float)rstd;
    const vf vr = vf_set1((float)rstd);
    const float *w = c->w, *bb = c->b;
    int64_t i = 0;
    /* y = (x - mean) * rstd * w + b */
#define SLN_EXPR(XV, WV, BV) vf_fma(vf_mul(vf_sub((XV), vm_), vr), (WV), (BV))
    if (w && bb) {
      for (; i + VW <= n; i += VW) vf_store(y + i, SLN_EXPR(vf_load(x + i), vf_load(w + i), vf_load(bb + i)));
      if (i < n)
        vf_store_part(y + i, n - i,
                      SLN_EXPR(vf_load_part(x + i, n - i, 0.0f), vf_load_part(w + i, n - i, 0.0f),
                               vf_load_part(bb + i, n - i, 0.0f)));
    } else if (w) {
      for (; i + VW <= n; i += VW) vf_store(y + i, vf_mul(vf_mul(vf_sub(vf_load(x + i), vm_), vr), vf_load(w + i)));
      if (i < n)
        vf_store_part(y + i, n - i,
                      vf_mul(vf_mul(vf_sub(vf_load_part(x + i, n - i, 0.0f), vm_), vr), vf_load_part(w + i, n - i, 0.0f)));
    } else if (bb) {
      for (; i + VW <= n; i += VW) vf_store(y + i, vf_add(vf_mul(vf_sub(vf_load(x + i), vm_), vr), vf_load(bb + i)));
      if (i < n)
        vf_store_part(y + i, n - i,
                      vf_add(vf_mul(vf_sub(vf_load_part(x + i, n - i, 0.0f), vm_), vr), vf_load_part(bb + i, n - i, 0.0f)));
    } else {
      for (; i + VW <= n; i += VW) vf_store(y + i, vf_mul(vf_sub(vf_load(x + i), vm_), vr));
      if (i < n) vf_store_part(y + i, n - i, vf_mul(vf_sub(vf_load_part(x + i, n - i, 0.0f), vm_), vr));
    }
#undef SLN_EXPR
  }
}

oa_status_t OA_SIMD_FN(layer_norm_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                           oa_diag_t *diag) {
  (void)diag;
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  if (call->n_inputs < 1 || call->n_inputs > 3 || (call->n_outputs != 1 && call->n_outputs != 3)) return OA_ERR_UNSUPPORTED;
  if (call->n_ints < 1 || call->n_floats < 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *x = call->inputs[0];
  if (!simd_is_f32(x)) return OA_ERR_UNSUPPORTED;
  const int64_t k = call->ints[0];
  if (k < 1 || k > x->ndim) return OA_ERR_UNSUPPORTED;
  int64_t inner = 1;
  for (int32_t d = x->ndim - (int32_t)k; d < x->ndim; d++) inner *= x->shape[d];
  if (inner < 1) return OA_ERR_UNSUPPORTED;
  for (uint32_t i = 1; i < call->n_inputs; i++)
    if (call->inputs[i] && (!simd_is_f32(call->inputs[i]) || call->inputs[i]->numel != inner)) return OA_ERR_UNSUPPORTED;
  for (uint32_t i = 0; i < call->n_outputs; i++)
    if (!simd_is_f32(call->outputs[i])) return OA_ERR_UNSUPPORTED;
  if (call->outputs[0]->numel != x->numel) return OA_ERR_UNSUPPORTED;
  if (call->n_outputs == 3 &&
      (call->outputs[1]->numel != x->numel / inner || call->outputs[2]->numel != x->numel / inner))
    return OA_ERR_UNSUPPORTED;
  plan->params[0] = inner;
  return OA_OK;
}

oa_status_t OA_SIMD_FN(layer_norm_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                       const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  sln_ctx_t c;
  c.n = plan->params[0];
  c.x = (const float *)call->inputs[0]->data;
  c.w = call->n_inputs > 1 && call->inputs[1] ? (const float *)call->inputs[1]->data : NULL;
  c.b = call->n_inputs > 2 && call->inputs[2] ? (const float *)call->inputs[2]->data : NULL;
  c.y = (float *)call->outputs[0]->data;
  c.mean = call->n_outputs > 1 ? (float *)call->outputs[1]->data : NULL;
  c.rstd = call->n_outputs > 2 ? (float *)call->outputs[2]->data : NULL;
  c.eps = call->floats[0];
  const int64_t rows = call->inputs[0]->numel / c.n;
  oa_parallel_for(env ? env->pool : NULL, rows, simd_max64(1, 4096 / c.n), sln_range, &c);
  return OA_OK;
}

/* ---- mean / sum over trailing dims (global average pooling: mean over H, W of NCHW) ----------- */

typedef struct {
  const float *x;
  float *y;
  int64_t run;
  int is_mean;
} smean_ctx_t;

static void smean_range(void *p, int64_t o0, int64_t o1) {
  const smean_ctx_t *c = (const smean_ctx_t *)p;
  for (int64_t o = o0; o < o1; o++) {
    const double s = simd_sum(c->x + o * c->run, c->run);
    c->y[o] = (float)(c->is_mean ? s / (double)c->run : s);
  }
}

static oa_status_t smean_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan) {
  if (!simd_cpu_ok(env)) return OA_ERR_UNSUPPORTED;
  if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_ints < 1) return OA_ERR_UNSUPPORTED;
  const oa_tensor_t *x = call->inputs[0], *y = call->outputs[0];
  if (!simd_is_f32(x) || !simd_is_f32(y) || x->ndim < 1 || x->numel == 0) return OA_ERR_UNSUPPORTED;
  uint32_t mask = 0;
  for (uint32_t i = 1; i < call->n_ints; i++) {
    const int64_t d = call->ints[i];
    if (d < 0 || d >= x->ndim) return OA_ERR_UNSUPPORTED;
    mask |= 1u << d;
  }
  if (call->n_ints == 1) mask = (1u << x->ndim) - 1u; /* no dims listed: all */
  /* the reduced dims (ignoring size-1 dims) must be the trailing ones: each output is then the
   * reduction of one contiguous run */
  int64_t run = 1;
  int seen_reduced = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    if (mask & (1u << d)) {
      seen_reduced = 1;
      run *= x->shape[d];
    } else if (seen_reduced) {
      return OA_ERR_UNSUPPORTED;
    }
  }
  if (run < 1 || y->numel * run != x->numel) return OA_ERR_UNSUPPORTED;
  plan->params[0] = run;
  return OA_OK;
}

static oa_status_t smean_run(const oa_op_call_t *call, const oa_op_plan_t *plan, const oa_kernel_env_t *env,
                             int is_mean) {
  smean_ctx_t c;
  c.x = (const float *)call->inputs[0]->data;
  c.y = (float *)call->outputs[0]->data;
  c.run = plan->params[0];
  c.is_mean = is_mean;
  oa_parallel_for(env ? env->pool : NULL, call->outputs[0]->numel, simd_max64(1, 16384 / c.run), smean_range, &c);
  return OA_OK;
}

oa_status_t OA_SIMD_FN(mean_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                     oa_diag_t *diag) {
  (void)diag;
  return smean_prepare(call, env, plan);
}
oa_status_t OA_SIMD_FN(mean_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                 const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  return smean_run(call, plan, env, 1);
}
oa_status_t OA_SIMD_FN(sum_prepare)(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                    oa_diag_t *diag) {
  (void)diag;
  return smean_prepare(call, env, plan);
}
oa_status_t OA_SIMD_FN(sum_run)(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)diag;
  return smean_run(call, plan, env, 0);
}

#include "simd_impl_pool.h"
#include "simd_impl_attention.h"
