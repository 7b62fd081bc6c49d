/* oa_conformance: checks that a device implements the standard device interface
 * (openaccel/device.h) the way the executor relies on it.
 *
 *   oa_conformance [--device LIB.so ...] [--json] [--seed N] [--filter TEXT] [--list-ops]
 *
 * Without --device it checks the built-in CPU device; with --device it loads a vendor library
 * (dlopen + dlsym("oa_device_factory"), on hosts that have dlopen), registers its factory in an
 * oa_registry_t and checks every device it creates. Each check prints one row (name, PASS / FAIL /
 * SKIP, detail); the last line is "N passed, N failed". --json prints one JSON object per line
 * instead, then a summary object. Exit: 0 when nothing failed, 1 when a check failed, 2 on bad
 * usage or a library that cannot be loaded.
 *
 * Each check tests one property. Only stream.ordering depends on a stream running its commands
 * in order: the other checks synchronize between commands that depend on each other (or keep an
 * independent command between them), so a device that reorders fails exactly stream.ordering.
 *
 * op.<name>.<dtype> runs every op the device claims (supports_op) that this suite has a generator
 * for on several shapes with random inputs (--seed), through the device's own memory and copies,
 * and compares the outputs with the runtime's reference CPU kernels (a CPU device with
 * reference_only = 1): |got - want| <= atol + rtol * |want| with rtol = atol = 1e-6 for
 * elementwise ops and rtol 1e-4 / atol 1e-5 for ops that sum (the convolutions, linear, matmul,
 * softmax, avg_pool2d, layer_norm); integers and bools exactly. Claimed ops without a generator, and dtypes
 * the reference kernels of this build lack, are reported as SKIP. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OA_HAVE_DLOPEN)
#include <dlfcn.h>
#endif

#include "json_out.h"
#include "openaccel/openaccel.h"

enum { R_PASS = 0, R_FAIL = 1, R_SKIP = 2 };
static const char *const k_result_names[] = {"PASS", "FAIL", "SKIP"};

/* Every op of the op set (sdk/openaccel/opset.py): the names supports_op is asked about. */
static const char *const k_ops[] = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "silu", "hardswish", "hardsigmoid",
    "sin", "cos", "erf", "floor", "ceil", "round", "sign", "reciprocal", "log1p", "expm1", "gelu", "leaky_relu",
    "elu", "hardtanh", "clamp", "logical_not", "bitwise_not", "cast", "add", "sub", "mul", "div", "pow", "minimum",
    "maximum", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "where", "full", "arange", "linear", "matmul",
    "addmm", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm",
    "layer_norm", "group_norm", "upsample_nearest2d", "upsample_bilinear2d", "softmax", "log_softmax", "sum",
    "mean", "amax", "amin", "prod", "any", "all", "var", "argmax", "argmin", "cumsum", "copy", "permute",
    "expand", "slice", "select", "cat", "split", "pad", "flip", "repeat", "embedding", "index_select", "gather",
    "sdpa", "conv2d_winograd", "conv2d_nhwc", "mbconv_nhwc", "linear_packed",
};
#define N_OPS (sizeof k_ops / sizeof k_ops[0])

/* ---- the suite's state -------------------------------------------------------------------------- */

typedef enum res_kind { RES_DEVMEM, RES_WRAPPED, RES_STREAM, RES_EVENT, RES_HOST } res_kind_t;
typedef struct res {
  res_kind_t kind;
  void *p;
} res_t;
#define MAX_RES 1024

typedef struct suite {
  oa_device_t *dev;            /* the device under test */
  oa_device_properties_t props;
  const char *factory_kind;    /* kind_name of the factory that created it */
  uint32_t index;
  oa_device_t *ref;            /* reference CPU device */
  uint64_t seed;
  int json;
  const char *filter;
  int passed, failed, skipped;
  char detail[1024];
  res_t res[MAX_RES];
  uint32_t n_res;
  int res_overflow;
} suite_t;

/* ---- output --------------------------------------------------------------------------------------- */

static void set_detail(suite_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void set_detail(suite_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->detail, sizeof s->detail, fmt, ap);
  va_end(ap);
}

static void report(suite_t *s, const char *name, int result) {
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

static int wanted(const suite_t *s, const char *name) { return !s->filter || strstr(name, s->filter) != NULL; }

/* ---- random data ---------------------------------------------------------------------------------- */

typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static uint32_t rng_below(rng_t *r, uint32_t n) { return n ? (uint32_t)(rng_next(r) % n) : 0; }

/* uniform in [-1, 1) with 24 bits */
static float rng_float(rng_t *r) { return (float)((double)(rng_next(r) >> 40) / 8388608.0 - 1.0); }

/* A stream of its own for every check (and op), so that --filter does not change the data. */
static rng_t rng_for(const suite_t *s, const char *name) {
  uint64_t h = UINT64_C(1469598103934665603);
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
  rng_t r = {s->seed ^ h};
  return r;
}

static void fill_bytes(rng_t *r, uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(r) >> 56);
}

/* ---- resources: everything a check creates is released when it ends ------------------------------- */

#define HAS(s, slot)                                                                                   \
  ((s)->dev->vtable && (s)->dev->vtable->struct_size >= offsetof(oa_device_vtable_t, slot) + sizeof(void *) && \
   (s)->dev->vtable->slot != NULL)

static void track(suite_t *s, res_kind_t kind, void *p) {
  if (s->n_res < MAX_RES) s->res[s->n_res++] = (res_t){kind, p};
  else s->res_overflow = 1;
}

static void untrack(suite_t *s, void *p) {
  for (uint32_t i = s->n_res; i > 0; i--)
    if (s->res[i - 1].p == p) {
      s->res[i - 1] = s->res[--s->n_res];
      return;
    }
}

static void release_all(suite_t *s) {
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

static void *host_alloc(suite_t *s, size_t n) {
  void *p = oa_platform_alloc(n ? n : 1, 64);
  if (p) track(s, RES_HOST, p);
  return p;
}

static oa_status_t dev_alloc(suite_t *s, size_t n, size_t alignment, void **out) {
  *out = NULL;
  oa_status_t st = oa_device_allocate(s->dev, n, alignment, out);
  if (!st && !*out) st = OA_ERR_INTERNAL; /* reported by the caller as "returned NULL" */
  if (!st) track(s, RES_DEVMEM, *out);
  return st;
}

static oa_status_t dev_free(suite_t *s, void *p) {
  untrack(s, p);
  return oa_device_free(s->dev, p);
}

/* A stream for a check: a new one when the device can create streams, else the default (NULL). */
static oa_status_t new_stream(suite_t *s, oa_stream_t **out) {
  *out = NULL;
  if (!HAS(s, stream_create)) return OA_OK;
  oa_status_t st = oa_stream_create(s->dev, 0, out);
  if (!st) track(s, RES_STREAM, *out);
  return st;
}

static oa_status_t new_event(suite_t *s, uint32_t flags, oa_event_t **out) {
  *out = NULL;
  oa_status_t st = oa_event_create(s->dev, flags, out);
  if (!st) track(s, RES_EVENT, *out);
  return st;
}

static oa_status_t h2d(suite_t *s, oa_stream_t *st, void *d, const void *h, size_t n) {
  return oa_device_copy(s->dev, st, d, h, n, OA_COPY_HOST_TO_DEVICE);
}
static oa_status_t d2h(suite_t *s, oa_stream_t *st, void *h, const void *d, size_t n) {
  return oa_device_copy(s->dev, st, h, d, n, OA_COPY_DEVICE_TO_HOST);
}
static oa_status_t d2d(suite_t *s, oa_stream_t *st, void *dst, const void *src, size_t n) {
  return oa_device_copy(s->dev, st, dst, src, n, OA_COPY_DEVICE_TO_DEVICE);
}

/* Wait for a stream; a device without stream slots is synchronous (its copies are done). */
static oa_status_t sync_stream(suite_t *s, oa_stream_t *stream) {
  oa_status_t st = oa_stream_synchronize(s->dev, stream);
  if (st == OA_ERR_UNSUPPORTED) st = oa_device_synchronize(s->dev);
  if (st == OA_ERR_UNSUPPORTED && !(s->props.flags & OA_DEVICE_FLAG_ASYNC)) st = OA_OK;
  return st;
}

/* Device address + offset, without forming an out-of-object host pointer (device addresses
 * need not be host pointers). */
static void *dptr_add(void *p, size_t off) { return (void *)((uintptr_t)p + off); }

static const char *sn(oa_status_t st) { return oa_status_name(st); }

#define FAIL(...)           \
  do {                      \
    set_detail(s, __VA_ARGS__); \
    rc = R_FAIL;            \
    goto done;              \
  } while (0)
#define SKIP(...)           \
  do {                      \
    set_detail(s, __VA_ARGS__); \
    rc = R_SKIP;            \
    goto done;              \
  } while (0)
#define TRY(expr, what)                                                     \
  do {                                                                      \
    oa_status_t st_ = (expr);                                               \
    if (st_) FAIL("%s failed: %s", what, sn(st_));                          \
  } while (0)

/* ---- properties and queries ----------------------------------------------------------------------- */

static int nonempty_cstr(const char *s, size_t cap) { return s[0] != '\0' && memchr(s, '\0', cap) != NULL; }

static int check_properties(suite_t *s) {
  int rc = R_PASS;
  const oa_device_vtable_t *vt = s->dev->vtable;
  oa_device_properties_t p, q;
  if (!vt) FAIL("device has no vtable");
  if (vt->abi_version < 1 || vt->abi_version > OA_DEVICE_ABI_VERSION)
    FAIL("vtable abi_version %u: expected 1 to %d", vt->abi_version, OA_DEVICE_ABI_VERSION);
  if (vt->struct_size < offsetof(oa_device_vtable_t, get_properties) + sizeof(void *))
    FAIL("vtable struct_size %u is smaller than the first slots", vt->struct_size);
  static const struct { const char *name; size_t off; } required[] = {
      {"destroy", offsetof(oa_device_vtable_t, destroy)},
      {"get_properties", offsetof(oa_device_vtable_t, get_properties)},
      {"supports_op", offsetof(oa_device_vtable_t, supports_op)},
      {"allocate", offsetof(oa_device_vtable_t, allocate)},
      {"free", offsetof(oa_device_vtable_t, free)},
      {"copy", offsetof(oa_device_vtable_t, copy)},
      {"prepare_op", offsetof(oa_device_vtable_t, prepare_op)},
      {"execute_op", offsetof(oa_device_vtable_t, execute_op)},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    void *slot = NULL;
    if (vt->struct_size >= required[i].off + sizeof(void *)) memcpy(&slot, (const char *)vt + required[i].off, sizeof slot);
    if (!slot) FAIL("required slot '%s' is empty", required[i].name);
  }
  memset(&p, 0x5a, sizeof p);
  TRY(oa_device_get_properties(s->dev, &p), "get_properties");
  if (!nonempty_cstr(p.name, sizeof p.name)) FAIL("name is empty or not NUL-terminated");
  if (!nonempty_cstr(p.vendor, sizeof p.vendor)) FAIL("vendor is empty or not NUL-terminated");
  if (!nonempty_cstr(p.kind_name, sizeof p.kind_name)) FAIL("kind_name is empty or not NUL-terminated");
  if (s->factory_kind && strcmp(p.kind_name, s->factory_kind) != 0)
    FAIL("kind_name '%s' differs from its factory's kind_name '%s'", p.kind_name, s->factory_kind);
  if (p.kind != OA_DEVICE_KIND_CPU && p.kind != OA_DEVICE_KIND_ACCELERATOR) FAIL("kind %d is not a known kind", (int)p.kind);
  if (!p.alignment || (p.alignment & (p.alignment - 1))) FAIL("alignment %u is not a power of two", p.alignment);
  if (p.memory_total && p.memory_free > p.memory_total)
    FAIL("memory_free %llu > memory_total %llu", (unsigned long long)p.memory_free, (unsigned long long)p.memory_total);
  uint32_t known = OA_DEVICE_FLAG_ASYNC | OA_DEVICE_FLAG_EVENTS | OA_DEVICE_FLAG_TIMING | OA_DEVICE_FLAG_HOST_VISIBLE;
  if (p.flags & ~known) FAIL("unknown flag bits 0x%x", p.flags & ~known);
  if (p.kind == OA_DEVICE_KIND_CPU && !(p.flags & OA_DEVICE_FLAG_HOST_VISIBLE))
    FAIL("a CPU-kind device must set HOST_VISIBLE");
  int has_events = HAS(s, event_create) && HAS(s, event_destroy) && HAS(s, event_record) && HAS(s, event_query) &&
                   HAS(s, event_synchronize) && HAS(s, stream_wait_event);
  if ((p.flags & OA_DEVICE_FLAG_EVENTS) && !has_events)
    FAIL("flag EVENTS is set but an event slot (event_create/destroy/record/query/synchronize, stream_wait_event) is empty");
  if (!(p.flags & OA_DEVICE_FLAG_EVENTS) && HAS(s, event_create))
    FAIL("event slots are filled but flag EVENTS is not set");
  if ((p.flags & OA_DEVICE_FLAG_TIMING) && (!(p.flags & OA_DEVICE_FLAG_EVENTS) || !HAS(s, event_elapsed_ms)))
    FAIL("flag TIMING needs flag EVENTS and the event_elapsed_ms slot");
  if ((p.flags & OA_DEVICE_FLAG_ASYNC) && (!HAS(s, stream_synchronize) || !HAS(s, stream_query) || !HAS(s, synchronize)))
    FAIL("flag ASYNC needs stream_synchronize, stream_query and synchronize (the host must be able to wait)");
  if (HAS(s, stream_create) != HAS(s, stream_destroy)) FAIL("stream_create and stream_destroy must come together");
  if (HAS(s, wrap_memory) != HAS(s, unwrap_memory)) FAIL("wrap_memory and unwrap_memory must come together");
  if (HAS(s, memory_stats) != HAS(s, reset_peak_memory_stats))
    FAIL("memory_stats and reset_peak_memory_stats must come together");
  TRY(oa_device_get_properties(s->dev, &q), "get_properties (second call)");
  q.memory_free = p.memory_free;
  if (memcmp(&p.name, &q.name, sizeof p.name) || strcmp(p.vendor, q.vendor) || strcmp(p.kind_name, q.kind_name) ||
      p.kind != q.kind || p.memory_total != q.memory_total || p.alignment != q.alignment || p.flags != q.flags)
    FAIL("properties changed between two calls");
  set_detail(s, "'%s' by '%s', kind '%s' (%s), alignment %u, memory %llu/%llu bytes free, flags%s%s%s%s", p.name,
             p.vendor, p.kind_name, p.kind == OA_DEVICE_KIND_CPU ? "cpu" : "accelerator", p.alignment,
             (unsigned long long)p.memory_free, (unsigned long long)p.memory_total,
             p.flags & OA_DEVICE_FLAG_ASYNC ? " async" : "", p.flags & OA_DEVICE_FLAG_EVENTS ? " events" : "",
             p.flags & OA_DEVICE_FLAG_TIMING ? " timing" : "", p.flags & OA_DEVICE_FLAG_HOST_VISIBLE ? " host-visible" : "");
done:
  return rc;
}

static int check_queries(suite_t *s) {
  int rc = R_PASS;
  int64_t v = 0;
  uint64_t mask = 0;
  oa_status_t st;
  if (!HAS(s, query_i64)) SKIP("the device has no query_i64 slot");
  static const char *const unknown[][2] = {{"oa_conformance", "no_such_key"}, {"device", "no_such_key_42"},
                                           {"cpu", "no_such_key_42"}, {"", ""}};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    if ((st = oa_device_query_i64(s->dev, unknown[i][0], unknown[i][1], &v)) != OA_ERR_NOT_FOUND)
      FAIL("query '%s.%s': expected NOT_FOUND, received %s", unknown[i][0], unknown[i][1], sn(st));
  static const char *const probe[][2] = {
      {"device", "alignment"}, {"device", "memory_total"}, {"device", "flags"}, {"sim", "compute_units"},
      {"sim", "memory_bytes"}, {"cpu", "arch"}, {"cpu", "neon"}, {"cpu", "fp16"}, {"cpu", "dotprod"},
      {"cpu", "sse4_1"}, {"cpu", "avx"}, {"cpu", "avx2"}, {"cpu", "fma"}, {"cpu", "f16c"}, {"cpu", "avx512f"},
      {"cpu", "cores"}, {"cpu", "l1d_bytes"}, {"cpu", "l2_bytes"}, {"cpu", "l3_bytes"}, {"cpu", "threads"}};
  int answered = 0;
  char list[256] = "";
  size_t ln = 0;
  for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
    int64_t a = 0, b = 0, c = 0;
    st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &a);
    if (st == OA_ERR_NOT_FOUND) continue;
    if (st) FAIL("query '%s.%s': expected OK or NOT_FOUND, received %s", probe[i][0], probe[i][1], sn(st));
    void *tmp = NULL;
    TRY(dev_alloc(s, 4096, 0, &tmp), "allocate between two queries");
    if ((st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &b)) ||
        (st = oa_device_query_i64(s->dev, probe[i][0], probe[i][1], &c)))
      FAIL("query '%s.%s' answered once, then %s", probe[i][0], probe[i][1], sn(st));
    if (a != b || a != c)
      FAIL("query '%s.%s' is not stable: %lld, %lld, %lld", probe[i][0], probe[i][1], (long long)a, (long long)b,
           (long long)c);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "alignment") && a != (int64_t)s->props.alignment)
      FAIL("device.alignment = %lld but properties.alignment = %u", (long long)a, s->props.alignment);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "memory_total") &&
        (uint64_t)a != s->props.memory_total)
      FAIL("device.memory_total = %lld but properties.memory_total = %llu", (long long)a,
           (unsigned long long)s->props.memory_total);
    if (!strcmp(probe[i][0], "device") && !strcmp(probe[i][1], "flags") && (uint64_t)a != s->props.flags)
      FAIL("device.flags = %lld but properties.flags = %u", (long long)a, s->props.flags);
    answered++;
    if (ln + 40 < sizeof list) {
      int w = snprintf(list + ln, sizeof list - ln, "%s%s.%s=%lld", ln ? ", " : "", probe[i][0], probe[i][1], (long long)a);
      if (w > 0) ln += (size_t)w;
    }
  }
  if ((st = oa_device_supports_op(s->dev, "oa_conformance_no_such_op", &mask)) != OA_ERR_NOT_FOUND || mask)
    FAIL("supports_op('oa_conformance_no_such_op'): expected NOT_FOUND and an empty mask, received %s, 0x%llx", sn(st),
         (unsigned long long)mask);
  int claimed = 0;
  for (size_t i = 0; i < N_OPS; i++) {
    uint64_t m1 = 0, m2 = 0;
    oa_status_t s1 = oa_device_supports_op(s->dev, k_ops[i], &m1), s2 = oa_device_supports_op(s->dev, k_ops[i], &m2);
    if (s1 != s2 || m1 != m2) FAIL("supports_op('%s') is not stable", k_ops[i]);
    if (s1 && s1 != OA_ERR_NOT_FOUND) FAIL("supports_op('%s'): expected OK or NOT_FOUND, received %s", k_ops[i], sn(s1));
    if (!s1 && !m1) FAIL("supports_op('%s') is OK with an empty dtype mask", k_ops[i]);
    if (s1 == OA_ERR_NOT_FOUND && m1) FAIL("supports_op('%s') is NOT_FOUND with a dtype mask", k_ops[i]);
    claimed += !s1;
  }
  set_detail(s, "%d keys answered and stable (%s); unknown keys and ops NOT_FOUND; %d ops claimed", answered,
             answered ? list : "none", claimed);
done:
  release_all(s);
  return rc;
}

/* ---- memory ---------------------------------------------------------------------------------------- */

static int check_alloc_alignment(suite_t *s) {
  int rc = R_PASS;
  static const size_t aligns[] = {0, 16, 64, 256, 1024, 4096};
  static const size_t sizes[] = {1, 100, 4099};
  void *ptrs[18];
  size_t lens[18];
  int n = 0;
  for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      void *p = NULL;
      oa_status_t st = dev_alloc(s, sizes[z], aligns[a], &p);
      if (st == OA_ERR_INTERNAL) FAIL("allocate(%zu, %zu) returned OK and NULL", sizes[z], aligns[a]);
      if (st) FAIL("allocate(%zu bytes, alignment %zu) failed: %s", sizes[z], aligns[a], sn(st));
      size_t want = aligns[a] > s->props.alignment ? aligns[a] : s->props.alignment;
      if ((uintptr_t)p % want)
        FAIL("allocate(%zu bytes, alignment %zu) gave %p, which is %zu bytes off a %zu-byte boundary", sizes[z], aligns[a],
             p, (size_t)((uintptr_t)p % want), want);
      ptrs[n] = p;
      lens[n++] = sizes[z];
    }
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      uintptr_t a = (uintptr_t)ptrs[i], b = (uintptr_t)ptrs[j];
      if (a < b + lens[j] && b < a + lens[i]) FAIL("allocations %p (+%zu) and %p (+%zu) overlap", ptrs[i], lens[i], ptrs[j], lens[j]);
    }
  void *bad = NULL;
  oa_status_t rejected = oa_device_allocate(s->dev, 64, 48, &bad), st;
  if (!rejected) {
    (void)oa_device_free(s->dev, bad);
    FAIL("allocate with alignment 48 (not a power of two) succeeded");
  }
  if ((st = oa_device_free(s->dev, NULL))) FAIL("free(NULL) failed: %s", sn(st));
  for (int i = 0; i < n; i++) TRY(dev_free(s, ptrs[i]), "free");
  set_detail(s, "%d allocations (sizes 1..4099, alignments default..4096) aligned to max(alignment, %u) and disjoint; "
             "alignment 48 rejected (%s)", n, s->props.alignment, sn(rejected));
done:
  release_all(s);
  return rc;
}

static int check_alloc_stats(suite_t *s) {
  int rc = R_PASS;
  oa_memory_stats_t s0, s1, s2, s3, s4;
  void *a = NULL, *b = NULL;
  if (!HAS(s, memory_stats)) SKIP("the device has no memory_stats slot");
  const int64_t slack = 2 * 8192; /* a device may account rounded-up sizes */
  TRY(oa_device_memory_stats(s->dev, &s0), "memory_stats");
  if (s0.peak_allocated_bytes < s0.allocated_bytes) FAIL("peak %lld < current %lld", (long long)s0.peak_allocated_bytes, (long long)s0.allocated_bytes);
  TRY(dev_alloc(s, 1000, 0, &a), "allocate 1000");
  TRY(dev_alloc(s, 5000, 0, &b), "allocate 5000");
  TRY(oa_device_memory_stats(s->dev, &s1), "memory_stats");
  int64_t grew = s1.allocated_bytes - s0.allocated_bytes;
  if (grew < 6000 || grew > 6000 + slack)
    FAIL("after allocating 1000 + 5000 bytes, allocated_bytes grew by %lld (expected 6000 to %lld)", (long long)grew,
         (long long)(6000 + slack));
  if (s1.allocation_count != s0.allocation_count + 2)
    FAIL("allocation_count went from %lld to %lld after 2 allocations", (long long)s0.allocation_count,
         (long long)s1.allocation_count);
  if (s1.peak_allocated_bytes < s1.allocated_bytes) FAIL("peak %lld < current %lld", (long long)s1.peak_allocated_bytes, (long long)s1.allocated_bytes);
  TRY(dev_free(s, b), "free");
  b = NULL;
  TRY(oa_device_memory_stats(s->dev, &s2), "memory_stats");
  if (s2.free_count != s1.free_count + 1)
    FAIL("free_count went from %lld to %lld after 1 free", (long long)s1.free_count, (long long)s2.free_count);
  if (s1.allocated_bytes - s2.allocated_bytes < 5000 || s1.allocated_bytes - s2.allocated_bytes > 5000 + slack)
    FAIL("freeing 5000 bytes lowered allocated_bytes by %lld", (long long)(s1.allocated_bytes - s2.allocated_bytes));
  if (s2.peak_allocated_bytes != s1.peak_allocated_bytes)
    FAIL("a free changed the peak from %lld to %lld", (long long)s1.peak_allocated_bytes, (long long)s2.peak_allocated_bytes);
  TRY(oa_device_reset_peak_memory_stats(s->dev), "reset_peak_memory_stats");
  TRY(oa_device_memory_stats(s->dev, &s3), "memory_stats");
  if (s3.peak_allocated_bytes != s3.allocated_bytes)
    FAIL("after reset_peak, peak %lld != current %lld", (long long)s3.peak_allocated_bytes, (long long)s3.allocated_bytes);
  if (s3.allocation_count != s2.allocation_count || s3.free_count != s2.free_count)
    FAIL("reset_peak changed the cumulative counts");
  TRY(dev_free(s, a), "free");
  a = NULL;
  TRY(oa_device_memory_stats(s->dev, &s4), "memory_stats");
  if (s4.allocated_bytes != s0.allocated_bytes)
    FAIL("after freeing everything, allocated_bytes is %lld (was %lld before)", (long long)s4.allocated_bytes,
         (long long)s0.allocated_bytes);
  if (s4.peak_allocated_bytes != s3.peak_allocated_bytes)
    FAIL("a free changed the peak from %lld to %lld", (long long)s3.peak_allocated_bytes, (long long)s4.peak_allocated_bytes);
  set_detail(s, "current/peak/counts follow 2 allocations and 2 frees (+%lld bytes accounted for 6000); reset_peak "
             "sets peak = current", (long long)grew);
done:
  release_all(s);
  return rc;
}

static int check_alloc_limits(suite_t *s) {
  int rc = R_PASS;
  oa_memory_stats_t before, after;
  int stats = HAS(s, memory_stats);
  void *p = NULL;
  if (stats) TRY(oa_device_memory_stats(s->dev, &before), "memory_stats");
  char note[160] = "";
  uint64_t total = s->props.memory_total;
  int probed_total = total && total < (uint64_t)SIZE_MAX / 2;
  if (probed_total) {
    size_t req = (size_t)total * 2;
    oa_status_t st = oa_device_allocate(s->dev, req, 0, &p);
    if (!st) {
      (void)oa_device_free(s->dev, p);
      p = NULL;
      if (!(s->props.flags & OA_DEVICE_FLAG_HOST_VISIBLE))
        FAIL("allocate(%zu bytes = 2 x memory_total) succeeded", req);
      snprintf(note, sizeof note, "; 2 x memory_total succeeded (the host OS overcommits)");
    } else if (st != OA_ERR_OUT_OF_MEMORY) {
      FAIL("allocate(%zu bytes = 2 x memory_total): expected OUT_OF_MEMORY, received %s", req, sn(st));
    }
  }
  size_t huge = SIZE_MAX / 2 + 1;
  oa_status_t st = oa_device_allocate(s->dev, huge, 0, &p);
  if (!st) {
    (void)oa_device_free(s->dev, p);
    FAIL("allocate(%zu bytes) succeeded", huge);
  }
  if (st != OA_ERR_OUT_OF_MEMORY) FAIL("allocate(SIZE_MAX/2 + 1): expected OUT_OF_MEMORY, received %s", sn(st));
  st = oa_device_allocate(s->dev, SIZE_MAX, 0, &p);
  if (!st) {
    (void)oa_device_free(s->dev, p);
    FAIL("allocate(SIZE_MAX) succeeded");
  }
  if (st != OA_ERR_OUT_OF_MEMORY) FAIL("allocate(SIZE_MAX): expected OUT_OF_MEMORY, received %s", sn(st));
  if (stats) {
    TRY(oa_device_memory_stats(s->dev, &after), "memory_stats");
    if (after.allocated_bytes != before.allocated_bytes || after.allocation_count != before.allocation_count +
        (note[0] ? 1 : 0))
      FAIL("failed allocations changed the stats (allocated %lld -> %lld, count %lld -> %lld)",
           (long long)before.allocated_bytes, (long long)after.allocated_bytes, (long long)before.allocation_count,
           (long long)after.allocation_count);
  }
  TRY(dev_alloc(s, 4096, 0, &p), "allocate 4096 bytes after the failed requests");
  set_detail(s, "requests beyond the device's memory fail with OUT_OF_MEMORY%s%s; the device still allocates afterwards",
             probed_total ? " (2 x memory_total, SIZE_MAX/2+1, SIZE_MAX)"
                          : total ? " (SIZE_MAX/2+1, SIZE_MAX; memory_total exceeds the address space)"
                                  : " (SIZE_MAX/2+1, SIZE_MAX; memory_total unknown)",
             note);
done:
  release_all(s);
  return rc;
}

/* ---- copies ------------------------------------------------------------------------------------------- */

static int check_copy_roundtrip(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "copy.roundtrip");
  static const size_t sizes[] = {1, 13, 4096, 65536 + 7, 1 << 20};
  oa_stream_t *streams[2] = {NULL, NULL};
  TRY(new_stream(s, &streams[1]), "stream_create");
  int n_streams = streams[1] ? 2 : 1;
  size_t tested = 0;
  for (int k = 0; k < n_streams; k++) {
    oa_stream_t *st = streams[k];
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      size_t n = sizes[z];
      uint8_t *src = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n), *model = (uint8_t *)host_alloc(s, n);
      void *a = NULL, *b = NULL;
      if (!src || !out || !model) FAIL("out of host memory");
      fill_bytes(&r, src, n);
      memset(out, 0, n);
      TRY(dev_alloc(s, n, 0, &a), "allocate");
      TRY(dev_alloc(s, n, 0, &b), "allocate");
      TRY(h2d(s, st, a, src, n), "copy host to device");
      TRY(sync_stream(s, st), "stream_synchronize after the host-to-device copy");
      TRY(d2d(s, st, b, a, n), "copy device to device");
      TRY(sync_stream(s, st), "stream_synchronize after the device-to-device copy");
      TRY(d2h(s, st, out, b, n), "copy device to host");
      TRY(sync_stream(s, st), "stream_synchronize after the device-to-host copy");
      for (size_t i = 0; i < n; i++)
        if (out[i] != src[i])
          FAIL("%s stream, %zu bytes: H2D -> D2D -> D2H changed byte %zu (0x%02x -> 0x%02x)", k ? "a new" : "the default",
               n, i, src[i], out[i]);
      if (n >= 16) { /* sub-ranges at offsets: device address arithmetic */
        size_t len = n - 8;
        memcpy(model, src, n);
        memmove(model + 5, src + 3, len);
        TRY(d2d(s, st, dptr_add(b, 5), dptr_add(a, 3), len), "copy device to device at offsets");
        TRY(sync_stream(s, st), "stream_synchronize");
        TRY(d2h(s, st, out, b, n), "copy device to host");
        TRY(sync_stream(s, st), "stream_synchronize");
        for (size_t i = 0; i < n; i++)
          if (out[i] != model[i]) FAIL("%zu bytes: D2D of %zu bytes from offset 3 to offset 5 wrong at byte %zu", n, len, i);
        memset(out, 0, n);
        TRY(d2h(s, st, out + 2, dptr_add(a, 1), n - 3), "copy device to host from an offset");
        TRY(sync_stream(s, st), "stream_synchronize");
        for (size_t i = 0; i < n - 3; i++)
          if (out[i + 2] != src[i + 1]) FAIL("%zu bytes: D2H from offset 1 wrong at byte %zu", n, i);
      }
      TRY(h2d(s, st, a, src, 0), "a zero-byte copy");
      tested += n;
      TRY(dev_free(s, a), "free");
      TRY(dev_free(s, b), "free");
    }
  }
  set_detail(s, "H2D -> D2D -> D2H exact for 1 B .. 1 MiB on %s, incl. copies at offsets; zero-byte copy OK",
             n_streams == 2 ? "the default and a new stream" : "the default stream");
done:
  release_all(s);
  return rc;
}

static int check_copy_wrap(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "copy.wrap");
  oa_memory_stats_t before, after;
  int stats = HAS(s, memory_stats);
  if (!HAS(s, wrap_memory)) SKIP("the device has no wrap_memory slot");
  const size_t n = 10000;
  uint8_t *src = (uint8_t *)host_alloc(s, n), *keep = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n);
  void *w = NULL, *d = NULL;
  if (!src || !keep || !out) FAIL("out of host memory");
  fill_bytes(&r, src, n);
  memcpy(keep, src, n);
  if (stats) TRY(oa_device_memory_stats(s->dev, &before), "memory_stats");
  TRY(oa_device_wrap_memory(s->dev, src, n, &w), "wrap_memory");
  if (!w) FAIL("wrap_memory returned OK and NULL");
  track(s, RES_WRAPPED, w);
  TRY(d2h(s, NULL, out, w, n), "copy from wrapped memory to host");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  for (size_t i = 0; i < n; i++)
    if (out[i] != keep[i]) FAIL("wrapped memory read back wrong at byte %zu", i);
  TRY(dev_alloc(s, n, 0, &d), "allocate");
  TRY(d2d(s, NULL, d, dptr_add(w, 17), n - 17), "copy from wrapped memory (offset 17) to device memory");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  memset(out, 0, n);
  TRY(d2h(s, NULL, out, d, n - 17), "copy device to host");
  TRY(sync_stream(s, NULL), "stream_synchronize");
  for (size_t i = 0; i < n - 17; i++)
    if (out[i] != keep[i + 17]) FAIL("D2D from wrapped memory wrong at byte %zu", i);
  if (memcmp(src, keep, n)) FAIL("wrapping changed the host bytes");
  untrack(s, w);
  TRY(oa_device_unwrap_memory(s->dev, w), "unwrap_memory");
  TRY(dev_free(s, d), "free");
  if (stats) {
    TRY(oa_device_memory_stats(s->dev, &after), "memory_stats");
    if (after.allocated_bytes != before.allocated_bytes)
      FAIL("after unwrap and free, allocated_bytes is %lld (was %lld)", (long long)after.allocated_bytes,
           (long long)before.allocated_bytes);
  }
  set_detail(s, "%zu wrapped host bytes read back through D2H and D2D (at an offset); unwrap releases them", n);
done:
  release_all(s);
  return rc;
}

/* ---- streams ------------------------------------------------------------------------------------------- */

/* Prepare an op call on the device under test over device buffers (float32 1-D tensors). */
static oa_status_t prep_simple(suite_t *s, const char *op, oa_tensor_t *ts, uint32_t n_in, oa_op_call_t *call,
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

static void f32_tensor(oa_tensor_t *t, void *data, int64_t n, const char *name) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->ndim = 1;
  t->shape[0] = n;
  t->dtype = OA_DTYPE_FLOAT32;
  t->numel = n;
  t->nbytes = (size_t)n * sizeof(float);
  t->name = name;
}

static int claims_f32(suite_t *s, const char *op) {
  uint64_t m = 0;
  return oa_device_supports_op(s->dev, op, &m) == OA_OK && (m & OA_DTYPE_BIT(OA_DTYPE_FLOAT32));
}

enum { ORD_NB = 4, ORD_BUF = 64 * 1024, ORD_STEPS = 256, ORD_PATS = 8, ORD_SNAPS = 64 };
enum { ORDB_NF = 1024, ORDB_STEPS = 96 }; /* ORDB_STEPS <= ORD_STEPS: phase B reuses the step array */

typedef struct ord_step {
  int kind; /* 0 H2D, 1 D2D, 2 D2H, 3 relu, 4 add */
  int a, b, c, p;
  size_t off_a, off_b, len;
} ord_step_t;

static int check_stream_ordering(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "stream.ordering");
  oa_stream_t *st = NULL;
  void *buf[ORD_NB];
  uint8_t *pats = NULL, *model = NULL, *snaps = NULL, *msnaps = NULL, *out = NULL;
  ord_step_t *steps = NULL;
  int n_snap = 0;
  TRY(new_stream(s, &st), "stream_create");
  pats = (uint8_t *)host_alloc(s, (size_t)ORD_PATS * ORD_BUF);
  model = (uint8_t *)host_alloc(s, (size_t)ORD_NB * ORD_BUF);
  snaps = (uint8_t *)host_alloc(s, (size_t)ORD_SNAPS * ORD_BUF);
  msnaps = (uint8_t *)host_alloc(s, (size_t)ORD_SNAPS * ORD_BUF);
  out = (uint8_t *)host_alloc(s, ORD_BUF);
  steps = (ord_step_t *)host_alloc(s, sizeof(ord_step_t) * ORD_STEPS);
  if (!pats || !model || !snaps || !msnaps || !out || !steps) FAIL("out of host memory");
  fill_bytes(&r, pats, (size_t)ORD_PATS * ORD_BUF);
  for (int i = 0; i < ORD_NB; i++) TRY(dev_alloc(s, ORD_BUF, 0, &buf[i]), "allocate");
  /* phase A: a random chain of copies on one stream, no synchronization, against a host model */
  for (int i = 0; i < ORD_NB; i++) {
    memcpy(model + (size_t)i * ORD_BUF, pats + (size_t)i * ORD_BUF, ORD_BUF);
    TRY(h2d(s, st, buf[i], pats + (size_t)i * ORD_BUF, ORD_BUF), "copy host to device");
  }
  for (int k = 0; k < ORD_STEPS; k++) {
    ord_step_t *q = &steps[k];
    uint32_t pick = rng_below(&r, 10);
    q->a = (int)rng_below(&r, ORD_NB);
    q->b = (q->a + 1 + (int)rng_below(&r, ORD_NB - 1)) % ORD_NB;
    q->p = (int)rng_below(&r, ORD_PATS);
    q->len = 1 + rng_below(&r, ORD_BUF);
    q->off_a = rng_below(&r, (uint32_t)(ORD_BUF - q->len + 1));
    q->off_b = rng_below(&r, (uint32_t)(ORD_BUF - q->len + 1));
    q->kind = pick < 3 ? 0 : pick < 7 ? 1 : (n_snap < ORD_SNAPS ? 2 : 1);
    uint8_t *ma = model + (size_t)q->a * ORD_BUF, *mb = model + (size_t)q->b * ORD_BUF;
    oa_status_t e;
    if (q->kind == 0) { /* buf[a][off_a..] <- pattern p [off_b..] */
      memcpy(ma + q->off_a, pats + (size_t)q->p * ORD_BUF + q->off_b, q->len);
      e = h2d(s, st, dptr_add(buf[q->a], q->off_a), pats + (size_t)q->p * ORD_BUF + q->off_b, q->len);
    } else if (q->kind == 1) { /* buf[b][off_b..] <- buf[a][off_a..] */
      memmove(mb + q->off_b, ma + q->off_a, q->len);
      e = d2d(s, st, dptr_add(buf[q->b], q->off_b), dptr_add(buf[q->a], q->off_a), q->len);
    } else { /* snapshot of buf[a] */
      memcpy(msnaps + (size_t)n_snap * ORD_BUF, ma, ORD_BUF);
      e = d2h(s, st, snaps + (size_t)n_snap * ORD_BUF, buf[q->a], ORD_BUF);
      q->c = n_snap++;
    }
    if (e) FAIL("phase A step %d: copy failed: %s", k, sn(e));
  }
  TRY(sync_stream(s, st), "stream_synchronize after phase A");
  if (HAS(s, stream_query)) {
    oa_status_t q = oa_stream_query(s->dev, st);
    if (q) FAIL("stream_query after stream_synchronize: expected OK, received %s", sn(q));
  }
  for (int k = 0; k < ORD_STEPS; k++) {
    if (steps[k].kind != 2) continue;
    int c = steps[k].c;
    if (memcmp(snaps + (size_t)c * ORD_BUF, msnaps + (size_t)c * ORD_BUF, ORD_BUF)) {
      size_t at = 0;
      while (snaps[(size_t)c * ORD_BUF + at] == msnaps[(size_t)c * ORD_BUF + at]) at++;
      FAIL("phase A: the device-to-host copy of step %d (of %d queued commands) read data from a different point of "
           "the stream (first wrong byte %zu): commands ran out of order", k, ORD_STEPS, at);
    }
  }
  for (int i = 0; i < ORD_NB; i++) {
    TRY(d2h(s, st, out, buf[i], ORD_BUF), "copy device to host");
    TRY(sync_stream(s, st), "stream_synchronize");
    if (memcmp(out, model + (size_t)i * ORD_BUF, ORD_BUF)) FAIL("phase A: buffer %d ends with the wrong bytes", i);
  }
  /* phase B: copies and ops, queued at once vs one at a time with a synchronize after each */
  int relu = claims_f32(s, "relu"), add = claims_f32(s, "add");
  char phase_b[128] = "phase B skipped (the device claims neither relu nor add for float32)";
  if (relu || add) {
    float *fp = (float *)(void *)pats; /* ORD_PATS * ORD_BUF bytes of random floats */
    for (size_t i = 0; i < (size_t)ORD_PATS * ORD_BUF / sizeof(float); i++) fp[i] = rng_float(&r) * 4.0f;
    int n_b = 0;
    for (int k = 0; k < ORDB_STEPS; k++) {
      ord_step_t *q = &steps[k];
      uint32_t pick = rng_below(&r, 10);
      q->a = (int)rng_below(&r, ORD_NB);
      q->b = (q->a + 1 + (int)rng_below(&r, ORD_NB - 1)) % ORD_NB;
      q->c = q->b;
      while (q->c == q->a || q->c == q->b) q->c = (int)rng_below(&r, ORD_NB);
      q->p = (int)rng_below(&r, (uint32_t)((size_t)ORD_PATS * ORD_BUF / (ORDB_NF * sizeof(float))));
      q->kind = pick < 2 ? 0 : pick < 4 ? 1 : pick < 6 ? 2 : (pick < 8 ? (relu ? 3 : 4) : (add ? 4 : 3));
      if (q->kind == 2 && n_b >= ORD_SNAPS) q->kind = 1;
      if (q->kind == 2) n_b++;
    }
    uint8_t *snap_run[2] = {snaps, msnaps};
    uint8_t *final_run[2] = {model, model + (size_t)2 * ORD_BUF};
    const size_t nbytes = ORDB_NF * sizeof(float);
    /* one call per step, alive until the stream has drained: a device may keep the pointers (the
     * executor's calls live as long as the method) */
    typedef struct step_call {
      oa_tensor_t ts[3];
      oa_tensor_t *ptrs[3];
      oa_op_call_t call;
      oa_op_plan_t plan;
    } step_call_t;
    step_call_t *calls = (step_call_t *)host_alloc(s, sizeof(step_call_t) * ORDB_STEPS);
    if (!calls) FAIL("out of host memory");
    static const double alpha = -0.5;
    for (int run = 0; run < 2; run++) { /* run 0: synchronize after every step; run 1: queue everything */
      int snap = 0;
      for (int i = 0; i < ORD_NB; i++) TRY(h2d(s, st, buf[i], fp + (size_t)i * ORDB_NF, nbytes), "copy host to device");
      TRY(sync_stream(s, st), "stream_synchronize");
      for (int k = 0; k < ORDB_STEPS; k++) {
        const ord_step_t *q = &steps[k];
        oa_status_t e = OA_OK;
        if (q->kind == 0) {
          e = h2d(s, st, buf[q->a], fp + (size_t)q->p * ORDB_NF, nbytes);
        } else if (q->kind == 1) {
          e = d2d(s, st, buf[q->b], buf[q->a], nbytes);
        } else if (q->kind == 2) {
          e = d2h(s, st, snap_run[run] + (size_t)snap++ * nbytes, buf[q->a], nbytes);
        } else if (q->kind == 3) {
          step_call_t *sc = &calls[k];
          f32_tensor(&sc->ts[0], buf[q->a], ORDB_NF, "x");
          f32_tensor(&sc->ts[1], buf[q->b], ORDB_NF, "y");
          if ((e = prep_simple(s, "relu", sc->ts, 1, &sc->call, sc->ptrs, &sc->plan, NULL, 0)))
            FAIL("prepare relu: %s", sn(e));
          e = oa_device_execute_op(s->dev, st, &sc->call, &sc->plan, NULL, NULL);
        } else {
          step_call_t *sc = &calls[k];
          f32_tensor(&sc->ts[0], buf[q->a], ORDB_NF, "a");
          f32_tensor(&sc->ts[1], buf[q->b], ORDB_NF, "b");
          f32_tensor(&sc->ts[2], buf[q->c], ORDB_NF, "y");
          if ((e = prep_simple(s, "add", sc->ts, 2, &sc->call, sc->ptrs, &sc->plan, &alpha, 1)))
            FAIL("prepare add: %s", sn(e));
          e = oa_device_execute_op(s->dev, st, &sc->call, &sc->plan, NULL, NULL);
        }
        if (e) FAIL("phase B step %d failed: %s", k, sn(e));
        if (run == 0) TRY(sync_stream(s, st), "stream_synchronize");
      }
      TRY(sync_stream(s, st), "stream_synchronize");
      for (int i = 0; i < ORD_NB; i++)
        TRY(d2h(s, st, final_run[run] + (size_t)i * nbytes, buf[i], nbytes), "copy device to host");
      TRY(sync_stream(s, st), "stream_synchronize");
    }
    if (memcmp(snaps, msnaps, (size_t)n_b * nbytes)) {
      size_t at = 0;
      while (snaps[at] == msnaps[at]) at++;
      FAIL("phase B: %d queued copies and ops gave different results from the same commands run one at a time "
           "(snapshot %zu differs): commands ran out of order", ORDB_STEPS, at / nbytes);
    }
    if (memcmp(final_run[0], final_run[1], (size_t)ORD_NB * nbytes))
      FAIL("phase B: buffers end differently when %d copies and ops are queued at once: commands ran out of order",
           ORDB_STEPS);
    snprintf(phase_b, sizeof phase_b, "phase B: %d copies and%s%s queued at once = one at a time", ORDB_STEPS,
             relu ? " relu" : "", add ? (relu ? "/add" : " add") : "");
  }
  set_detail(s, "phase A: %d queued copies (%d read-backs) match a host model; %s", ORD_STEPS, n_snap, phase_b);
done:
  release_all(s);
  return rc;
}

/* ---- events ---------------------------------------------------------------------------------------------- */

static int check_event_record_query(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *e = NULL, *never = NULL;
  oa_status_t q;
  void *d = NULL;
  uint8_t *h = NULL;
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  TRY(new_event(s, 0, &never), "event_create");
  if ((q = oa_event_query(s->dev, e))) FAIL("query of a never-recorded event: expected OK (complete), received %s", sn(q));
  if ((q = oa_event_synchronize(s->dev, e, 0))) FAIL("synchronize(never-recorded event, 0 ns): expected OK, received %s", sn(q));
  if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
    FAIL("synchronize(never-recorded event): expected OK, received %s", sn(q));
  const size_t n = 1 << 20;
  h = (uint8_t *)host_alloc(s, n);
  if (!h) FAIL("out of host memory");
  memset(h, 7, n);
  TRY(dev_alloc(s, n, 0, &d), "allocate");
  for (int round = 0; round < 3; round++) {
    oa_stream_t *where = round == 1 ? NULL : st;
    TRY(h2d(s, where, d, h, n), "copy host to device");
    TRY(oa_event_record(s->dev, e, where), "event_record");
    q = oa_event_query(s->dev, e);
    if (q && q != OA_ERR_NOT_READY) FAIL("query of a recorded event: expected OK or NOT_READY, received %s", sn(q));
    if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
      FAIL("synchronize(recorded event%s): expected OK, received %s", round == 1 ? ", default stream" : "", sn(q));
    if ((q = oa_event_query(s->dev, e))) FAIL("query after synchronize: expected OK, received %s", sn(q));
  }
  if ((q = oa_stream_wait_event(s->dev, st, never))) FAIL("stream_wait_event(never-recorded event): received %s", sn(q));
  TRY(h2d(s, st, d, h, 64), "copy host to device");
  if ((q = sync_stream(s, st))) FAIL("a stream waiting for a never-recorded event: synchronize gave %s", sn(q));
  set_detail(s, "never-recorded = complete (query, synchronize, stream wait); recorded on a new and the default stream "
             "and re-recorded: NOT_READY/OK, then OK after synchronize");
done:
  release_all(s);
  return rc;
}

/* Queue `count` device-to-device copies of `n` bytes between two buffers. */
static oa_status_t busy_work(suite_t *s, oa_stream_t *st, void *a, void *b, size_t n, int count) {
  for (int i = 0; i < count; i++) {
    oa_status_t e = d2d(s, st, (i & 1) ? a : b, (i & 1) ? b : a, n);
    if (e) return e;
  }
  return OA_OK;
}

static size_t busy_size(const suite_t *s) {
  size_t n = (size_t)8 << 20;
  if (s->props.memory_total && s->props.memory_total / 8 < n) n = (size_t)(s->props.memory_total / 8) & ~(size_t)4095;
  return n ? n : 4096;
}

static int check_event_host_wait_timeout(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *e = NULL;
  void *a = NULL, *b = NULL;
  if (!(s->props.flags & OA_DEVICE_FLAG_ASYNC)) SKIP("synchronous device: work is complete when it is issued");
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  size_t n = busy_size(s);
  TRY(dev_alloc(s, n, 0, &a), "allocate");
  TRY(dev_alloc(s, n, 0, &b), "allocate");
  int count = 16;
  for (int attempt = 1; attempt <= 3; attempt++, count *= 4) {
    TRY(busy_work(s, st, a, b, n, count), "copy device to device");
    TRY(oa_event_record(s->dev, e, st), "event_record");
    uint64_t t0 = oa_platform_now_ns();
    oa_status_t q = oa_event_synchronize(s->dev, e, 1000000);
    double waited = (double)(oa_platform_now_ns() - t0) / 1e6;
    if (q == OA_ERR_TIMEOUT) {
      oa_status_t sq = oa_stream_query(s->dev, st), eq = oa_event_query(s->dev, e);
      if (sq && sq != OA_ERR_NOT_READY) FAIL("stream_query while busy: expected OK or NOT_READY, received %s", sn(sq));
      if (eq && eq != OA_ERR_NOT_READY) FAIL("event_query while busy: expected OK or NOT_READY, received %s", sn(eq));
      if (waited < 0.5 || waited > 1000.0)
        FAIL("a 1 ms wait returned TIMEOUT after %.3f ms", waited);
      if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
        FAIL("synchronize after the time-out: expected OK, received %s", sn(q));
      if ((q = oa_event_query(s->dev, e))) FAIL("query after synchronize: expected OK, received %s", sn(q));
      set_detail(s, "1 ms wait on %d queued copies of %zu bytes returned TIMEOUT after %.2f ms (attempt %d); the "
                 "infinite wait then OK", count, n, waited, attempt);
      goto done;
    }
    if (q) FAIL("synchronize(event, 1 ms): expected TIMEOUT or OK, received %s", sn(q));
    TRY(sync_stream(s, st), "stream_synchronize");
  }
  FAIL("a 1 ms wait never timed out, even with %d queued copies of %zu bytes", count / 4, n);
done:
  release_all(s);
  return rc;
}

static int check_event_elapsed(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *t0 = NULL, *t1 = NULL, *plain = NULL, *unrec = NULL;
  void *a = NULL, *b = NULL;
  float ms = -1.0f;
  oa_status_t q;
  if (!(s->props.flags & OA_DEVICE_FLAG_TIMING)) SKIP("the device does not claim TIMING");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, OA_EVENT_TIMING, &t0), "event_create(TIMING)");
  TRY(new_event(s, OA_EVENT_TIMING, &t1), "event_create(TIMING)");
  TRY(new_event(s, 0, &plain), "event_create");
  TRY(new_event(s, OA_EVENT_TIMING, &unrec), "event_create(TIMING)");
  size_t n = busy_size(s) / 4;
  TRY(dev_alloc(s, n, 0, &a), "allocate");
  TRY(dev_alloc(s, n, 0, &b), "allocate");
  uint64_t h0 = oa_platform_now_ns();
  TRY(oa_event_record(s->dev, t0, st), "event_record");
  TRY(busy_work(s, st, a, b, n, 8), "copy device to device");
  TRY(oa_event_record(s->dev, t1, st), "event_record");
  TRY(oa_event_record(s->dev, plain, st), "event_record");
  TRY(oa_event_synchronize(s->dev, t1, OA_TIMEOUT_INFINITE), "event_synchronize");
  TRY(oa_event_synchronize(s->dev, plain, OA_TIMEOUT_INFINITE), "event_synchronize");
  double host_ms = (double)(oa_platform_now_ns() - h0) / 1e6;
  if ((q = oa_event_elapsed_ms(s->dev, t0, t1, &ms))) FAIL("elapsed_ms(start, end): expected OK, received %s", sn(q));
  if (!(ms >= 0.0f) || !isfinite(ms) || (double)ms > host_ms + 50.0)
    FAIL("elapsed_ms = %g for work the host saw take %.3f ms", (double)ms, host_ms);
  float junk = 0.0f;
  if (!(q = oa_event_elapsed_ms(s->dev, t0, plain, &junk)))
    FAIL("elapsed_ms with an event created without OA_EVENT_TIMING succeeded (%g ms)", (double)junk);
  oa_status_t q2 = oa_event_elapsed_ms(s->dev, t0, unrec, &junk);
  if (!q2) FAIL("elapsed_ms with a never-recorded end event succeeded (%g ms)", (double)junk);
  set_detail(s, "elapsed %.3f ms for 8 copies of %zu bytes (host saw %.3f ms); without the timing flag: %s; "
             "never recorded: %s", (double)ms, n, host_ms, sn(q), sn(q2));
done:
  release_all(s);
  return rc;
}

static int check_event_cross_stream_wait(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *sa = NULL, *sb = NULL;
  oa_event_t *e = NULL, *never = NULL;
  void *x = NULL, *y = NULL, *b1 = NULL, *b2 = NULL, *p1 = NULL, *p2 = NULL;
  rng_t r = rng_for(s, "event.cross_stream_wait");
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  if (!HAS(s, stream_create)) SKIP("the device cannot create streams");
  TRY(new_stream(s, &sa), "stream_create");
  TRY(new_stream(s, &sb), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  TRY(new_event(s, 0, &never), "event_create");
  const size_t n = 256 * 1024;
  uint8_t *v0 = (uint8_t *)host_alloc(s, n), *v1 = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n);
  if (!v0 || !v1 || !out) FAIL("out of host memory");
  fill_bytes(&r, v0, n);
  fill_bytes(&r, v1, n);
  size_t busy = busy_size(s);
  TRY(dev_alloc(s, n, 0, &x), "allocate");
  TRY(dev_alloc(s, n, 0, &y), "allocate");
  TRY(dev_alloc(s, busy, 0, &b1), "allocate");
  TRY(dev_alloc(s, busy, 0, &b2), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p1), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p2), "allocate");
  for (int round = 0; round < 2; round++) {
    TRY(h2d(s, sa, x, v0, n), "copy host to device");
    TRY(sync_stream(s, sa), "stream_synchronize");
    /* stream A: keep busy, then write x, then record e (an independent copy in between) */
    TRY(busy_work(s, sa, b1, b2, busy, round ? 16 : 4), "copy device to device");
    TRY(h2d(s, sa, x, v1, n), "copy host to device");
    TRY(d2d(s, sa, p1, p2, 4096), "copy device to device");
    TRY(oa_event_record(s->dev, e, sa), "event_record");
    /* stream B: wait for e, then read x */
    TRY(oa_stream_wait_event(s->dev, sb, e), "stream_wait_event");
    TRY(d2d(s, sb, p2, p1, 4096), "copy device to device");
    TRY(d2d(s, sb, y, x, n), "copy device to device");
    TRY(sync_stream(s, sb), "stream_synchronize(B)");
    TRY(d2h(s, sb, out, y, n), "copy device to host");
    TRY(sync_stream(s, sb), "stream_synchronize(B)");
    if (memcmp(out, v1, n))
      FAIL("stream B read x before stream A's write that precedes the event it waited for (%s)",
           memcmp(out, v0, n) ? "mixed data" : "old data");
    TRY(sync_stream(s, sa), "stream_synchronize(A)");
  }
  oa_status_t q;
  if ((q = oa_stream_wait_event(s->dev, sb, never))) FAIL("stream_wait_event(never-recorded event): received %s", sn(q));
  if ((q = sync_stream(s, sb))) FAIL("a stream waiting for a never-recorded event: synchronize gave %s", sn(q));
  set_detail(s, "stream B waiting for an event recorded on a busy stream A read A's data (%zu bytes, 2 rounds); a wait "
             "for a never-recorded event does not block", n);
done:
  release_all(s);
  return rc;
}

/* A small valid float32 call the device claims (relu, else add, else linear). */
static int simple_failing_call(suite_t *s, oa_tensor_t *ts, oa_tensor_t **ptrs, oa_op_call_t *call, void *buf) {
  static const double one = 1.0;
  for (int i = 0; i < 3; i++) f32_tensor(&ts[i], buf, 16, "t");
  memset(call, 0, sizeof *call);
  for (int i = 0; i < 3; i++) ptrs[i] = &ts[i];
  call->inputs = ptrs;
  call->outputs = ptrs + 2;
  call->n_outputs = 1;
  if (claims_f32(s, "relu")) {
    call->op = "relu";
    call->n_inputs = 1;
    call->outputs = ptrs + 1;
  } else if (claims_f32(s, "add")) {
    call->op = "add";
    call->n_inputs = 2;
    call->floats = &one;
    call->n_floats = 1;
  } else {
    return 0;
  }
  return 1;
}

/* After a failure on `bad`: the stream, an event recorded on it, and a stream waiting for that
 * event all report a failure. */
static int verify_poisoned(suite_t *s, oa_stream_t *bad, const char *how, void *p1, void *p2, char *note, size_t note_n) {
  int rc = R_PASS;
  oa_stream_t *other = NULL;
  oa_event_t *e = NULL, *e2 = NULL, *e3 = NULL;
  oa_status_t q, qs, qe, qw;
  if ((qs = oa_stream_synchronize(s->dev, bad)) == OA_OK) FAIL("%s: stream_synchronize afterwards returned OK", how);
  if (qs == OA_ERR_NOT_READY || qs == OA_ERR_TIMEOUT) FAIL("%s: stream_synchronize returned %s", how, sn(qs));
  TRY(new_event(s, 0, &e), "event_create");
  TRY(oa_event_record(s->dev, e, bad), "event_record");
  qe = oa_event_synchronize(s->dev, e, (uint64_t)30 * 1000000000u);
  if (qe == OA_OK) FAIL("%s: an event recorded on the stream afterwards reports OK (the failure was forgotten)", how);
  if (qe == OA_ERR_TIMEOUT) FAIL("%s: an event recorded afterwards never completed", how);
  if ((q = oa_event_query(s->dev, e)) != qe) FAIL("%s: event_query %s != event_synchronize %s", how, sn(q), sn(qe));
  /* a later valid copy does not clear it */
  (void)d2d(s, bad, p1, p2, 64);
  TRY(new_event(s, 0, &e3), "event_create");
  TRY(oa_event_record(s->dev, e3, bad), "event_record");
  if (oa_event_synchronize(s->dev, e3, (uint64_t)30 * 1000000000u) == OA_OK)
    FAIL("%s: an event recorded after further work reports OK (the failure is not sticky)", how);
  /* another stream waiting for the event fails too */
  TRY(new_stream(s, &other), "stream_create");
  TRY(new_event(s, 0, &e2), "event_create");
  TRY(oa_stream_wait_event(s->dev, other, e), "stream_wait_event");
  (void)d2d(s, other, p2, p1, 64); /* may already report the failure */
  TRY(oa_event_record(s->dev, e2, other), "event_record");
  qw = oa_event_synchronize(s->dev, e2, (uint64_t)30 * 1000000000u);
  if (qw == OA_OK) FAIL("%s: a stream waiting for the failed event reports OK", how);
  if ((q = oa_stream_synchronize(s->dev, other)) == OA_OK) FAIL("%s: the waiting stream synchronizes OK", how);
  snprintf(note, note_n, "%s: stream %s, event %s, waiting stream %s", how, sn(qs), sn(qe), sn(qw));
done:
  return rc;
}

static int check_event_sticky_failure(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  void *buf = NULL, *p1 = NULL, *p2 = NULL;
  char note1[256] = "", note2[256] = "";
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  if (!HAS(s, stream_create)) SKIP("the device cannot create streams (failing the default stream would poison it)");
  TRY(dev_alloc(s, 4096, 0, &buf), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p1), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p2), "allocate");
  int variants = 0;
  /* 1: execute_op with a plan the device never prepared (a zeroed plan) */
  oa_tensor_t ts[3];
  oa_tensor_t *ptrs[3];
  oa_op_call_t call;
  if (simple_failing_call(s, ts, ptrs, &call, buf)) {
    oa_op_plan_t zero;
    oa_diag_t diag;
    memset(&zero, 0, sizeof zero);
    oa_diag_clear(&diag);
    TRY(new_stream(s, &st), "stream_create");
    oa_status_t q = oa_device_execute_op(s->dev, st, &call, &zero, NULL, &diag);
    char how[160];
    snprintf(how, sizeof how, "unprepared %s (execute returned %s)", call.op, sn(q));
    if ((rc = verify_poisoned(s, st, how, p1, p2, note1, sizeof note1)) != R_PASS) goto done;
    variants++;
  }
  /* 2: a copy from an address the device never handed out (devices whose memory the host cannot
   * address must range-check it) */
  if (!(s->props.flags & OA_DEVICE_FLAG_HOST_VISIBLE)) {
    uint64_t total = s->props.memory_total ? s->props.memory_total : ((uint64_t)1 << 32);
    void *bogus = (void *)((uintptr_t)p2 + (uintptr_t)(total * 2 + 4096));
    oa_stream_t *st2 = NULL;
    TRY(new_stream(s, &st2), "stream_create");
    oa_status_t q = d2d(s, st2, p1, bogus, 64);
    char how[160];
    snprintf(how, sizeof how, "copy from an address never handed out (copy returned %s)", sn(q));
    if ((rc = verify_poisoned(s, st2, how, p1, p2, note2, sizeof note2)) != R_PASS) goto done;
    variants++;
  }
  if (!variants) SKIP("no way to provoke a failure: the device claims neither relu nor add and its memory is host-visible");
  set_detail(s, "%s%s%s", note1, note1[0] && note2[0] ? "; " : "", note2);
done:
  release_all(s);
  return rc;
}

static int check_device_synchronize(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *sa = NULL, *sb = NULL;
  oa_event_t *ea = NULL, *eb = NULL;
  void *d[3] = {NULL, NULL, NULL};
  rng_t r = rng_for(s, "device.synchronize");
  oa_status_t q;
  if (!HAS(s, synchronize)) {
    if (s->props.flags & OA_DEVICE_FLAG_ASYNC) FAIL("an ASYNC device without a synchronize slot");
    SKIP("the device has no synchronize slot");
  }
  const size_t n = 1 << 20;
  uint8_t *h[3], *out = (uint8_t *)host_alloc(s, n);
  for (int i = 0; i < 3; i++) {
    h[i] = (uint8_t *)host_alloc(s, n);
    if (!h[i]) FAIL("out of host memory");
    fill_bytes(&r, h[i], n);
    TRY(dev_alloc(s, n, 0, &d[i]), "allocate");
  }
  if (!out) FAIL("out of host memory");
  TRY(new_stream(s, &sa), "stream_create");
  TRY(new_stream(s, &sb), "stream_create");
  int events = (s->props.flags & OA_DEVICE_FLAG_EVENTS) != 0;
  if (events) {
    TRY(new_event(s, 0, &ea), "event_create");
    TRY(new_event(s, 0, &eb), "event_create");
  }
  oa_stream_t *where[3] = {sa, sb, NULL};
  for (int i = 0; i < 3; i++) TRY(h2d(s, where[i], d[i], h[i], n), "copy host to device");
  if (events) {
    TRY(oa_event_record(s->dev, ea, sa), "event_record");
    TRY(oa_event_record(s->dev, eb, sb), "event_record");
  }
  if ((q = oa_device_synchronize(s->dev))) FAIL("synchronize: expected OK, received %s", sn(q));
  if (HAS(s, stream_query)) {
    for (int i = 0; i < 3; i++)
      if ((q = oa_stream_query(s->dev, where[i]))) FAIL("stream_query after synchronize: expected OK, received %s", sn(q));
  }
  if (events) {
    if ((q = oa_event_query(s->dev, ea)) || (q = oa_event_query(s->dev, eb)))
      FAIL("event_query after synchronize: expected OK, received %s", sn(q));
  }
  for (int i = 0; i < 3; i++) {
    TRY(d2h(s, where[i], out, d[i], n), "copy device to host");
    TRY(sync_stream(s, where[i]), "stream_synchronize");
    if (memcmp(out, h[i], n)) FAIL("data copied on stream %d was not complete after synchronize", i);
  }
  set_detail(s, "after synchronize, work queued on two new streams and the default stream is complete%s",
             events ? " (streams and events query OK)" : "");
done:
  release_all(s);
  return rc;
}

/* ---- op generators ------------------------------------------------------------------------------------------ */

#define MAX_CASES 12
#define MAX_IN 8
#define MAX_OUT 3

typedef struct tspec {
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  int present;
  int constant; /* a weight: the executor wraps these into the device (wrap_memory) */
  float scale;  /* float inputs: uniform in [-scale, scale) */
} tspec_t;

typedef struct op_case {
  const char *name;
  uint32_t n_in, n_out;
  tspec_t in[MAX_IN], out[MAX_OUT];
  int64_t ints[16];
  uint32_t n_ints;
  double floats[8];
  uint32_t n_floats;
} op_case_t;

static tspec_t shp(int32_t ndim, const int64_t *dims) {
  tspec_t t;
  memset(&t, 0, sizeof t);
  t.ndim = ndim;
  for (int32_t i = 0; i < ndim; i++) t.shape[i] = dims[i];
  t.present = 1;
  t.scale = 1.0f;
  return t;
}
#define S(...) shp((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static tspec_t scalar0(void) { return shp(0, NULL); }
static tspec_t absent(void) {
  tspec_t t;
  memset(&t, 0, sizeof t);
  return t;
}
static tspec_t weight(tspec_t t, float fan_in) {
  t.constant = 1;
  t.scale = 1.0f / sqrtf(fan_in);
  return t;
}
static tspec_t scaled(tspec_t t, float k) {
  t.scale = k;
  return t;
}

static op_case_t mk(const char *name, uint32_t n_in, const tspec_t *in, uint32_t n_out, const tspec_t *out,
                    uint32_t n_ints, const int64_t *ints, uint32_t n_floats, const double *floats) {
  op_case_t c;
  memset(&c, 0, sizeof c);
  c.name = name;
  c.n_in = n_in;
  c.n_out = n_out;
  for (uint32_t i = 0; i < n_in; i++) c.in[i] = in[i];
  for (uint32_t i = 0; i < n_out; i++) c.out[i] = out[i];
  c.n_ints = n_ints;
  for (uint32_t i = 0; i < n_ints; i++) c.ints[i] = ints[i];
  c.n_floats = n_floats;
  for (uint32_t i = 0; i < n_floats; i++) c.floats[i] = floats[i];
  return c;
}
#define IN(...) (sizeof((tspec_t[]){__VA_ARGS__}) / sizeof(tspec_t)), (tspec_t[]){__VA_ARGS__}
#define OUT(...) (sizeof((tspec_t[]){__VA_ARGS__}) / sizeof(tspec_t)), (tspec_t[]){__VA_ARGS__}
#define INTS(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define FLOATS(...) (sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__}
#define NOINTS 0, NULL
#define NOFLOATS 0, NULL

typedef int (*gen_fn)(int32_t dtype, op_case_t *cases);

#define DT(x) OA_DTYPE_BIT(x)
#define DT_F32 DT(OA_DTYPE_FLOAT32)
#define DT_NUM (DT(OA_DTYPE_FLOAT32) | DT(OA_DTYPE_INT32) | DT(OA_DTYPE_INT64))

static int gen_unary(op_case_t *c) {
  int n = 0;
  c[n++] = mk("1-D [7]", IN(S(7)), OUT(S(7)), NOINTS, NOFLOATS);
  c[n++] = mk("2-D [4, 5]", IN(S(4, 5)), OUT(S(4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("4-D [2, 3, 4, 5]", IN(scaled(S(2, 3, 4, 5), 6.0f)), OUT(S(2, 3, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("0-d", IN(scalar0()), OUT(scalar0()), NOINTS, NOFLOATS);
  c[n++] = mk("size-1 dims [1, 1, 3]", IN(S(1, 1, 3)), OUT(S(1, 1, 3)), NOINTS, NOFLOATS);
  return n;
}

static int gen_relu(int32_t dtype, op_case_t *c) {
  (void)dtype;
  return gen_unary(c);
}

static int gen_sigmoid(int32_t dtype, op_case_t *c) {
  (void)dtype;
  return gen_unary(c);
}

static int gen_binary(int32_t dtype, op_case_t *c, int with_alpha) {
  int n = 0;
  int fl = dtype == OA_DTYPE_FLOAT32;
  double a1 = 1.0, a2 = fl ? 0.5 : 2.0, a3 = fl ? -2.0 : -3.0;
  uint32_t nf = with_alpha ? 1 : 0;
  c[n++] = mk("same shape [4, 5]", IN(S(4, 5), S(4, 5)), OUT(S(4, 5)), NOINTS, nf, (double[]){a1});
  c[n++] = mk("row broadcast [4, 5] x [5]", IN(S(4, 5), S(5)), OUT(S(4, 5)), NOINTS, nf, (double[]){a2});
  c[n++] = mk("both broadcast [2, 1, 4] x [3, 1]", IN(S(2, 1, 4), S(3, 1)), OUT(S(2, 3, 4)), NOINTS, nf, (double[]){a3});
  c[n++] = mk("0-d x [3, 4]", IN(scalar0(), S(3, 4)), OUT(S(3, 4)), NOINTS, nf, (double[]){a2});
  c[n++] = mk("[3, 1, 5] x [1, 4, 1], default alpha", IN(S(3, 1, 5), S(1, 4, 1)), OUT(S(3, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("4-D [2, 3, 4, 5] x [2, 1, 1, 5]", IN(S(2, 3, 4, 5), S(2, 1, 1, 5)), OUT(S(2, 3, 4, 5)), NOINTS, nf,
              (double[]){a1});
  return n;
}

static int gen_add(int32_t dtype, op_case_t *c) { return gen_binary(dtype, c, 1); }
static int gen_mul(int32_t dtype, op_case_t *c) { return gen_binary(dtype, c, 0); }

/* conv2d ints: stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, act; floats act_min, act_max */
static int gen_conv2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("plain 3x3 [1, 3, 8, 8] -> 4", IN(S(1, 3, 8, 8), weight(S(4, 3, 3, 3), 27)), OUT(S(1, 4, 6, 6)),
              INTS(1, 1, 0, 0, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("stride 2, pad 1, bias", IN(S(2, 3, 9, 9), weight(S(5, 3, 3, 3), 27), weight(S(5), 27)),
              OUT(S(2, 5, 5, 5)), INTS(2, 2, 1, 1, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("depthwise 3x3, groups 4", IN(S(1, 4, 7, 7), weight(S(4, 1, 3, 3), 9), weight(S(4), 9)),
              OUT(S(1, 4, 7, 7)), INTS(1, 1, 1, 1, 1, 1, 4, 0), NOFLOATS);
  c[n++] = mk("grouped, groups 2", IN(S(1, 4, 6, 6), weight(S(6, 2, 3, 3), 18)), OUT(S(1, 6, 4, 4)),
              INTS(1, 1, 0, 0, 1, 1, 2, 0), NOFLOATS);
  c[n++] = mk("dilation 2, pad 2", IN(S(1, 2, 9, 9), weight(S(3, 2, 3, 3), 18)), OUT(S(1, 3, 9, 9)),
              INTS(1, 1, 2, 2, 2, 2, 1, 0), NOFLOATS);
  c[n++] = mk("1x1, bias, fused relu", IN(S(1, 3, 6, 6), weight(S(4, 3, 1, 1), 3), weight(S(4), 3)),
              OUT(S(1, 4, 6, 6)), INTS(1, 1, 0, 0, 1, 1, 1, 1), NOFLOATS);
  c[n++] = mk("3x1, stride (2, 1), pad (1, 0), bias, fused clamp",
              IN(S(1, 3, 7, 5), weight(S(2, 3, 3, 1), 9), weight(S(2), 9)), OUT(S(1, 2, 4, 5)),
              INTS(2, 1, 1, 0, 1, 1, 1, 2), FLOATS(-0.25, 0.25));
  return n;
}

/* conv2d_winograd inputs input, weight [(tile+2)^2, ceil(K / block), C, block], bias?, addend?;
 * ints tile, pad_h, pad_w, act, block; floats act_min, act_max. Random transformed weights (the
 * kernels take any): the reference computes the same Winograd sums in double. F(4x4)'s output
 * transform scales by up to 8 in each direction, so its random weights are 8x smaller (real
 * transformed weights are too: G's rows 1 - 4 hold 1/6 .. 1/24) to keep float rounding within the
 * tolerance. */
static int gen_conv2d_winograd(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("F(4x4) [1, 8, 8, 8] -> 16, pad 1, bias",
              IN(S(1, 8, 8, 8), weight(S(36, 1, 8, 16), 72 * 64), weight(S(16), 72)), OUT(S(1, 16, 8, 8)),
              INTS(4, 1, 1, 0, 16), NOFLOATS);
  c[n++] = mk("F(2x2) [2, 5, 7, 6] -> 20, pad (0, 1), addend, fused relu",
              IN(S(2, 5, 7, 6), weight(S(16, 2, 5, 16), 45), absent(), S(2, 20, 5, 6)), OUT(S(2, 20, 5, 6)),
              INTS(2, 0, 1, 1, 16), NOFLOATS);
  c[n++] = mk("F(4x4) [1, 3, 5, 6] -> 4, pad 2, bias, addend, fused clamp",
              IN(S(1, 3, 5, 6), weight(S(36, 1, 3, 16), 27 * 64), weight(S(4), 27), S(1, 4, 7, 8)), OUT(S(1, 4, 7, 8)),
              INTS(4, 2, 2, 2, 16), FLOATS(-0.25, 0.25));
  return n;
}

/* conv2d_nhwc inputs input [N, H, W, C] ([N, C, H, W] with input_nchw), weight [kH, kW, C/g, O]
 * (block 0) or packed panels [ceil(O / block), kH, kW, C, block], bias?; ints stride, pad,
 * dilation (h, w), groups, act, block, input_nchw?; floats act_min, act_max */
static int gen_conv2d_nhwc(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("1x1 [1, 6, 8, 5] -> 20, packed in 16s, bias", IN(S(1, 6, 8, 5), weight(S(2, 1, 1, 5, 16), 5),
              weight(S(20), 5)), OUT(S(1, 6, 8, 20)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 16), NOFLOATS);
  c[n++] = mk("3x3 stride 2, pad 1, packed, bias, fused relu", IN(S(1, 9, 9, 3), weight(S(1, 3, 3, 3, 16), 27),
              weight(S(8), 27)), OUT(S(1, 5, 5, 8)), INTS(2, 2, 1, 1, 1, 1, 1, 1, 16), NOFLOATS);
  c[n++] = mk("depthwise 3x3 [1, 7, 7, 12], bias, fused clamp", IN(S(1, 7, 7, 12), weight(S(3, 3, 1, 12), 9),
              weight(S(12), 9)), OUT(S(1, 7, 7, 12)), INTS(1, 1, 1, 1, 1, 1, 12, 2, 0), FLOATS(-0.25, 0.25));
  c[n++] = mk("3x3 [2, 5, 5, 4] -> 6, weights [kH, kW, C, O]", IN(S(2, 5, 5, 4), weight(S(3, 3, 4, 6), 36)),
              OUT(S(2, 3, 3, 6)), INTS(1, 1, 0, 0, 1, 1, 1, 0, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 reading an NCHW input [1, 3, 9, 9] (input_nchw), packed, bias",
              IN(S(1, 3, 9, 9), weight(S(1, 3, 3, 3, 16), 27), weight(S(8), 27)), OUT(S(1, 5, 5, 8)),
              INTS(2, 2, 1, 1, 1, 1, 1, 0, 16, 1), NOFLOATS);
  return n;
}

/* mbconv_nhwc inputs input, expand weight? / bias?, dw weight [kH, kW, 1, E] / bias?, project
 * weight / bias? (expand and project packed in panels of `block`); ints dw stride, pad, dilation
 * (h, w), expand / dw / project act, block; floats min, max of each act */
static int gen_mbconv_nhwc(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[1, 9, 9, 8]: expand to 24, relu6, dw 3x3 pad 1, relu6, project to 8",
              IN(S(1, 9, 9, 8), weight(S(2, 1, 1, 8, 16), 8), weight(S(24), 8), weight(S(3, 3, 1, 24), 9),
                 weight(S(24), 9), weight(S(1, 1, 1, 24, 16), 24), weight(S(8), 24)),
              OUT(S(1, 9, 9, 8)), INTS(1, 1, 1, 1, 1, 1, 2, 2, 0, 16), FLOATS(0, 6, 0, 6, 0, 0));
  c[n++] = mk("[1, 10, 10, 16], no expansion, dw stride 2, relu, project to 12",
              IN(S(1, 10, 10, 16), absent(), absent(), weight(S(3, 3, 1, 16), 9), absent(),
                 weight(S(1, 1, 1, 16, 16), 16), absent()),
              OUT(S(1, 5, 5, 12)), INTS(2, 2, 1, 1, 1, 1, 0, 1, 0, 16), NOFLOATS);
  return n;
}

/* linear_packed inputs input [..., K], weight [ceil(N / block), K, block] (N: the output's last
 * dim), bias? [N]; ints act, block; floats act_min, act_max */
static int gen_linear_packed(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[40, 8] -> 20 features in panels of 16, bias", IN(S(40, 8), weight(S(2, 8, 16), 8), weight(S(20), 8)),
              OUT(S(40, 20)), INTS(0, 16), NOFLOATS);
  c[n++] = mk("3-D [2, 3, 32] -> 16, fused relu", IN(S(2, 3, 32), weight(S(1, 32, 16), 32)), OUT(S(2, 3, 16)),
              INTS(1, 16), NOFLOATS);
  return n;
}

/* linear ints: act; floats act_min, act_max */
static int gen_linear(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[3, 8] x [5, 8]", IN(S(3, 8), weight(S(5, 8), 8)), OUT(S(3, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("[4, 16] x [6, 16] + bias", IN(S(4, 16), weight(S(6, 16), 16), weight(S(6), 16)), OUT(S(4, 6)), INTS(0),
              NOFLOATS);
  c[n++] = mk("3-D [2, 3, 32], bias, fused relu", IN(S(2, 3, 32), weight(S(4, 32), 32), weight(S(4), 32)),
              OUT(S(2, 3, 4)), INTS(1), NOFLOATS);
  c[n++] = mk("[5, 64], bias, fused clamp", IN(S(5, 64), weight(S(7, 64), 64), weight(S(7), 64)), OUT(S(5, 7)),
              INTS(2), FLOATS(-0.3, 0.3));
  c[n++] = mk("1-D [8] x [3, 8]", IN(S(8), weight(S(3, 8), 8)), OUT(S(3)), NOINTS, NOFLOATS);
  return n;
}

static int gen_matmul(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 6] x [6, 5]", IN(S(4, 6), S(6, 5)), OUT(S(4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("batch [2, 4, 6] x [2, 6, 5]", IN(S(2, 4, 6), S(2, 6, 5)), OUT(S(2, 4, 5)), NOINTS, NOFLOATS);
  c[n++] = mk("broadcast [2, 1, 3, 4] x [5, 4, 2]", IN(S(2, 1, 3, 4), S(5, 4, 2)), OUT(S(2, 5, 3, 2)), NOINTS, NOFLOATS);
  c[n++] = mk("[1, 33] x [33, 17]", IN(S(1, 33), S(33, 17)), OUT(S(1, 17)), NOINTS, NOFLOATS);
  return n;
}

static int gen_softmax(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 10] dim 1", IN(scaled(S(4, 10), 4.0f)), OUT(S(4, 10)), INTS(1), NOFLOATS);
  c[n++] = mk("[2, 3, 5] dim 1", IN(scaled(S(2, 3, 5), 4.0f)), OUT(S(2, 3, 5)), INTS(1), NOFLOATS);
  c[n++] = mk("[2, 3, 5] dim 0", IN(scaled(S(2, 3, 5), 4.0f)), OUT(S(2, 3, 5)), INTS(0), NOFLOATS);
  c[n++] = mk("[7] dim 0", IN(scaled(S(7), 4.0f)), OUT(S(7)), INTS(0), NOFLOATS);
  c[n++] = mk("[3, 4, 6] dim 2", IN(scaled(S(3, 4, 6), 4.0f)), OUT(S(3, 4, 6)), INTS(2), NOFLOATS);
  return n;
}

/* max_pool2d ints: kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, ceil_mode */
static int gen_max_pool2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("2x2 stride 2", IN(S(1, 3, 8, 8)), OUT(S(1, 3, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 pad 1", IN(S(2, 2, 7, 7)), OUT(S(2, 2, 4, 4)), INTS(3, 3, 2, 2, 1, 1, 1, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 dilation 2", IN(S(1, 2, 9, 9)), OUT(S(1, 2, 5, 5)), INTS(3, 3, 1, 1, 0, 0, 2, 2, 0), NOFLOATS);
  c[n++] = mk("2x2 stride 2 ceil_mode", IN(S(1, 1, 7, 7)), OUT(S(1, 1, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 1), NOFLOATS);
  c[n++] = mk("3-D [3, 6, 6] 2x2", IN(S(3, 6, 6)), OUT(S(3, 3, 3)), INTS(2, 2, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  return n;
}

/* avg_pool2d ints: kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, ceil_mode, count_include_pad, divisor_override */
static int gen_avg_pool2d(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("2x2 stride 2", IN(S(1, 3, 8, 8)), OUT(S(1, 3, 4, 4)), INTS(2, 2, 2, 2, 0, 0, 0, 1, 0), NOFLOATS);
  c[n++] = mk("3x3 pad 1 count_include_pad", IN(S(1, 2, 7, 7)), OUT(S(1, 2, 7, 7)), INTS(3, 3, 1, 1, 1, 1, 0, 1, 0),
              NOFLOATS);
  c[n++] = mk("3x3 pad 1 exclude pad", IN(S(1, 2, 7, 7)), OUT(S(1, 2, 7, 7)), INTS(3, 3, 1, 1, 1, 1, 0, 0, 0), NOFLOATS);
  c[n++] = mk("3x3 stride 2 ceil_mode", IN(S(1, 1, 8, 8)), OUT(S(1, 1, 4, 4)), INTS(3, 3, 2, 2, 0, 0, 1, 1, 0), NOFLOATS);
  c[n++] = mk("divisor_override 3", IN(S(1, 2, 6, 6)), OUT(S(1, 2, 3, 3)), INTS(2, 2, 2, 2, 0, 0, 0, 1, 3), NOFLOATS);
  c[n++] = mk("3-D [2, 5, 5] 2x2 stride 1", IN(S(2, 5, 5)), OUT(S(2, 4, 4)), INTS(2, 2, 1, 1, 0, 0, 0, 1, 0), NOFLOATS);
  return n;
}

/* layer_norm inputs input, weight?, bias?; outputs out, mean?, rstd?; ints normalized_ndim; floats eps */
static int gen_layer_norm(int32_t dtype, op_case_t *c) {
  (void)dtype;
  int n = 0;
  c[n++] = mk("[4, 16] weight + bias", IN(scaled(S(4, 16), 3.0f), S(16), S(16)), OUT(S(4, 16)), INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 3, 8] over 2 dims, no affine", IN(S(2, 3, 8)), OUT(S(2, 3, 8)), INTS(2), FLOATS(1e-5));
  c[n++] = mk("[3, 10] weight only, mean and rstd outputs", IN(S(3, 10), S(10)), OUT(S(3, 10), S(3, 1), S(3, 1)),
              INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 6] bias only", IN(S(2, 6), absent(), S(6)), OUT(S(2, 6)), INTS(1), FLOATS(1e-5));
  c[n++] = mk("[2, 2, 3, 4] over 3 dims, eps 1e-3", IN(S(2, 2, 3, 4), S(2, 3, 4), S(2, 3, 4)), OUT(S(2, 2, 3, 4)), INTS(3),
              FLOATS(1e-3));
  return n;
}

typedef struct gen {
  const char *op;
  uint64_t dtypes; /* dtypes the generator produces inputs for */
  int sums;        /* tolerance class: 1 = accumulates sums */
  gen_fn fn;
} gen_t;

static const gen_t k_gens[] = {
    {"relu", DT_NUM, 0, gen_relu},
    {"sigmoid", DT_F32, 0, gen_sigmoid},
    {"add", DT_NUM, 0, gen_add},
    {"mul", DT_NUM | DT(OA_DTYPE_BOOL), 0, gen_mul},
    {"conv2d", DT_F32, 1, gen_conv2d},
    {"conv2d_winograd", DT_F32, 1, gen_conv2d_winograd},
    {"conv2d_nhwc", DT_F32, 1, gen_conv2d_nhwc},
    {"mbconv_nhwc", DT_F32, 1, gen_mbconv_nhwc},
    {"linear", DT_F32, 1, gen_linear},
    {"linear_packed", DT_F32, 1, gen_linear_packed},
    {"matmul", DT_F32, 1, gen_matmul},
    {"softmax", DT_F32, 1, gen_softmax},
    {"max_pool2d", DT_NUM, 0, gen_max_pool2d},
    {"avg_pool2d", DT_F32, 1, gen_avg_pool2d},
    {"layer_norm", DT_F32, 1, gen_layer_norm},
};
#define N_GENS (sizeof k_gens / sizeof k_gens[0])

static const gen_t *find_gen(const char *op) {
  for (size_t i = 0; i < N_GENS; i++)
    if (strcmp(k_gens[i].op, op) == 0) return &k_gens[i];
  return NULL;
}

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

static void random_fill(rng_t *r, void *data, int32_t dtype, int64_t n, float scale) {
  for (int64_t i = 0; i < n; i++) {
    switch (dtype) {
      case OA_DTYPE_FLOAT32: ((float *)data)[i] = rng_float(r) * scale; break;
      case OA_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)rng_below(r, 101) - 50; break;
      case OA_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)rng_below(r, 101) - 50; break;
      case OA_DTYPE_BOOL:
      case OA_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)rng_below(r, 2); break;
      default: memset((uint8_t *)data + (size_t)i * oa_dtype_size(dtype), 0, oa_dtype_size(dtype)); break;
    }
  }
}

typedef struct cmp {
  int64_t elements, mismatches, first;
  double max_abs, max_rel, got_first, want_first;
  uint32_t output_first;
} cmp_t;

static void compare_out(const void *got, const void *want, int32_t dtype, int64_t n, int sums, uint32_t o, cmp_t *c) {
  double rtol = sums ? 1e-4 : 1e-6, atol = sums ? 1e-5 : 1e-6;
  for (int64_t i = 0; i < n; i++) {
    double g, w;
    int exact = dtype != OA_DTYPE_FLOAT32;
    switch (dtype) {
      case OA_DTYPE_FLOAT32: g = ((const float *)got)[i]; w = ((const float *)want)[i]; break;
      case OA_DTYPE_INT32: g = ((const int32_t *)got)[i]; w = ((const int32_t *)want)[i]; break;
      case OA_DTYPE_INT64: g = (double)((const int64_t *)got)[i]; w = (double)((const int64_t *)want)[i]; break;
      default: g = ((const uint8_t *)got)[i]; w = ((const uint8_t *)want)[i]; break;
    }
    c->elements++;
    int bad;
    double d = fabs(g - w);
    if (isnan(g) || isnan(w)) bad = !(isnan(g) && isnan(w));
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
  static const char *const in_names[] = {"in0", "in1", "in2", "in3"}, *const out_names[] = {"out0", "out1", "out2"};
  for (uint32_t i = 0; i < nt; i++) ref_p[i] = dev_p[i] = meta_p[i] = NULL;
  for (uint32_t i = 0; i < k->n_in; i++) {
    if (!k->in[i].present) continue;
    int64_t n = numel_of(&k->in[i]);
    host_in[i] = host_alloc(s, (size_t)n * oa_dtype_size(dtype));
    if (!host_in[i]) goto oom;
    random_fill(r, host_in[i], dtype, n, k->in[i].scale);
    make_tensor(&ref_t[i], &k->in[i], dtype, host_in[i], in_names[i]);
    make_tensor(&meta_t[i], &k->in[i], dtype, NULL, in_names[i]);
    ref_p[i] = &ref_t[i];
    meta_p[i] = &meta_t[i];
  }
  for (uint32_t o = 0; o < k->n_out; o++) {
    int64_t n = numel_of(&k->out[o]);
    ref_out[o] = host_alloc(s, (size_t)n * oa_dtype_size(dtype));
    dev_out[o] = host_alloc(s, (size_t)n * oa_dtype_size(dtype));
    if (!ref_out[o] || !dev_out[o]) goto oom;
    memset(ref_out[o], 0xAB, (size_t)n * oa_dtype_size(dtype));
    memset(dev_out[o], 0xCD, (size_t)n * oa_dtype_size(dtype));
    make_tensor(&ref_t[k->n_in + o], &k->out[o], dtype, ref_out[o], out_names[o]);
    make_tensor(&meta_t[k->n_in + o], &k->out[o], dtype, NULL, out_names[o]);
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
    make_tensor(&dev_t[i], sp, dtype, d, is_in ? in_names[i] : out_names[i - k->n_in]);
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
    compare_out(dev_out[o], ref_out[o], dtype, ref_t[k->n_in + o].numel, g->sums, o, cmp);
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

static void run_op_checks(suite_t *s) {
  for (size_t i = 0; i < N_OPS; i++) {
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
        set_detail(s, "%d cases, %lld elements, max abs err %.3g, max rel err %.3g (atol %g, rtol %g)%s%s%s", ok,
                   (long long)cmp.elements, cmp.max_abs, cmp.max_rel, dtype != OA_DTYPE_FLOAT32 ? 0.0 : g->sums ? 1e-5 : 1e-6,
                   dtype != OA_DTYPE_FLOAT32 ? 0.0 : g->sums ? 1e-4 : 1e-6, dev_unsup ? "; UNSUPPORTED by the device: " : "",
                   unsup, ref_unsup ? "; some cases unsupported by the reference" : "");
      }
      report(s, name, result);
    }
  }
}

/* ---- driver ------------------------------------------------------------------------------------------------ */

typedef int (*check_fn)(suite_t *s);
static const struct {
  const char *name;
  check_fn fn;
} k_checks[] = {
    {"properties", check_properties},
    {"queries", check_queries},
    {"alloc.alignment", check_alloc_alignment},
    {"alloc.stats", check_alloc_stats},
    {"alloc.limits", check_alloc_limits},
    {"copy.roundtrip", check_copy_roundtrip},
    {"copy.wrap", check_copy_wrap},
    {"stream.ordering", check_stream_ordering},
    {"event.record_query", check_event_record_query},
    {"event.host_wait_timeout", check_event_host_wait_timeout},
    {"event.elapsed", check_event_elapsed},
    {"event.cross_stream_wait", check_event_cross_stream_wait},
    {"event.sticky_failure", check_event_sticky_failure},
    {"device.synchronize", check_device_synchronize},
};

static void run_suite(suite_t *s) {
  if (oa_device_get_properties(s->dev, &s->props)) memset(&s->props, 0, sizeof s->props);
  if (s->json) {
    printf("{\"event\": \"device\", \"index\": %u, \"name\": ", s->index);
    json_string(stdout, s->props.name);
    fputs(", \"vendor\": ", stdout);
    json_string(stdout, s->props.vendor);
    fputs(", \"kind\": ", stdout);
    json_string(stdout, s->props.kind_name);
    printf(", \"flags\": %u, \"seed\": %llu}\n", s->props.flags, (unsigned long long)s->seed);
  } else {
    printf("device %u: %s [%s] by %s (seed %llu)\n", s->index, s->props.name, s->props.kind_name, s->props.vendor,
           (unsigned long long)s->seed);
    printf("%-34s %-6s %s\n", "check", "result", "detail");
  }
  for (size_t i = 0; i < sizeof k_checks / sizeof k_checks[0]; i++) {
    if (!wanted(s, k_checks[i].name)) continue;
    s->detail[0] = '\0';
    s->res_overflow = 0;
    int r = k_checks[i].fn(s);
    release_all(s);
    if (s->res_overflow && r == R_PASS) {
      set_detail(s, "internal: too many resources in one check");
      r = R_FAIL;
    }
    report(s, k_checks[i].name, r);
  }
  run_op_checks(s);
}

static void usage(FILE *f) {
  fputs("usage: oa_conformance [--device LIB.so ...] [--json] [--seed N] [--filter TEXT] [--list-ops]\n"
        "  checks the built-in CPU device, or every device of each vendor library given with --device\n",
        f);
}

int main(int argc, char **argv) {
  const char *libs[8];
  int n_libs = 0, json = 0, list_ops = 0;
  uint64_t seed = 1;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--list-ops")) list_ops = 1;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--device")) {
      if (!val || n_libs >= 8) { fprintf(stderr, "oa_conformance: error: --device needs a library path (at most 8)\n"); return 2; }
      libs[n_libs++] = val;
      i++;
    } else if (!strcmp(a, "--seed")) {
      char *end;
      errno = 0;
      unsigned long long v = val ? strtoull(val, &end, 10) : 0;
      if (!val || errno || *end || end == val) { fprintf(stderr, "oa_conformance: error: --seed needs a non-negative integer\n"); return 2; }
      seed = v;
      i++;
    } else if (!strcmp(a, "--filter")) {
      if (!val) { fprintf(stderr, "oa_conformance: error: --filter needs a text\n"); return 2; }
      filter = val;
      i++;
    } else {
      fprintf(stderr, "oa_conformance: error: unknown argument %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (list_ops) {
    for (size_t i = 0; i < N_OPS; i++) printf("%s%s\n", k_ops[i], find_gen(k_ops[i]) ? " generator" : "");
    return 0;
  }
  oa_cpu_device_t ref_storage;
  oa_device_t *ref = NULL;
  oa_cpu_options_t ref_opts = {.reference_only = 1};
  if (oa_cpu_device_init(&ref_storage, &ref_opts, &ref)) {
    fprintf(stderr, "oa_conformance: error: cannot create the reference CPU device\n");
    return 2;
  }
  oa_registry_t reg;
  oa_registry_init(&reg, NULL);
#if defined(OA_HAVE_DLOPEN)
  void *handles[8];
#endif
  if (!n_libs) {
    if (oa_registry_register(&reg, oa_cpu_device_factory())) {
      fprintf(stderr, "oa_conformance: error: cannot register the CPU device factory\n");
      return 2;
    }
  }
  for (int i = 0; i < n_libs; i++) {
#if defined(OA_HAVE_DLOPEN)
    handles[i] = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!handles[i]) {
      fprintf(stderr, "oa_conformance: error: cannot load %s: %s\n", libs[i], dlerror());
      return 2;
    }
    void *sym = dlsym(handles[i], "oa_device_factory");
    if (!sym) {
      fprintf(stderr, "oa_conformance: error: %s does not export oa_device_factory (expected "
              "`const oa_device_factory_t *oa_device_factory(void)`)\n", libs[i]);
      return 2;
    }
    const oa_device_factory_t *(*get)(void);
    memcpy(&get, &sym, sizeof get);
    const oa_device_factory_t *f = get();
    if (!f) {
      fprintf(stderr, "oa_conformance: error: %s: oa_device_factory() returned NULL\n", libs[i]);
      return 2;
    }
    oa_status_t st = oa_registry_register(&reg, f);
    if (st) {
      fprintf(stderr, "oa_conformance: error: %s: cannot register its factory (abi_version %u, this runtime "
              "supports 1 to %d): %s\n", libs[i], f->abi_version, OA_DEVICE_ABI_VERSION, oa_status_name(st));
      return 2;
    }
#else
    fprintf(stderr, "oa_conformance: error: this build cannot load libraries (no dlopen); cannot load %s\n", libs[i]);
    return 2;
#endif
  }
  oa_diag_t diag;
  oa_diag_clear(&diag);
  uint32_t count = 0;
  oa_status_t st = oa_registry_enumerate(&reg, NULL, 0, &count, &diag);
  if (st) {
    fprintf(stderr, "oa_conformance: error: creating devices: %s: %s\n", oa_status_name(st), diag.message);
    return 2;
  }
  if (!count) {
    fprintf(stderr, "oa_conformance: error: the factories report no devices\n");
    return 2;
  }
  static suite_t suite; /* large: keep it off the stack */
  int passed = 0, failed = 0, skipped = 0;
  for (uint32_t d = 0; d < count; d++) {
    memset(&suite, 0, sizeof suite);
    suite.dev = oa_registry_device(&reg, d);
    suite.index = d;
    suite.ref = ref;
    suite.seed = seed;
    suite.json = json;
    suite.filter = filter;
    /* the factory that created device d: registration order, device_count each */
    uint32_t first = 0;
    for (uint32_t f = 0; f < reg.n_factories; f++) {
      uint32_t n = reg.factories[f]->device_count(reg.factories[f]);
      if (d < first + n) {
        suite.factory_kind = reg.factories[f]->kind_name;
        break;
      }
      first += n;
    }
    run_suite(&suite);
    passed += suite.passed;
    failed += suite.failed;
    skipped += suite.skipped;
  }
  oa_registry_release(&reg);
  oa_device_destroy(ref);
#if defined(OA_HAVE_DLOPEN)
  for (int i = 0; i < n_libs; i++) dlclose(handles[i]);
#endif
  if (json) {
    printf("{\"event\": \"summary\", \"passed\": %d, \"failed\": %d, \"skipped\": %d}\n", passed, failed, skipped);
  } else {
    printf("%d skipped\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
  }
  return failed ? 1 : 0;
}
