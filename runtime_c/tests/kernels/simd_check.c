/* Kernel-level check of the SIMD-family optimized kernels (opt/simd_kernels.inc and its family
 * templates, compiled per ISA under arch/) against the reference kernels, run by
 * tests/ops/test_simd_kernels.py on the host and under QEMU.
 *
 * For every case (op, shapes, arguments, data with NaN / inf / -0 sprinkled in) it runs the
 * reference kernel and then the op's "opt" kernel once per ISA this build and CPU have, with
 * env.isas holding that ISA only (as oa_cpu_options_t.disable_isas does for a device):
 *   - the plan must name the ISA it was forced to (plan.kernel's variant),
 *   - an ISA the op has must accept the cases marked "expect" (else: FAIL, it declined); the ops
 *     without a portable variant (no_portable below) must decline on portable,
 *   - its output must match the reference within the op's tolerance (NaN where the reference
 *     has NaN),
 *   - with a thread pool of 3 the output must be bitwise the same as without threads,
 *   - in place (output buffer = input 0, for elementwise ops) bitwise the same as out of place,
 *   - with that ISA masked out it must not be used, and with no ISA at all prepare must decline.
 * Then it sweeps the vector math (exp, sigmoid, tanh, silu, gelu, erf) over dense ranges against
 * double-precision libm and reports the worst ulp error. Prints one line per (ISA, op) and
 * "FAIL ..." lines; exit status 1 on any failure.
 *
 * Build: cc -std=c11 -O2 -I runtime_c/include -I runtime_c/src/cpu simd_check.c libopenaccel.a -lm -lpthread */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/isa.h"
#include "kernels/kernel.h"
#include "openaccel/cpu.h"
#include "threadpool.h"

#define MAXT 6

static oa_cpu_features_t g_features;
static uint32_t g_isas; /* built and detected */
static struct oa_threadpool *g_pool;
static int g_failures;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
static float rng_normal(void) {
  double u = rng_uniform() + 1e-12, v = rng_uniform();
  return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  g_failures++;
}

/* ---- tensors ------------------------------------------------------------------------------- */

typedef struct {
  oa_tensor_t t;
  void *block;
} tens_t;

static tens_t *tens_new(int32_t dtype, int32_t ndim, const int64_t *shape) {
  tens_t *x = (tens_t *)calloc(1, sizeof *x);
  x->t.ndim = ndim;
  x->t.dtype = dtype;
  x->t.numel = 1;
  for (int32_t d = 0; d < ndim; d++) {
    x->t.shape[d] = shape[d];
    x->t.numel *= shape[d];
  }
  x->t.nbytes = (size_t)x->t.numel * oa_dtype_size(dtype);
  x->t.name = "";
  /* offset by 4 bytes: the kernels must not assume vector-aligned data */
  x->block = calloc(1, x->t.nbytes + 64);
  x->t.data = (char *)x->block + 4;
  return x;
}
static void tens_free(tens_t *x) {
  if (!x) return;
  free(x->block);
  free(x);
}
static float *F(tens_t *x) { return (float *)x->t.data; }

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
static tens_t *tf(const int64_t *shape, int32_t ndim) {
  /* (pointer, count) order from SHAPE */
  return tens_new(OA_DTYPE_FLOAT32, ndim, shape);
}
#define TF(...) tf(SHAPE(__VA_ARGS__))

/* normal * scale + shift, and with `special` != 0 one element in ~special is NaN / +-inf / +-0 / big */
static void fill(tens_t *x, float scale, float shift, int special) {
  float *p = F(x);
  static const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-30f, 60.0f, -60.0f, 95.0f, -95.0f};
  for (int64_t i = 0; i < x->t.numel; i++) {
    p[i] = rng_normal() * scale + shift;
    if (special && rng_next() % (uint64_t)special == 0) p[i] = sp[rng_next() % (sizeof sp / sizeof sp[0])];
  }
}

/* ---- comparing ------------------------------------------------------------------------------ */

typedef struct {
  double atol, rtol;
  int exact;
} tol_t;

static const tol_t EXACT = {0, 0, 1};
static const tol_t ULP4 = {1e-6, 2e-6, 0};   /* transcendental functions (the op tests' tolerance) */
static const tol_t SOFTMAX = {1e-6, 1e-5, 0};
static const tol_t NORM = {1e-5, 1e-4, 0};
static const tol_t SUMS = {1e-5, 1.3e-6, 0}; /* assert_close's float32 defaults */
static const tol_t ATTN = {1e-5, 1e-5, 0};

typedef struct {
  const char *op, *variant;
  long cases, accepted, declined;
  double max_abs, max_rel;
} stat_t;

static stat_t g_stats[256];
static int g_nstats;

static stat_t *stat_of(const char *op, const char *variant) {
  for (int i = 0; i < g_nstats; i++)
    if (!strcmp(g_stats[i].op, op) && !strcmp(g_stats[i].variant, variant)) return &g_stats[i];
  stat_t *s = &g_stats[g_nstats++];
  memset(s, 0, sizeof *s);
  s->op = op;
  s->variant = variant;
  return s;
}

static int same_bits(float a, float b) {
  if (a != a && b != b) return 1;
  if (a == 0.0f && b == 0.0f) return 1; /* +0 / -0: equal values (NEON max gives +0 for max(-0, 0)) */
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Compare got with want; returns the number of mismatches (reports the first). */
static long compare(const char *what, const float *got, const float *want, int64_t n, tol_t tol, stat_t *st) {
  long bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const float g = got[i], w = want[i];
    int ok;
    if (tol.exact) {
      ok = same_bits(g, w);
    } else if (w != w || g != g) {
      ok = (w != w) && (g != g);
    } else if (isinf(w) || isinf(g)) {
      ok = g == w;
    } else {
      const double e = fabs((double)g - (double)w);
      ok = e <= tol.atol + tol.rtol * fabs((double)w);
      if (st) {
        if (e > st->max_abs) st->max_abs = e;
        if (fabs((double)w) > 1e-3 && e / fabs((double)w) > st->max_rel) st->max_rel = e / fabs((double)w);
      }
    }
    if (!ok) {
      if (!bad) fail("%s: element %lld: got %.9g, want %.9g", what, (long long)i, (double)g, (double)w);
      bad++;
    }
  }
  return bad;
}

/* ---- running one case against every variant ---------------------------------------------------- */

static const oa_kernel_t *find_kernel(const char *op, const char *variant) {
  for (uint32_t i = 0; i < oa_kernel_table_size; i++)
    if (!strcmp(oa_kernel_table[i].op, op) && !strcmp(oa_kernel_table[i].variant, variant)) return &oa_kernel_table[i];
  return NULL;
}

/* the ISAs to force one at a time, and the ops that have no variant for one of them */
static const struct {
  const char *name;
  uint32_t bit;
} k_isas[] = {{"avx512", OA_CPU_ISA_AVX512}, {"avx2", OA_CPU_ISA_AVX2}, {"neon", OA_CPU_ISA_NEON},
                {"rvv", OA_CPU_ISA_RVV}, {"portable", OA_CPU_ISA_PORTABLE}};

static int has_variant(const char *op, uint32_t isa) {
  /* portable C is not faster than the reference kernel for these (opt/<family>.c) */
  static const char *no_portable[] = {"relu", "sigmoid", "silu", "exp", "add", "sub", "mul", "div", "avg_pool2d"};
  if (isa == OA_CPU_ISA_PORTABLE)
    for (size_t i = 0; i < sizeof no_portable / sizeof no_portable[0]; i++)
      if (!strcmp(op, no_portable[i])) return 0;
  return 1;
}

static int variant_accepts_all(const char *op, uint32_t isa) {
#if defined(__arm__)
  if (!strcmp(op, "div") && isa == OA_CPU_ISA_NEON) return 0; /* no exact vector division on armv7: declines */
#endif
  return has_variant(op, isa);
}

typedef struct {
  const char *op, *label;
  tens_t *in[MAXT];
  uint32_t n_in;
  tens_t *out[3];
  uint32_t n_out;
  int64_t ints[16];
  uint32_t n_ints;
  double floats[4];
  uint32_t n_floats;
  tol_t tol;
  int expect;  /* every available variant must accept */
  int inplace; /* also check output == input 0 */
} case_t;

static void call_of(case_t *c, oa_op_call_t *call, oa_tensor_t **ins, oa_tensor_t **outs, tens_t **o) {
  for (uint32_t i = 0; i < c->n_in; i++) ins[i] = c->in[i] ? &c->in[i]->t : NULL;
  for (uint32_t i = 0; i < c->n_out; i++) outs[i] = &o[i]->t;
  memset(call, 0, sizeof *call);
  call->op = c->op;
  call->inputs = ins;
  call->n_inputs = c->n_in;
  call->outputs = outs;
  call->n_outputs = c->n_out;
  call->ints = c->ints;
  call->n_ints = c->n_ints;
  call->floats = c->floats;
  call->n_floats = c->n_floats;
}

static tens_t *like(const tens_t *t) { return tens_new(t->t.dtype, t->t.ndim, t->t.shape); }

/* Prepare and run k; *variant (when given) is the variant the plan names ("avx2", ...). */
static int run_kernel_v(const oa_kernel_t *k, case_t *c, tens_t **o, const oa_kernel_env_t *env, oa_diag_t *diag,
                        oa_status_t *prep_status, const char **variant) {
  oa_tensor_t *ins[MAXT], *outs[3];
  oa_op_call_t call;
  call_of(c, &call, ins, outs, o);
  oa_op_plan_t plan;
  memset(&plan, 0, sizeof plan);
  *prep_status = k->prepare(&call, env, &plan, diag);
  if (*prep_status) return 0;
  if (variant) *variant = plan.kernel ? ((const oa_kernel_t *)plan.kernel)->variant : k->variant;
  void *scratch = plan.scratch_bytes ? malloc(plan.scratch_bytes) : NULL;
  oa_status_t st = k->run(&call, &plan, scratch, env, diag);
  free(scratch);
  if (st) {
    fail("%s %s [%s]: run returned %d: %s", c->op, k->variant, c->label, (int)st, diag ? diag->message : "");
    return 0;
  }
  return 1;
}

static int run_kernel(const oa_kernel_t *k, case_t *c, tens_t **o, const oa_kernel_env_t *env, oa_diag_t *diag,
                      oa_status_t *prep_status) {
  return run_kernel_v(k, c, o, env, diag, prep_status, NULL);
}

static void run_case(case_t *c) {
  const oa_kernel_t *ref = find_kernel(c->op, "ref");
  if (!ref) {
    fail("%s: no reference kernel", c->op);
    return;
  }
  oa_kernel_env_t env_ref = {&g_features, NULL, g_isas};
  tens_t *want[3] = {0};
  for (uint32_t i = 0; i < c->n_out; i++) want[i] = like(c->out[i]);
  oa_diag_t diag;
  oa_diag_clear(&diag);
  oa_status_t pst;
  if (!run_kernel(ref, c, want, &env_ref, &diag, &pst)) {
    if (pst) fail("%s [%s]: the reference kernel refused the case: %s", c->op, c->label, diag.message);
    goto done;
  }
  const oa_kernel_t *k = find_kernel(c->op, "opt");
  if (!k) {
    fail("%s: no optimized kernel in the table", c->op);
    goto done;
  }
  for (size_t ii = 0; ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
    const char *isa = k_isas[ii].name;
    const uint32_t bit = k_isas[ii].bit;
    if (!(g_isas & bit)) continue;
    oa_kernel_env_t env0 = {&g_features, NULL, bit}, envp = {&g_features, g_pool, bit};
    tens_t *got[3] = {0}, *gotp[3] = {0};
    for (uint32_t i = 0; i < c->n_out; i++) {
      got[i] = like(c->out[i]);
      gotp[i] = like(c->out[i]);
    }
    const char *used = NULL;
    if (!has_variant(c->op, bit)) {
      /* no variant for this ISA: must decline (the reference kernel runs) */
      if (run_kernel(k, c, got, &env0, NULL, &pst) || pst != OA_ERR_UNSUPPORTED)
        fail("%s %s [%s]: accepted, but the op has no %s variant", c->op, isa, c->label, isa);
      goto next;
    }
    stat_t *st = stat_of(c->op, isa);
    st->cases++;
    if (!run_kernel_v(k, c, got, &env0, NULL, &pst, &used)) {
      if (pst == OA_ERR_UNSUPPORTED) {
        st->declined++;
        if (c->expect && variant_accepts_all(c->op, bit)) fail("%s %s [%s]: declined", c->op, isa, c->label);
      } else if (pst) {
        fail("%s %s [%s]: prepare returned %d", c->op, isa, c->label, (int)pst);
      }
      goto next;
    }
    if (strcmp(used, isa)) fail("%s %s [%s]: forced to %s, the plan names %s", c->op, isa, c->label, isa, used);
    st->accepted++;
    char what[256];
    for (uint32_t i = 0; i < c->n_out; i++) {
      snprintf(what, sizeof what, "%s %s [%s] output %u vs reference", c->op, isa, c->label, i);
      compare(what, F(got[i]), F(want[i]), got[i]->t.numel, c->tol, st);
    }
    /* threads: bitwise the same */
    if (run_kernel(k, c, gotp, &envp, NULL, &pst)) {
      for (uint32_t i = 0; i < c->n_out; i++) {
        snprintf(what, sizeof what, "%s %s [%s] output %u with 3 threads vs 1", c->op, isa, c->label, i);
        compare(what, F(gotp[i]), F(got[i]), got[i]->t.numel, EXACT, NULL);
      }
    } else {
      fail("%s %s [%s]: declined with a thread pool", c->op, isa, c->label);
    }
    /* in place: output 0 in input 0's buffer */
    if (c->inplace && c->in[0]->t.numel == c->out[0]->t.numel) {
      tens_t *saved = c->in[0], *buf = like(c->in[0]);
      memcpy(buf->t.data, saved->t.data, saved->t.nbytes);
      tens_t *outs[3] = {buf, NULL, NULL};
      c->in[0] = buf;
      if (run_kernel(k, c, outs, &env0, NULL, &pst)) {
        snprintf(what, sizeof what, "%s %s [%s] in place vs out of place", c->op, isa, c->label);
        compare(what, F(buf), F(got[0]), buf->t.numel, EXACT, NULL);
      }
      c->in[0] = saved;
      tens_free(buf);
    }
    /* masked out (oa_cpu_options_t.disable_isas), the ISA is not used; with no ISA, nothing is */
    {
      oa_kernel_env_t envm = {&g_features, NULL, g_isas & ~bit}, envn = {&g_features, NULL, 0};
      const char *other = NULL;
      if (run_kernel_v(k, c, gotp, &envm, NULL, &pst, &other) && !strcmp(other, isa))
        fail("%s %s [%s]: used with %s disabled", c->op, isa, c->label, isa);
      if (run_kernel(k, c, gotp, &envn, NULL, &pst) || pst != OA_ERR_UNSUPPORTED)
        fail("%s %s [%s]: accepted with every ISA disabled", c->op, isa, c->label);
    }
  next:
    for (uint32_t i = 0; i < c->n_out; i++) {
      tens_free(got[i]);
      tens_free(gotp[i]);
    }
  }
done:
  for (uint32_t i = 0; i < c->n_out; i++) tens_free(want[i]);
  for (uint32_t i = 0; i < c->n_in; i++) tens_free(c->in[i]);
  for (uint32_t i = 0; i < c->n_out; i++) tens_free(c->out[i]);
}

static case_t mk(const char *op, const char *label, tol_t tol) {
  case_t c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.label = label;
  c.tol = tol;
  c.expect = 1;
  return c;
}

/* ---- unary ------------------------------------------------------------------------------------ */

static void unary_cases(void) {
  static const int64_t sizes[] = {1, 7, 8, 9, 17, 33, 1000, 4099, 70001};
  static const struct {
    const char *op;
    tol_t tol;
    int n_ints, n_floats;
    int64_t i0, i1;
    double f0, f1;
  } ops[] = {
      {"relu", {0, 0, 1}, 0, 0, 0, 0, 0, 0},
      {"hardtanh", {0, 0, 1}, 0, 2, 0, 0, 0.0, 6.0},
      {"hardtanh", {0, 0, 1}, 0, 2, 0, 0, -0.5, 2.0},
      {"clamp", {0, 0, 1}, 2, 2, 1, 1, -1.0, 1.5},
      {"clamp", {0, 0, 1}, 2, 2, 1, 0, -0.25, 0.0},
      {"clamp", {0, 0, 1}, 2, 2, 0, 1, 0.0, 0.75},
      {"clamp", {0, 0, 1}, 2, 2, 1, 1, 2.0, -1.0}, /* min > max: max wins */
      {"sigmoid", {1e-6, 2e-6, 0}, 0, 0, 0, 0, 0, 0},
      {"tanh", {1e-6, 2e-6, 0}, 0, 0, 0, 0, 0, 0},
      {"silu", {1e-6, 2e-6, 0}, 0, 0, 0, 0, 0, 0},
      {"gelu", {1e-6, 2e-6, 0}, 1, 0, 0, 0, 0, 0},
      {"gelu", {1e-6, 2e-6, 0}, 1, 0, 1, 0, 0, 0},
      {"exp", {1e-6, 2e-6, 0}, 0, 0, 0, 0, 0, 0},
      {"erf", {1e-6, 2e-6, 0}, 0, 0, 0, 0, 0, 0},
  };
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      for (int scale = 0; scale < 2; scale++) {
        case_t c = mk(ops[o].op, scale ? "wide" : "normal", ops[o].tol);
        c.in[0] = TF(sizes[s]);
        fill(c.in[0], scale ? 12.0f : 2.0f, 0.0f, 13);
        c.n_in = 1;
        c.out[0] = TF(sizes[s]);
        c.n_out = 1;
        c.n_ints = (uint32_t)ops[o].n_ints;
        c.ints[0] = ops[o].i0;
        c.ints[1] = ops[o].i1;
        c.n_floats = (uint32_t)ops[o].n_floats;
        c.floats[0] = ops[o].f0;
        c.floats[1] = ops[o].f1;
        c.inplace = 1;
        run_case(&c);
      }
    }
    case_t c = mk(ops[o].op, "3d", ops[o].tol);
    c.in[0] = TF(3, 5, 7);
    fill(c.in[0], 3.0f, 0.0f, 0);
    c.out[0] = TF(3, 5, 7);
    c.n_in = c.n_out = 1;
    c.n_ints = (uint32_t)ops[o].n_ints;
    c.ints[0] = ops[o].i0;
    c.ints[1] = ops[o].i1;
    c.n_floats = (uint32_t)ops[o].n_floats;
    c.floats[0] = ops[o].f0;
    c.floats[1] = ops[o].f1;
    run_case(&c);
  }
  /* a NaN bound stays with the reference */
  case_t c = mk("clamp", "nan bound", EXACT);
  c.in[0] = TF(9);
  fill(c.in[0], 1.0f, 0.0f, 0);
  c.out[0] = TF(9);
  c.n_in = c.n_out = 1;
  c.n_ints = 2;
  c.ints[0] = c.ints[1] = 1;
  c.n_floats = 2;
  c.floats[0] = NAN;
  c.floats[1] = 1.0;
  c.expect = 0;
  run_case(&c);
}

/* ---- binary ----------------------------------------------------------------------------------- */

static void bcast(const oa_tensor_t *a, const oa_tensor_t *b, int64_t *shape, int32_t *nd) {
  *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int32_t d = 0; d < *nd; d++) {
    int32_t da = d - (*nd - a->ndim), db = d - (*nd - b->ndim);
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    shape[d] = sa == 1 ? sb : sa;
  }
}

static void binary_cases(void) {
  typedef struct {
    int32_t na, nb;
    int64_t a[4], b[4];
    const char *label;
  } pair_t;
  static const pair_t pairs[] = {
      {1, 1, {1000}, {1000}, "same 1000"},
      {1, 1, {7}, {7}, "same 7"},
      {1, 1, {70001}, {70001}, "same 70001 (split rows)"},
      {4, 4, {2, 3, 4, 5}, {1, 3, 1, 1}, "channel bias"},
      {4, 4, {1, 64, 7, 7}, {1, 64, 1, 1}, "channel bias 7x7"},
      {2, 1, {5, 33}, {33}, "row bias"},
      {1, 2, {33}, {5, 33}, "first operand broadcast"},
      {0, 1, {0}, {9}, "0-d first"},
      {1, 0, {9}, {0}, "0-d second"},
      {2, 2, {4, 1}, {1, 5}, "outer product"},
      {3, 3, {3, 1, 6}, {1, 4, 6}, "mixed"},
      {4, 4, {2, 1, 3, 1}, {1, 5, 1, 7}, "mixed 4d"},
      {2, 2, {3, 40000}, {3, 1}, "long rows, scalar per row"},
      {2, 2, {1, 1}, {1, 1}, "one element"},
  };
  static const struct {
    const char *op;
    int n_floats;
    double alpha;
    int n_ints;
  } ops[] = {{"add", 0, 1.0, 0}, {"add", 1, 0.5, 0}, {"sub", 1, 1.0, 0}, {"sub", 1, 2.0, 0}, {"mul", 0, 0, 0},
             {"div", 0, 0, 1}};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
      case_t c = mk(ops[o].op, pairs[p].label, EXACT);
      c.in[0] = tens_new(OA_DTYPE_FLOAT32, pairs[p].na, pairs[p].a);
      c.in[1] = tens_new(OA_DTYPE_FLOAT32, pairs[p].nb, pairs[p].b);
      fill(c.in[0], 3.0f, 0.0f, 17);
      fill(c.in[1], 3.0f, 0.0f, 17);
      int64_t shape[8];
      int32_t nd;
      bcast(&c.in[0]->t, &c.in[1]->t, shape, &nd);
      c.out[0] = tens_new(OA_DTYPE_FLOAT32, nd, shape);
      c.n_in = 2;
      c.n_out = 1;
      c.n_floats = (uint32_t)ops[o].n_floats;
      c.floats[0] = ops[o].alpha;
      c.n_ints = (uint32_t)ops[o].n_ints; /* div: rounding_mode 0 */
      c.inplace = 1;
      run_case(&c);
    }
  }
}

/* ---- softmax, layer_norm, mean ------------------------------------------------------------------ */

static void softmax_cases(void) {
  static const int64_t shapes[][2] = {{1, 1}, {1, 7}, {1, 8}, {1, 9}, {3, 17}, {2, 1000}, {4, 5000}, {64, 128}, {5, 33}};
  for (int lg = 0; lg < 2; lg++) {
    const char *op = lg ? "log_softmax" : "softmax";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      for (int scale = 0; scale < 2; scale++) {
        case_t c = mk(op, scale ? "scaled" : "normal", SOFTMAX);
        c.in[0] = TF(shapes[s][0], shapes[s][1]);
        fill(c.in[0], scale ? 30.0f : 3.0f, 0.0f, 0);
        c.out[0] = TF(shapes[s][0], shapes[s][1]);
        c.n_in = c.n_out = 1;
        c.n_ints = 1;
        c.ints[0] = 1;
        run_case(&c);
      }
    }
    /* rows with -inf, all -inf, NaN, +inf */
    case_t c = mk(op, "special rows", SOFTMAX);
    c.in[0] = TF(5, 19);
    fill(c.in[0], 2.0f, 0.0f, 0);
    float *x = F(c.in[0]);
    for (int j = 0; j < 19; j += 3) x[j] = -INFINITY;
    for (int j = 0; j < 19; j++) x[19 + j] = -INFINITY;
    x[2 * 19 + 5] = NAN;
    x[3 * 19 + 7] = INFINITY;
    c.out[0] = TF(5, 19);
    c.n_in = c.n_out = 1;
    c.n_ints = 1;
    c.ints[0] = 1;
    run_case(&c);
    /* another dim: the reference's */
    c = mk(op, "dim 0", SOFTMAX);
    c.in[0] = TF(4, 6);
    fill(c.in[0], 1.0f, 0.0f, 0);
    c.out[0] = TF(4, 6);
    c.n_in = c.n_out = 1;
    c.n_ints = 1;
    c.ints[0] = 0;
    c.expect = 0;
    run_case(&c);
  }
}

static void layer_norm_cases(void) {
  static const struct {
    int32_t nd;
    int64_t shape[3];
    int k, w, b, stats;
  } cs[] = {{2, {1, 7}, 1, 1, 1, 0},     {2, {4, 256}, 1, 1, 1, 0}, {2, {3, 1000}, 1, 1, 1, 1},
            {3, {2, 3, 8}, 2, 1, 1, 1},  {2, {5, 9}, 1, 0, 0, 0},  {2, {5, 9}, 1, 1, 0, 0},
            {2, {5, 9}, 1, 0, 1, 1},      {2, {2, 4097}, 1, 1, 1, 0}, {2, {128, 256}, 1, 1, 1, 0},
            {2, {3, 1}, 1, 1, 1, 1}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    case_t c = mk("layer_norm", "", NORM);
    c.in[0] = tens_new(OA_DTYPE_FLOAT32, cs[i].nd, cs[i].shape);
    fill(c.in[0], 2.0f, 0.5f, 0);
    const int32_t axis = cs[i].nd - cs[i].k;
    c.n_in = 3;
    if (cs[i].w) {
      c.in[1] = tens_new(OA_DTYPE_FLOAT32, cs[i].k, cs[i].shape + axis);
      fill(c.in[1], 1.0f, 1.0f, 0);
    }
    if (cs[i].b) {
      c.in[2] = tens_new(OA_DTYPE_FLOAT32, cs[i].k, cs[i].shape + axis);
      fill(c.in[2], 1.0f, 0.0f, 0);
    }
    c.out[0] = tens_new(OA_DTYPE_FLOAT32, cs[i].nd, cs[i].shape);
    c.n_out = 1;
    if (cs[i].stats) {
      int64_t st[3];
      for (int32_t d = 0; d < cs[i].nd; d++) st[d] = d < axis ? cs[i].shape[d] : 1;
      c.out[1] = tens_new(OA_DTYPE_FLOAT32, cs[i].nd, st);
      c.out[2] = tens_new(OA_DTYPE_FLOAT32, cs[i].nd, st);
      c.n_out = 3;
    }
    c.n_ints = 1;
    c.ints[0] = cs[i].k;
    c.n_floats = 1;
    c.floats[0] = 1e-5;
    run_case(&c);
  }
}

static void mean_cases(void) {
  static const struct {
    int32_t nd;
    int64_t shape[4];
    int n_dims;
    int64_t dims[3];
    int keep, expect;
  } cs[] = {{4, {1, 64, 7, 7}, 2, {2, 3}, 1, 1}, {4, {2, 512, 7, 7}, 2, {2, 3}, 0, 1}, {3, {2, 3, 5}, 1, {2}, 0, 1},
            {3, {4, 1, 9}, 2, {1, 2}, 1, 1},      {2, {3, 4}, 0, {0}, 0, 1},           {3, {2, 3, 4}, 1, {1}, 0, 0},
            {2, {3, 5000}, 1, {1}, 1, 1}};
  for (int m = 0; m < 2; m++) {
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
      case_t c = mk(m ? "sum" : "mean", "", SUMS);
      c.in[0] = tens_new(OA_DTYPE_FLOAT32, cs[i].nd, cs[i].shape);
      fill(c.in[0], 2.0f, 0.5f, 0);
      uint32_t mask = 0;
      for (int d = 0; d < cs[i].n_dims; d++) mask |= 1u << cs[i].dims[d];
      if (!cs[i].n_dims) mask = (1u << cs[i].nd) - 1u;
      int64_t os[4];
      int32_t ond = 0;
      for (int32_t d = 0; d < cs[i].nd; d++) {
        if (mask & (1u << d)) {
          if (cs[i].keep) os[ond++] = 1;
        } else {
          os[ond++] = cs[i].shape[d];
        }
      }
      c.out[0] = tens_new(OA_DTYPE_FLOAT32, ond, os);
      c.n_in = c.n_out = 1;
      c.ints[0] = cs[i].keep;
      for (int d = 0; d < cs[i].n_dims; d++) c.ints[1 + d] = cs[i].dims[d];
      c.n_ints = 1 + (uint32_t)cs[i].n_dims;
      c.expect = cs[i].expect;
      run_case(&c);
    }
  }
}

/* ---- pooling ------------------------------------------------------------------------------------ */

static int64_t div_floor(int64_t a, int64_t d) { return a / d - ((a % d != 0) && (a < 0)); }
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, int ceil_mode) {
  int64_t o = div_floor(in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) o--;
  return o;
}

static void pool_case(const char *op, const char *label, int32_t nd, const int64_t *shape, const int64_t *args,
                      int n_args, int nan, int expect) {
  const int is_max = !strcmp(op, "max_pool2d");
  case_t c = mk(op, label, is_max ? EXACT : SUMS);
  c.in[0] = tens_new(OA_DTYPE_FLOAT32, nd, shape);
  fill(c.in[0], 2.0f, 0.0f, nan ? 7 : 0);
  const int64_t kh = args[0], kw = args[1], sh = args[2], sw = args[3], ph = args[4], pw = args[5];
  const int64_t dh = is_max ? args[6] : 1, dw = is_max ? args[7] : 1;
  const int ceil_mode = (int)(is_max ? args[8] : args[6]);
  int64_t os[4];
  for (int32_t d = 0; d < nd - 2; d++) os[d] = shape[d];
  os[nd - 2] = pool_out(shape[nd - 2], kh, ph, sh, dh, ceil_mode);
  os[nd - 1] = pool_out(shape[nd - 1], kw, pw, sw, dw, ceil_mode);
  c.out[0] = tens_new(OA_DTYPE_FLOAT32, nd, os);
  c.n_in = c.n_out = 1;
  for (int i = 0; i < n_args; i++) c.ints[i] = args[i];
  c.n_ints = (uint32_t)n_args;
  c.expect = expect;
  run_case(&c);
}

static void adaptive_case(const char *label, int32_t nd, const int64_t *shape, int64_t oh, int64_t ow, int expect) {
  case_t c = mk("adaptive_avg_pool2d", label, SUMS);
  c.in[0] = tens_new(OA_DTYPE_FLOAT32, nd, shape);
  fill(c.in[0], 2.0f, 0.0f, 0);
  int64_t os[4];
  for (int32_t d = 0; d < nd - 2; d++) os[d] = shape[d];
  os[nd - 2] = oh;
  os[nd - 1] = ow;
  c.out[0] = tens_new(OA_DTYPE_FLOAT32, nd, os);
  c.n_in = c.n_out = 1;
  c.expect = expect;
  run_case(&c);
}

#define ARGS(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void pool_cases(void) {
  /* max: kernel h, w, stride h, w, pad h, w, dilation h, w, ceil_mode */
  pool_case("max_pool2d", "2x2", 4, (const int64_t[]){1, 3, 8, 8}, ARGS(2, 2, 2, 2, 0, 0, 1, 1, 0), 0, 1);
  pool_case("max_pool2d", "3x3 s2 p1", 4, (const int64_t[]){2, 4, 9, 9}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 0), 0, 1);
  pool_case("max_pool2d", "resnet stem", 4, (const int64_t[]){1, 64, 112, 112}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 0), 0, 1);
  pool_case("max_pool2d", "ceil extra window", 4, (const int64_t[]){1, 2, 5, 5}, ARGS(2, 2, 2, 2, 0, 0, 1, 1, 1), 0, 1);
  pool_case("max_pool2d", "ceil pad window", 4, (const int64_t[]){1, 2, 5, 5}, ARGS(2, 2, 2, 2, 1, 1, 1, 1, 1), 0, 1);
  pool_case("max_pool2d", "ceil 3x3 s2 p1", 4, (const int64_t[]){1, 2, 8, 7}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 1), 0, 1);
  pool_case("max_pool2d", "dilated", 4, (const int64_t[]){1, 2, 10, 9}, ARGS(3, 3, 1, 1, 1, 1, 2, 2, 0), 0, 1);
  pool_case("max_pool2d", "dilated ceil", 4, (const int64_t[]){1, 1, 11, 10}, ARGS(3, 2, 2, 3, 1, 1, 2, 3, 1), 0, 1);
  pool_case("max_pool2d", "nonsquare", 4, (const int64_t[]){1, 3, 7, 12}, ARGS(2, 4, 1, 3, 1, 2, 1, 1, 0), 0, 1);
  pool_case("max_pool2d", "empty windows", 4, (const int64_t[]){1, 1, 2, 2}, ARGS(2, 2, 1, 1, 1, 1, 3, 3, 0), 0, 1);
  pool_case("max_pool2d", "nan", 4, (const int64_t[]){1, 2, 6, 6}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 0), 1, 1);
  pool_case("max_pool2d", "nan s1", 4, (const int64_t[]){1, 2, 13, 21}, ARGS(3, 3, 1, 1, 1, 1, 1, 1, 0), 1, 1);
  pool_case("max_pool2d", "3d input", 3, (const int64_t[]){3, 6, 6}, ARGS(2, 2, 2, 2, 0, 0, 1, 1, 0), 0, 1);
  pool_case("max_pool2d", "wide s1 tiles", 4, (const int64_t[]){1, 1, 3, 2000}, ARGS(3, 3, 1, 1, 1, 1, 1, 1, 0), 1, 1);
  pool_case("max_pool2d", "wide s2 tiles", 4, (const int64_t[]){1, 1, 3, 3001}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 0), 1, 1);
  pool_case("max_pool2d", "stride 3", 4, (const int64_t[]){2, 3, 17, 29}, ARGS(3, 4, 3, 3, 1, 2, 1, 1, 0), 1, 1);
  pool_case("max_pool2d", "huge window", 4, (const int64_t[]){1, 1, 4, 700}, ARGS(2, 600, 1, 1, 0, 0, 1, 1, 0), 0, 0);
  /* avg: kernel h, w, stride h, w, pad h, w, ceil_mode, count_include_pad, divisor_override */
  pool_case("avg_pool2d", "2x2", 4, (const int64_t[]){1, 3, 8, 8}, ARGS(2, 2, 2, 2, 0, 0, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "3x3 s1 p1", 4, (const int64_t[]){2, 2, 6, 7}, ARGS(3, 3, 1, 1, 1, 1, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "3x3 s2 p1", 4, (const int64_t[]){1, 8, 56, 56}, ARGS(3, 3, 2, 2, 1, 1, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "no pad count", 4, (const int64_t[]){1, 2, 6, 7}, ARGS(3, 3, 2, 2, 1, 1, 0, 0, 0), 0, 1);
  pool_case("avg_pool2d", "ceil include pad", 4, (const int64_t[]){1, 2, 6, 6}, ARGS(3, 3, 2, 2, 1, 1, 1, 1, 0), 0, 1);
  pool_case("avg_pool2d", "ceil exclude pad", 4, (const int64_t[]){1, 2, 6, 6}, ARGS(3, 3, 2, 2, 1, 1, 1, 0, 0), 0, 1);
  pool_case("avg_pool2d", "ceil no pad", 4, (const int64_t[]){1, 2, 5, 7}, ARGS(2, 2, 2, 2, 0, 0, 1, 1, 0), 0, 1);
  pool_case("avg_pool2d", "divisor", 4, (const int64_t[]){1, 2, 6, 6}, ARGS(3, 3, 2, 2, 1, 1, 0, 1, 5), 0, 1);
  pool_case("avg_pool2d", "divisor negative", 4, (const int64_t[]){1, 2, 6, 6}, ARGS(3, 3, 2, 2, 1, 1, 0, 1, -3), 0, 1);
  pool_case("avg_pool2d", "nonsquare", 4, (const int64_t[]){1, 1, 9, 8}, ARGS(3, 2, 2, 3, 1, 1, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "3d input", 3, (const int64_t[]){2, 5, 5}, ARGS(2, 2, 1, 1, 0, 0, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "wide s2 tiles", 4, (const int64_t[]){1, 1, 3, 2501}, ARGS(3, 3, 2, 2, 1, 1, 0, 1, 0), 0, 1);
  pool_case("avg_pool2d", "stride 3 ceil", 4, (const int64_t[]){1, 2, 11, 16}, ARGS(4, 3, 3, 3, 2, 1, 1, 0, 0), 0, 1);
  adaptive_case("divides", 4, (const int64_t[]){2, 3, 8, 8}, 4, 2, 1);
  adaptive_case("global", 4, (const int64_t[]){1, 512, 7, 7}, 1, 1, 1);
  adaptive_case("global big", 3, (const int64_t[]){2, 60, 70}, 1, 1, 1);
  adaptive_case("uneven", 4, (const int64_t[]){1, 2, 9, 7}, 4, 3, 1);
  adaptive_case("upsampling", 4, (const int64_t[]){1, 2, 3, 2}, 5, 4, 1);
  adaptive_case("too wide", 4, (const int64_t[]){1, 1, 5, 1100}, 2, 3, 0);
}

/* ---- attention ------------------------------------------------------------------------------------ */

static void sdpa_case(const char *label, int32_t nd, const int64_t *qs, const int64_t *ks, const int64_t *vs,
                      int32_t mnd, const int64_t *ms, int mask_bool, int causal, int groups, double scale, int expect) {
  case_t c = mk("sdpa", label, ATTN);
  c.in[0] = tens_new(OA_DTYPE_FLOAT32, nd, qs);
  c.in[1] = tens_new(OA_DTYPE_FLOAT32, nd, ks);
  c.in[2] = tens_new(OA_DTYPE_FLOAT32, nd, vs);
  fill(c.in[0], 1.0f, 0.0f, 0);
  fill(c.in[1], 1.0f, 0.0f, 0);
  fill(c.in[2], 1.0f, 0.0f, 0);
  c.n_in = 3;
  if (mnd >= 0) {
    c.in[3] = tens_new(mask_bool ? OA_DTYPE_BOOL : OA_DTYPE_FLOAT32, mnd, ms);
    if (mask_bool) {
      uint8_t *m = (uint8_t *)c.in[3]->t.data;
      for (int64_t i = 0; i < c.in[3]->t.numel; i++) m[i] = (uint8_t)(rng_next() % 4 != 0);
      if (mnd >= 2 && ms[mnd - 2] > 2) /* one row masked everywhere: NaN */
        for (int64_t j = 0; j < ms[mnd - 1]; j++) m[ms[mnd - 1] + j] = 0;
    } else {
      fill(c.in[3], 1.0f, 0.0f, 0);
      float *m = F(c.in[3]);
      for (int64_t i = 0; i < c.in[3]->t.numel; i += 5) m[i] = -INFINITY;
    }
    c.n_in = 4;
  }
  int64_t os[8];
  for (int32_t d = 0; d < nd - 1; d++) os[d] = qs[d];
  os[nd - 1] = vs[nd - 1];
  c.out[0] = tens_new(OA_DTYPE_FLOAT32, nd, os);
  c.n_out = 1;
  c.ints[0] = causal;
  c.ints[1] = groups;
  c.n_ints = 2;
  if (scale > 0) {
    c.floats[0] = scale;
    c.n_floats = 1;
  }
  c.expect = expect;
  run_case(&c);
}

#define SH(...) (const int64_t[]){__VA_ARGS__}

static void sdpa_cases(void) {
  sdpa_case("causal", 4, SH(1, 4, 16, 8), SH(1, 4, 16, 8), SH(1, 4, 16, 8), -1, NULL, 0, 1, 1, 0, 1);
  sdpa_case("plain L != S", 4, SH(2, 3, 5, 16), SH(2, 3, 7, 16), SH(2, 3, 7, 12), -1, NULL, 0, 0, 1, 0, 1);
  sdpa_case("causal L < S", 4, SH(1, 2, 4, 8), SH(1, 2, 6, 8), SH(1, 2, 6, 8), -1, NULL, 0, 1, 1, 0, 1);
  sdpa_case("causal L > S", 4, SH(1, 2, 9, 8), SH(1, 2, 6, 8), SH(1, 2, 6, 8), -1, NULL, 0, 1, 1, 0, 1);
  sdpa_case("3d scale", 3, SH(3, 6, 8), SH(3, 6, 8), SH(3, 6, 8), -1, NULL, 0, 0, 1, 0.3, 1);
  sdpa_case("2d", 2, SH(5, 3), SH(9, 3), SH(9, 5), -1, NULL, 0, 0, 1, 0, 1);
  sdpa_case("bool mask", 4, SH(1, 2, 6, 8), SH(1, 2, 6, 8), SH(1, 2, 6, 8), 2, SH(6, 6), 1, 0, 1, 0, 1);
  sdpa_case("float mask", 4, SH(1, 2, 6, 8), SH(1, 2, 6, 8), SH(1, 2, 6, 8), 4, SH(1, 2, 6, 6), 0, 0, 1, 0, 1);
  sdpa_case("key padding mask", 4, SH(2, 2, 70, 8), SH(2, 2, 70, 8), SH(2, 2, 70, 8), 4, SH(2, 1, 1, 70), 1, 0, 1, 0, 1);
  sdpa_case("float row mask", 4, SH(2, 2, 7, 8), SH(2, 2, 9, 8), SH(2, 2, 9, 8), 3, SH(2, 7, 1), 0, 0, 1, 0, 1);
  sdpa_case("gqa causal", 4, SH(1, 8, 10, 16), SH(1, 2, 10, 16), SH(1, 2, 10, 16), -1, NULL, 0, 1, 4, 0, 1);
  sdpa_case("broadcast batch", 4, SH(2, 3, 5, 8), SH(1, 3, 5, 8), SH(2, 1, 5, 8), -1, NULL, 0, 0, 1, 0, 1);
  sdpa_case("gpt", 4, SH(1, 4, 128, 64), SH(1, 4, 128, 64), SH(1, 4, 128, 64), -1, NULL, 0, 1, 1, 0, 1);
  sdpa_case("long tails", 4, SH(1, 2, 37, 40), SH(1, 2, 300, 40), SH(1, 2, 300, 24), -1, NULL, 0, 0, 1, 0, 1);
  sdpa_case("long causal", 3, SH(1, 301, 33), SH(1, 301, 33), SH(1, 301, 19), -1, NULL, 0, 1, 1, 0, 1);
  sdpa_case("long bool mask", 3, SH(2, 65, 16), SH(2, 200, 16), SH(2, 200, 16), 2, SH(65, 200), 1, 0, 1, 0, 1);
  sdpa_case("one key", 4, SH(1, 1, 3, 4), SH(1, 1, 1, 4), SH(1, 1, 1, 4), -1, NULL, 0, 0, 1, 0, 1);
  sdpa_case("wide values", 3, SH(1, 4, 8), SH(1, 4, 8), SH(1, 4, 600), -1, NULL, 0, 0, 1, 0, 0);
}

/* ---- math sweeps against double libm --------------------------------------------------------- */

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_gelu_erf(double x) {
  const float z = (float)x * 0.707106781186547524f; /* PyTorch rounds x / sqrt 2 to float */
  return 0.5 * x * erfc(-(double)z);
}
static double ref_gelu_tanh(double x) {
  const float xf = (float)x, cube = xf * xf * xf, inner = 0.797884560802865356f * (xf + 0.044715f * cube);
  return 0.5 * x * (1.0 + tanh((double)inner));
}

static double ulp_err(float got, double want) {
  float w = (float)want;
  if (w == 0.0f || isinf(w)) return got == w ? 0.0 : INFINITY;
  float u = nextafterf(fabsf(w), INFINITY) - fabsf(w);
  return fabs((double)got - want) / (double)u;
}

static void sweep(const char *op, int64_t approx, double lo, double hi, double (*fn)(double)) {
  const int64_t n = 200003;
  const oa_kernel_t *k = find_kernel(op, "opt");
  for (size_t ii = 0; k && ii < sizeof k_isas / sizeof k_isas[0]; ii++) {
    const char *isa = k_isas[ii].name;
    if (!(g_isas & k_isas[ii].bit) || !has_variant(op, k_isas[ii].bit)) continue;
    case_t c = mk(op, "sweep", ULP4);
    c.in[0] = TF(n);
    c.out[0] = TF(n);
    c.n_in = c.n_out = 1;
    c.ints[0] = approx;
    c.n_ints = 1;
    float *x = F(c.in[0]);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * (double)i / (double)(n - 1));
    tens_t *o[1] = {c.out[0]};
    oa_kernel_env_t env = {&g_features, NULL, k_isas[ii].bit};
    oa_status_t pst;
    if (run_kernel(k, &c, o, &env, NULL, &pst)) {
      double worst = 0, at = 0;
      long bad = 0;
      for (int64_t i = 0; i < n; i++) {
        const double want = fn((double)x[i]), got = F(c.out[0])[i];
        if (fabs(want) > 1e-5) {
          double u = ulp_err((float)got, want);
          if (u > worst) {
            worst = u;
            at = x[i];
          }
        }
        if (!(fabs(got - want) <= 1e-6 + 2e-6 * fabs(want))) {
          if (!bad) fail("%s %s sweep: at %.9g got %.9g want %.9g", op, isa, (double)x[i], got, want);
          bad++;
        }
      }
      printf("sweep %-8s %-8s [%g, %g]: max %.2f ulp (at %.7g)%s\n", op, isa, lo, hi, worst, at,
             approx ? " (tanh form)" : "");
    }
    tens_free(c.in[0]);
    tens_free(c.out[0]);
  }
}

static void math_sweeps(void) {
  sweep("exp", 0, -103.0, 88.7, exp);
  sweep("sigmoid", 0, -90.0, 90.0, ref_sigmoid);
  sweep("tanh", 0, -10.0, 10.0, tanh);
  sweep("silu", 0, -80.0, 80.0, ref_silu);
  sweep("erf", 0, -5.0, 5.0, erf);
  sweep("gelu", 0, -12.0, 12.0, ref_gelu_erf);
  sweep("gelu", 1, -12.0, 12.0, ref_gelu_tanh);
}

int main(void) {
  oa_cpu_detect(&g_features);
  oa_allocator_t alloc = oa_platform_allocator();
  if (oa_threadpool_create(3, &alloc, &g_pool)) {
    printf("FAIL cannot create a thread pool\n");
    return 1;
  }
  g_isas = oa_isa_built() & oa_isa_detected(&g_features);
  printf("cpu: %s avx2=%d fma=%d neon=%d isas=0x%x\n", oa_cpu_arch_name(g_features.arch), g_features.avx2,
         g_features.fma, g_features.neon, g_isas);
  unary_cases();
  binary_cases();
  softmax_cases();
  layer_norm_cases();
  mean_cases();
  pool_cases();
  sdpa_cases();
  math_sweeps();
  for (int i = 0; i < g_nstats; i++) {
    const stat_t *s = &g_stats[i];
    printf("kernel %-20s %-8s cases %3ld accepted %3ld declined %3ld max_abs %.3g max_rel %.3g\n", s->op, s->variant,
           s->cases, s->accepted, s->declined, s->max_abs, s->max_rel);
  }
  oa_threadpool_destroy(g_pool);
  printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
