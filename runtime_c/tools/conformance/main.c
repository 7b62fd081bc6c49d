/* oa_conformance: checks that a device implements the standard device interface
 * (openaccel/device_abi.h) the way the executor relies on it.
 *
 *   oa_conformance [--device LIB.so ...] [--isa LIST] [--json] [--seed N] [--filter TEXT] [--list-ops]
 *
 * --isa LIST (the built-in CPU device only) restricts its optimized kernels to those ISAs
 * (comma-separated: avx512, avx2, neon, rvv, portable, vnni for the int8 dot products inside
 * avx512 / avx2, amx for the AMX int8 tiles inside avx512; oa_cpu_options_t.disable_isas), so that every ISA
 * variant of an op can be checked against the reference kernels.
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
 * the reference kernels of this build lack, are reported as SKIP.
 *
 * One file per check group; conformance.h lists them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OA_HAVE_DLOPEN)
#include <dlfcn.h>
#endif

#include "conformance.h"
#include "json_out.h"

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
  fputs("usage: oa_conformance [--device LIB.so ...] [--isa LIST] [--json] [--seed N] [--filter TEXT] [--list-ops]\n"
        "  checks the built-in CPU device, or every device of each vendor library given with --device\n"
        "  --isa LIST: the CPU device's optimized kernels use only these ISAs (avx512, avx2, neon, rvv,\n"
        "             portable; vnni: the int8 dot products inside avx512 / avx2; amx: the AMX int8\n"
        "             tiles inside avx512)\n",
        f);
}

/* The built-in CPU device with some ISAs disabled (--isa): a factory of one device. */
static uint32_t g_disable_isas;
static oa_cpu_device_t g_cpu_storage;

static uint32_t isa_cpu_count(const oa_device_factory_t *factory) {
  (void)factory;
  return 1;
}

static oa_status_t isa_cpu_create(const oa_device_factory_t *factory, uint32_t index, const oa_allocator_t *allocator,
                                  oa_device_t **out_device) {
  (void)factory;
  if (index != 0) return OA_ERR_INVALID_ARGUMENT;
  oa_cpu_options_t options = {.allocator = allocator, .disable_isas = g_disable_isas};
  return oa_cpu_device_init(&g_cpu_storage, &options, out_device);
}

static const oa_device_factory_t isa_cpu_factory = {OA_DEVICE_ABI_VERSION, "cpu", NULL, isa_cpu_count,
                                                    isa_cpu_create};

/* "avx2,portable" -> the OA_CPU_ISA_* bits to disable (all others); 1 on an unknown name */
static int parse_isas(const char *list, uint32_t *out_disable) {
  static const struct { const char *name; uint32_t bit; } names[] = {
      {"portable", OA_CPU_ISA_PORTABLE}, {"avx2", OA_CPU_ISA_AVX2}, {"neon", OA_CPU_ISA_NEON},
      {"avx512", OA_CPU_ISA_AVX512}, {"rvv", OA_CPU_ISA_RVV}, {"vnni", OA_CPU_ISA_VNNI},
      {"amx", OA_CPU_ISA_AMX}};
  uint32_t keep = 0;
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    size_t i = 0;
    while (i < sizeof names / sizeof names[0] && !(strlen(names[i].name) == n && !strncmp(p, names[i].name, n))) i++;
    if (i == sizeof names / sizeof names[0]) return 1;
    keep |= names[i].bit;
    p += n;
    if (*p == ',') p++;
  }
  *out_disable = OA_CPU_ISA_ALL & ~keep;
  return 0;
}

int main(int argc, char **argv) {
  const char *libs[8];
  int n_libs = 0, json = 0, list_ops = 0;
  uint64_t seed = 1;
  const char *filter = NULL;
  int isa_given = 0;
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
    } else if (!strcmp(a, "--isa")) {
      if (!val || parse_isas(val, &g_disable_isas)) {
        fprintf(stderr, "oa_conformance: error: --isa needs a comma-separated list of avx512, avx2, neon, rvv, portable, vnni, amx\n");
        return 2;
      }
      isa_given = 1;
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
    for (size_t i = 0; i < k_n_ops; i++) printf("%s%s\n", k_ops[i], find_gen(k_ops[i]) ? " generator" : "");
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
  if (isa_given && n_libs) {
    fprintf(stderr, "oa_conformance: error: --isa applies to the built-in CPU device, not to --device libraries\n");
    return 2;
  }
  if (!n_libs) {
    if (oa_registry_register(&reg, isa_given ? &isa_cpu_factory : oa_cpu_device_factory())) {
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
    void *sym = dlsym(handles[i], OA_DEVICE_FACTORY_SYMBOL);
    if (!sym) {
      fprintf(stderr, "oa_conformance: error: %s does not export oa_device_factory (expected "
              "`const oa_device_factory_t *oa_device_factory(void)`)\n", libs[i]);
      return 2;
    }
    oa_device_factory_fn get;
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
