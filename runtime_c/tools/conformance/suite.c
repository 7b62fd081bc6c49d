/* The suite's shared helpers: output rows, random data, resources, copies, small op calls. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"
#include "json_out.h"

static const char *const k_result_names[] = {"PASS", "FAIL", "SKIP"};

/* ---- output --------------------------------------------------------------------------------------- */

void set_detail(suite_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->detail, sizeof s->detail, fmt, ap);
  va_end(ap);
}

void report(suite_t *s, const char *name, int result) {
  if (result == R_PASS) s->passed++;
  else if (result == R_FAIL) s->failed++;
  else s->skipped++;
  if (s->json) {
    printf("{\"event\": \"check\", \"device\": %u, \"name\": ", s->index);
    json_string(stdout, name);
    printf(", \"result\": \"%s\", \"detail\": ", k_result_names[result]);
    json_string(stdout, s->detail);
    puts("}");
  } else {
    printf("%-34s %-6s %s\n", name, k_result_names[result], s->detail);
  }
  fflush(stdout);
}

int wanted(const suite_t *s, const char *name) { return !s->filter || strstr(name, s->filter) != NULL; }

/* ---- random data ---------------------------------------------------------------------------------- */

rng_t rng_for(const suite_t *s, const char *name) {
  uint64_t h = UINT64_C(1469598103934665603);
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
  rng_t r = {s->seed ^ h};
  return r;
}

void fill_bytes(rng_t *r, uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(r) >> 56);
}

/* ---- resources: everything a check creates is released when it ends ------------------------------- */

void track(suite_t *s, res_kind_t kind, void *p) {
  if (s->n_res < MAX_RES) s->res[s->n_res++] = (res_t){kind, p};
  else s->res_overflow = 1;
}

void untrack(suite_t *s, void *p) {
  for (uint32_t i = s->n_res; i > 0; i--)
    if (s->res[i - 1].p == p) {
      s->res[i - 1] = s->res[--s->n_res];
      return;
    }
}

void release_all(suite_t *s) {
  /* let queued work finish before anything it touches goes away */
  for (uint32_t i = 0; i < s->n_res; i++)
    if (s->res[i].kind == RES_STREAM) (void)oa_stream_synchronize(s->dev, (oa_stream_t *)s->res[i].p);
  (void)oa_stream_synchronize(s->dev, NULL);
  (void)oa_device_synchronize(s->dev);
  static const res_kind_t order[] = {RES_EVENT, RES_STREAM, RES_WRAPPED, RES_DEVMEM, RES_HOST};
  for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
    for (uint32_t i = 0; i < s->n_res; i++) {
      res_t r = s->res[i];
      if (r.kind != order[k]) continue;
      switch (r.kind) {
        case RES_EVENT: (void)oa_event_destroy(s->dev, (oa_event_t *)r.p); break;
        case RES_STREAM: (void)oa_stream_destroy(s->dev, (oa_stream_t *)r.p); break;
        case RES_WRAPPED: (void)oa_device_unwrap_memory(s->dev, r.p); break;
        case RES_DEVMEM: (void)oa_device_free(s->dev, r.p); break;
        case RES_HOST: oa_platform_free(r.p); break;
      }
    }
  }
  s->n_res = 0;
}

void *host_alloc(suite_t *s, size_t n) {
  void *p = oa_platform_alloc(n ? n : 1, 64);
  if (p) track(s, RES_HOST, p);
  return p;
}

oa_status_t dev_alloc(suite_t *s, size_t n, size_t alignment, void **out) {
  *out = NULL;
  oa_status_t st = oa_device_allocate(s->dev, n, alignment, out);
  if (!st && !*out) st = OA_ERR_INTERNAL; /* reported by the caller as "returned NULL" */
  if (!st) track(s, RES_DEVMEM, *out);
  return st;
}

oa_status_t dev_free(suite_t *s, void *p) {
  untrack(s, p);
  return oa_device_free(s->dev, p);
}

oa_status_t new_stream(suite_t *s, oa_stream_t **out) {
  *out = NULL;
  if (!HAS(s, stream_create)) return OA_OK;
  oa_status_t st = oa_stream_create(s->dev, 0, out);
  if (!st) track(s, RES_STREAM, *out);
  return st;
}

oa_status_t new_event(suite_t *s, uint32_t flags, oa_event_t **out) {
  *out = NULL;
  oa_status_t st = oa_event_create(s->dev, flags, out);
  if (!st) track(s, RES_EVENT, *out);
  return st;
}

oa_status_t sync_stream(suite_t *s, oa_stream_t *stream) {
  oa_status_t st = oa_stream_synchronize(s->dev, stream);
  if (st == OA_ERR_UNSUPPORTED) st = oa_device_synchronize(s->dev);
  if (st == OA_ERR_UNSUPPORTED && !(s->props.flags & OA_DEVICE_FLAG_ASYNC)) st = OA_OK;
  return st;
}

/* ---- small op calls on the device under test ---------------------------------------------------------- */

oa_status_t prep_simple(suite_t *s, const char *op, oa_tensor_t *ts, uint32_t n_in, oa_op_call_t *call,
                        oa_tensor_t **ptrs, oa_op_plan_t *plan, const double *floats, uint32_t n_floats) {
  for (uint32_t i = 0; i <= n_in; i++) ptrs[i] = &ts[i];
  memset(call, 0, sizeof *call);
  call->op = op;
  call->inputs = ptrs;
  call->n_inputs = n_in;
  call->outputs = ptrs + n_in;
  call->n_outputs = 1;
  call->floats = floats;
  call->n_floats = n_floats;
  memset(plan, 0, sizeof *plan);
  return oa_device_prepare_op(s->dev, call, plan, NULL);
}

void f32_tensor(oa_tensor_t *t, void *data, int64_t n, const char *name) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->ndim = 1;
  t->shape[0] = n;
  t->dtype = OA_DTYPE_FLOAT32;
  t->numel = n;
  t->nbytes = (size_t)n * sizeof(float);
  t->name = name;
}

int claims_f32(suite_t *s, const char *op) {
  uint64_t m = 0;
  return oa_device_supports_op(s->dev, op, &m) == OA_OK && (m & OA_DTYPE_BIT(OA_DTYPE_FLOAT32));
}

