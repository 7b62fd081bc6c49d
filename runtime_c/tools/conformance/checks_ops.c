/* Checks op.<name>.<dtype>: every op the device claims that op_cases.c has a generator for, run on
 * the device (through its own memory and copies) and on the reference CPU device, compared. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- running op cases ---------------------------------------------------------------------------------------- */

static int64_t numel_of(const tspec_t *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

static void make_tensor(oa_tensor_t *t, const tspec_t *sp, int32_t dtype, void *data, const char *name) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->ndim = sp->ndim;
  memcpy(t->shape, sp->shape, sizeof t->shape);
  t->dtype = dtype;
  t->numel = numel_of(sp);
  t->nbytes = (size_t)t->numel * oa_dtype_size(dtype);
  t->name = name;
}

static int32_t dtype_of(const tspec_t *sp, int32_t case_dtype) { return sp->dtype ? sp->dtype - 1 : case_dtype; }

/* NaN, +-inf, -0.0, +-3e38, then four half-way points (k + 0.5) * step, repeating */
static float special_value(int64_t i, float step) {
  switch (i % 10) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return -0.0f;
    case 4: return 3e38f;
    case 5: return -3e38f;
    default: return ((float)((i / 10) * 4 + (i % 10 - 6) - 20) + 0.5f) * step;
  }
}

static void random_fill(rng_t *r, void *data, int32_t dtype, int64_t n, const tspec_t *sp) {
  uint64_t span = sp->ranged ? (uint64_t)(sp->hi - sp->lo) + 1u : 0; /* 0: the whole 64-bit range */
  for (int64_t i = 0; i < n; i++) {
    int64_t v = sp->ranged ? sp->lo + (int64_t)(span ? rng_next(r) % span : rng_next(r)) : 0;
    switch (dtype) {
      case OA_DTYPE_FLOAT32: /* ranged: whole numbers lo..hi times the scale (the int8 ops' biases) */
        ((float *)data)[i] = sp->special ? special_value(i, sp->scale)
                             : sp->ranged ? (float)v * sp->scale : rng_float(r) * sp->scale;
        break;
      case OA_DTYPE_INT32: ((int32_t *)data)[i] = sp->ranged ? (int32_t)v : (int32_t)rng_below(r, 101) - 50; break;
      case OA_DTYPE_INT64: ((int64_t *)data)[i] = sp->ranged ? v : (int64_t)rng_below(r, 101) - 50; break;
      case OA_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)(sp->ranged ? v : (int64_t)rng_below(r, 256) - 128); break;
      case OA_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)(sp->ranged ? v : (int64_t)rng_below(r, 256)); break;
      case OA_DTYPE_BOOL: ((uint8_t *)data)[i] = (uint8_t)rng_below(r, 2); break;
      default: memset((uint8_t *)data + (size_t)i * oa_dtype_size(dtype), 0, oa_dtype_size(dtype)); break;
    }
  }
}

/* The quantization parameters a tensor of the case carries (oa_tensor_t.quant), as the executor
 * hands them to a device; per channel: one scale per index of dim 0, zero points 0. */
static int attach_quant(suite_t *s, oa_tensor_t *t, const tspec_t *sp) {
  if (!sp->quant) return 1;
  uint32_t count = sp->quant == 2 && sp->ndim > 0 ? (uint32_t)sp->shape[0] : 1u;
  float *scale = (float *)host_alloc(s, (count ? count : 1u) * sizeof(float));
  int64_t *zp = (int64_t *)host_alloc(s, (count ? count : 1u) * sizeof(int64_t));
  if (!scale || !zp) return 0;
  for (uint32_t c = 0; c < count; c++) {
    scale[c] = sp->quant == 2 ? 0.002f * (float)(1u + c % 5u) : sp->qscale;
    zp[c] = sp->quant == 2 ? 0 : sp->qzp;
  }
  t->quant.scale = scale;
  t->quant.zero_point = zp;
  t->quant.axis = sp->quant == 2 ? 0 : -1;
  t->quant.count = count;
  return 1;
}

typedef struct cmp {
  int64_t elements, mismatches, first;
  double max_abs, max_rel, got_first, want_first;
  uint32_t output_first;
} cmp_t;

static void compare_out(const void *got, const void *want, int32_t dtype, int64_t n, const gen_t *gen, uint32_t o,
                        cmp_t *c) {
  double rtol = gen->sums ? 1e-4 : 1e-6, atol = gen->sums ? 1e-5 : 1e-6;
  int exact = dtype != OA_DTYPE_FLOAT32 || (gen->sums == TOL_EXACT);
  for (int64_t i = 0; i < n; i++) {
    double g, w;
    int same_bits = 0;
    switch (dtype) {
      case OA_DTYPE_FLOAT32:
        g = ((const float *)got)[i];
        w = ((const float *)want)[i];
        same_bits = memcmp((const float *)got + i, (const float *)want + i, sizeof(float)) == 0;
        break;
      case OA_DTYPE_INT32: g = ((const int32_t *)got)[i]; w = ((const int32_t *)want)[i]; break;
      case OA_DTYPE_INT64: g = (double)((const int64_t *)got)[i]; w = (double)((const int64_t *)want)[i]; break;
      case OA_DTYPE_INT8: g = ((const int8_t *)got)[i]; w = ((const int8_t *)want)[i]; break;
      default: g = ((const uint8_t *)got)[i]; w = ((const uint8_t *)want)[i]; break;
    }
    c->elements++;
    int bad;
    double d = fabs(g - w);
    if (isnan(g) || isnan(w)) bad = !(isnan(g) && isnan(w));
    else if (dtype == OA_DTYPE_FLOAT32 && (gen->sums == TOL_EXACT)) bad = !same_bits; /* bit for bit: -0.0 is not 0.0 */
    else if (g == w) bad = 0;
    else bad = exact || !(d <= atol + rtol * fabs(w));
    if (!isnan(d) && d > c->max_abs) c->max_abs = d;
    if (!isnan(d) && fabs(w) > 0 && d / fabs(w) > c->max_rel) c->max_rel = d / fabs(w);
    if (bad) {
      if (!c->mismatches) {
        c->first = i;
        c->got_first = g;
        c->want_first = w;
        c->output_first = o;
      }
      c->mismatches++;
    }
  }
}

typedef enum case_result { CASE_OK, CASE_MISMATCH, CASE_DEV_UNSUPPORTED, CASE_REF_UNSUPPORTED, CASE_ERROR } case_result_t;

/* Run one case on the reference CPU device and on the device under test and compare. */
static case_result_t run_case(suite_t *s, const char *op, const gen_t *g, int32_t dtype, const op_case_t *k,
                              rng_t *r, cmp_t *cmp, char *why, size_t why_n) {
  oa_tensor_t ref_t[MAX_IN + MAX_OUT], dev_t[MAX_IN + MAX_OUT], meta_t[MAX_IN + MAX_OUT];
  oa_tensor_t *ref_p[MAX_IN + MAX_OUT], *dev_p[MAX_IN + MAX_OUT], *meta_p[MAX_IN + MAX_OUT];
  void *host_in[MAX_IN] = {NULL}, *ref_out[MAX_OUT] = {NULL}, *dev_out[MAX_OUT] = {NULL};
  oa_op_call_t ref_call, dev_call, meta_call;
  oa_op_plan_t plan;
  oa_diag_t diag;
  oa_status_t st;
  oa_stream_t *stream = NULL;
  uint32_t nt = k->n_in + k->n_out;
  static const char *const in_names[MAX_IN] = {"in0", "in1", "in2", "in3", "in4", "in5", "in6", "in7"},
                           *const out_names[MAX_OUT] = {"out0", "out1", "out2"};
  for (uint32_t i = 0; i < nt; i++) ref_p[i] = dev_p[i] = meta_p[i] = NULL;
  for (uint32_t i = 0; i < k->n_in; i++) {
    if (!k->in[i].present) continue;
    int64_t n = numel_of(&k->in[i]);
    int32_t dt = dtype_of(&k->in[i], dtype);
    host_in[i] = host_alloc(s, (size_t)(n ? n : 1) * oa_dtype_size(dt));
    if (!host_in[i]) goto oom;
    random_fill(r, host_in[i], dt, n, &k->in[i]);
    make_tensor(&ref_t[i], &k->in[i], dt, host_in[i], in_names[i]);
    make_tensor(&meta_t[i], &k->in[i], dt, NULL, in_names[i]);
    if (!attach_quant(s, &ref_t[i], &k->in[i])) goto oom;
    meta_t[i].quant = ref_t[i].quant;
    ref_p[i] = &ref_t[i];
    meta_p[i] = &meta_t[i];
  }
  for (uint32_t o = 0; o < k->n_out; o++) {
    int64_t n = numel_of(&k->out[o]);
    int32_t dt = dtype_of(&k->out[o], dtype);
    ref_out[o] = host_alloc(s, (size_t)(n ? n : 1) * oa_dtype_size(dt));
    dev_out[o] = host_alloc(s, (size_t)(n ? n : 1) * oa_dtype_size(dt));
    if (!ref_out[o] || !dev_out[o]) goto oom;
    memset(ref_out[o], 0xAB, (size_t)n * oa_dtype_size(dt));
    memset(dev_out[o], 0xCD, (size_t)n * oa_dtype_size(dt));
    make_tensor(&ref_t[k->n_in + o], &k->out[o], dt, ref_out[o], out_names[o]);
    make_tensor(&meta_t[k->n_in + o], &k->out[o], dt, NULL, out_names[o]);
    if (!attach_quant(s, &ref_t[k->n_in + o], &k->out[o])) goto oom;
    meta_t[k->n_in + o].quant = ref_t[k->n_in + o].quant;
    ref_p[k->n_in + o] = &ref_t[k->n_in + o];
    meta_p[k->n_in + o] = &meta_t[k->n_in + o];
  }
  memset(&ref_call, 0, sizeof ref_call);
  ref_call.op = op;
  ref_call.inputs = ref_p;
  ref_call.n_inputs = k->n_in;
  ref_call.outputs = ref_p + k->n_in;
  ref_call.n_outputs = k->n_out;
  ref_call.ints = k->n_ints ? k->ints : NULL;
  ref_call.n_ints = k->n_ints;
  ref_call.floats = k->n_floats ? k->floats : NULL;
  ref_call.n_floats = k->n_floats;
  meta_call = ref_call;
  meta_call.inputs = meta_p;
  meta_call.outputs = meta_p + k->n_in;
  /* the reference */
  oa_diag_clear(&diag);
  if ((st = oa_device_prepare_op(s->ref, &ref_call, &plan, &diag))) {
    snprintf(why, why_n, "the reference kernel rejects case '%s': %s: %s", k->name, sn(st), diag.message);
    return st == OA_ERR_UNSUPPORTED ? CASE_REF_UNSUPPORTED : CASE_ERROR;
  }
  void *ref_scratch = plan.scratch_bytes ? host_alloc(s, plan.scratch_bytes) : NULL;
  if (plan.scratch_bytes && !ref_scratch) goto oom;
  if ((st = oa_device_execute_op(s->ref, NULL, &ref_call, &plan, ref_scratch, &diag))) {
    snprintf(why, why_n, "the reference kernel failed on case '%s': %s: %s", k->name, sn(st), diag.message);
    return CASE_ERROR;
  }
  /* the device: a metadata-only prepare first (as oa_method_requirements does) */
  oa_diag_clear(&diag);
  if ((st = oa_device_prepare_op(s->dev, &meta_call, &plan, &diag))) {
    snprintf(why, why_n, "case '%s': prepare_op (metadata only): %s: %s", k->name, sn(st), diag.message);
    return st == OA_ERR_UNSUPPORTED ? CASE_DEV_UNSUPPORTED : CASE_ERROR;
  }
  if ((st = new_stream(s, &stream))) {
    snprintf(why, why_n, "stream_create: %s", sn(st));
    return CASE_ERROR;
  }
  for (uint32_t i = 0; i < nt; i++) {
    if (!ref_p[i]) continue;
    void *d = NULL;
    int is_in = i < k->n_in;
    const tspec_t *sp = is_in ? &k->in[i] : &k->out[i - k->n_in];
    size_t nb = ref_t[i].nbytes;
    if (is_in && sp->constant && HAS(s, wrap_memory)) {
      if ((st = oa_device_wrap_memory(s->dev, host_in[i], nb, &d)) || !d) {
        snprintf(why, why_n, "case '%s': wrap_memory of a %zu-byte weight: %s", k->name, nb, sn(st));
        return CASE_ERROR;
      }
      track(s, RES_WRAPPED, d);
    } else {
      if ((st = dev_alloc(s, nb, 0, &d))) {
        snprintf(why, why_n, "case '%s': allocate %zu bytes: %s", k->name, nb, sn(st));
        return CASE_ERROR;
      }
      if (is_in && (st = h2d(s, stream, d, host_in[i], nb))) {
        snprintf(why, why_n, "case '%s': copy of input %u to the device: %s", k->name, i, sn(st));
        return CASE_ERROR;
      }
    }
    make_tensor(&dev_t[i], sp, ref_t[i].dtype, d, is_in ? in_names[i] : out_names[i - k->n_in]);
    dev_t[i].quant = ref_t[i].quant;
    dev_p[i] = &dev_t[i];
  }
  if ((st = sync_stream(s, stream))) {
    snprintf(why, why_n, "case '%s': stream_synchronize after the input copies: %s", k->name, sn(st));
    return CASE_ERROR;
  }
  dev_call = ref_call;
  dev_call.inputs = dev_p;
  dev_call.outputs = dev_p + k->n_in;
  oa_diag_clear(&diag);
  if ((st = oa_device_prepare_op(s->dev, &dev_call, &plan, &diag))) {
    snprintf(why, why_n, "case '%s': prepare_op: %s: %s", k->name, sn(st), diag.message);
    return CASE_ERROR;
  }
  void *scratch = NULL;
  if (plan.scratch_bytes && (st = dev_alloc(s, plan.scratch_bytes, 0, &scratch))) {
    snprintf(why, why_n, "case '%s': allocate %zu bytes of scratch: %s", k->name, plan.scratch_bytes, sn(st));
    return CASE_ERROR;
  }
  if ((st = oa_device_execute_op(s->dev, stream, &dev_call, &plan, scratch, &diag)) || (st = sync_stream(s, stream))) {
    snprintf(why, why_n, "case '%s': execute_op: %s: %s", k->name, sn(st), diag.message);
    return CASE_ERROR;
  }
  for (uint32_t o = 0; o < k->n_out; o++) {
    if ((st = d2h(s, stream, dev_out[o], dev_t[k->n_in + o].data, ref_t[k->n_in + o].nbytes))) {
      snprintf(why, why_n, "case '%s': copy of output %u to the host: %s", k->name, o, sn(st));
      return CASE_ERROR;
    }
  }
  if ((st = sync_stream(s, stream))) {
    snprintf(why, why_n, "case '%s': stream_synchronize after the output copies: %s", k->name, sn(st));
    return CASE_ERROR;
  }
  int64_t before = cmp->mismatches;
  for (uint32_t o = 0; o < k->n_out; o++)
    compare_out(dev_out[o], ref_out[o], ref_t[k->n_in + o].dtype, ref_t[k->n_in + o].numel, g, o, cmp);
  if (cmp->mismatches > before) {
    snprintf(why, why_n, "case '%s': %lld of %lld elements outside tolerance; first: output %u element %lld = %.9g, "
             "reference %.9g", k->name, (long long)(cmp->mismatches - before), (long long)cmp->elements,
             cmp->output_first, (long long)cmp->first, cmp->got_first, cmp->want_first);
    return CASE_MISMATCH;
  }
  return CASE_OK;
oom:
  snprintf(why, why_n, "out of host memory");
  return CASE_ERROR;
}

void run_op_checks(suite_t *s) {
  for (size_t i = 0; i < k_n_ops; i++) {
    const char *op = k_ops[i];
    uint64_t mask = 0, ref_mask = 0;
    if (oa_device_supports_op(s->dev, op, &mask) != OA_OK || !mask) continue;
    (void)oa_device_supports_op(s->ref, op, &ref_mask);
    const gen_t *g = find_gen(op);
    char name[96];
    if (!g) {
      snprintf(name, sizeof name, "op.%s", op);
      if (!wanted(s, name)) continue;
      char dts[160] = "";
      size_t n = 0;
      for (int b = 0; b < 64; b++)
        if ((mask >> b) & 1u) {
          int w = snprintf(dts + n, sizeof dts - n, "%s%s", n ? ", " : "", oa_dtype_name(b));
          if (w > 0 && (size_t)w < sizeof dts - n) n += (size_t)w;
        }
      set_detail(s, "no generator in this suite (the device claims %s)", dts);
      report(s, name, R_SKIP);
      continue;
    }
    for (int b = 0; b < 64; b++) {
      if (!((mask >> b) & 1u)) continue;
      int32_t dtype = b;
      snprintf(name, sizeof name, "op.%s.%s", op, oa_dtype_name(dtype));
      if (!wanted(s, name)) continue;
      if (!((g->dtypes >> b) & 1u)) {
        set_detail(s, "no generator for %s inputs", oa_dtype_name(dtype));
        report(s, name, R_SKIP);
        continue;
      }
      if (!((ref_mask >> b) & 1u)) {
        set_detail(s, "the reference CPU kernels of this runtime build have no %s kernel for %s", op, oa_dtype_name(dtype));
        report(s, name, R_SKIP);
        continue;
      }
      op_case_t cases[MAX_CASES];
      int n_cases = g->fn(dtype, cases);
      rng_t r = rng_for(s, name);
      cmp_t cmp;
      memset(&cmp, 0, sizeof cmp);
      int ok = 0, dev_unsup = 0, ref_unsup = 0, result = R_PASS;
      char why[700] = "", unsup[300] = "";
      for (int c = 0; c < n_cases && result == R_PASS; c++) {
        char w[700] = "";
        case_result_t cr = run_case(s, op, g, dtype, &cases[c], &r, &cmp, w, sizeof w);
        release_all(s);
        if (cr == CASE_OK) ok++;
        else if (cr == CASE_DEV_UNSUPPORTED) {
          dev_unsup++;
          size_t l = strlen(unsup);
          snprintf(unsup + l, sizeof unsup - l, "%s'%s'", l ? ", " : "", cases[c].name);
        } else if (cr == CASE_REF_UNSUPPORTED) ref_unsup++;
        else {
          result = R_FAIL;
          snprintf(why, sizeof why, "%s", w);
        }
      }
      if (result == R_FAIL) {
        set_detail(s, "%s", why);
      } else if (!ok) {
        result = R_SKIP;
        set_detail(s, "no case ran: %d unsupported by the device%s%s, %d by the reference", dev_unsup, dev_unsup ? ": " : "",
                   unsup, ref_unsup);
      } else {
        int exact = dtype != OA_DTYPE_FLOAT32 || (g->sums == TOL_EXACT);
        set_detail(s, "%d cases, %lld elements, max abs err %.3g, max rel err %.3g (atol %g, rtol %g%s)%s%s%s", ok,
                   (long long)cmp.elements, cmp.max_abs, cmp.max_rel, exact ? 0.0 : g->sums ? 1e-5 : 1e-6,
                   exact ? 0.0 : g->sums ? 1e-4 : 1e-6, (g->sums == TOL_EXACT) ? ", bit-exact" : "",
                   dev_unsup ? "; UNSUPPORTED by the device: " : "",
                   unsup, ref_unsup ? "; some cases unsupported by the reference" : "");
      }
      report(s, name, result);
    }
  }
}

