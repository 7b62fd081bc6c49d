/* oa_run: the on-device runner. Loads an .oab file, runs its bundled tests (--test), runs it on
 * .npy inputs (--input/--output-dir), benchmarks it (--bench N), or reports devices (--devices).
 * Exit: 0 success, 1 a check failed, 2 bad usage or bad input. --json makes every line JSON. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "npy.h"
#include "openaccel/openaccel.h"

#if defined(OA_HAVE_DLOPEN)
#include <dlfcn.h>
#endif

/* --input options (a hand-built test program of many cases takes one per case input) */
#define MAX_INPUTS 1024

typedef struct options {
  const char *file;
  int test, json, info, devices, reference, profile;
  int bench, warmup, threads;
  uint32_t disable_isas; /* --isa: every OA_CPU_ISA_* not listed */
  const char *inputs[MAX_INPUTS];
  int n_inputs;
  const char *output_dir;
  const char *device_libs[8];
  int n_device_libs;
} options_t;

static int g_json = 0;
/* released at exit on every path, so sanitizer runs on bad files stay leak-free */
static void *g_data = NULL;
static oa_method_t *g_method = NULL;

static void release_all(void) {
  oa_method_destroy(g_method);
  g_method = NULL;
  oa_platform_free(g_data);
  g_data = NULL;
}

static void json_number(FILE *f, double v) {
  if (isnan(v)) fputs("null", f);
  else if (isinf(v)) fputs(v > 0 ? "1e308" : "-1e308", f);
  else fprintf(f, "%.9g", v);
}

/* Print an error and return the exit code for it (2: bad input/usage). */
static int fail(const char *what, oa_status_t st, const char *message) {
  if (g_json) {
    fputs("{\"event\": \"error\", \"status\": ", stdout);
    json_string(stdout, oa_status_name(st));
    fputs(", \"message\": ", stdout);
    static char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", what, *message ? ": " : "", message);
    json_string(stdout, buf);
    fputs("}\n", stdout);
    fflush(stdout);
  } else {
    fprintf(stderr, "oa_run: error: %s%s%s\n", what, *message ? ": " : "", message);
  }
  return 2;
}

static void usage(FILE *f) {
  fputs("usage: oa_run FILE.oab [--test] [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
        "              [--bench N] [--warmup N] [--threads N] [--reference] [--isa LIST] [--profile] [--info]\n"
        "              [--json] [--device VENDOR_LIB.so ...]\n"
        "  --isa LIST  the optimized CPU kernels use only these ISAs (comma-separated: avx512, avx2,\n"
        "              neon, rvv, portable; vnni: the int8 dot products inside avx512 / avx2; amx: the\n"
        "              AMX int8 tiles inside avx512), each\n"
        "              where this build and the CPU have it; other ops: reference\n"
        "       oa_run --devices [--device VENDOR_LIB.so ...] [--json]\n",
        f);
}

static int parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 0 || v > 1000000000) return 1;
  *out = (int)v;
  return 0;
}

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

static int parse_args(int argc, char **argv, options_t *o) {
  memset(o, 0, sizeof *o);
  o->warmup = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--test")) o->test = 1;
    else if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--info")) o->info = 1;
    else if (!strcmp(a, "--devices")) o->devices = 1;
    else if (!strcmp(a, "--reference")) o->reference = 1;
    else if (!strcmp(a, "--profile")) o->profile = 1;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
    else if (!strcmp(a, "--bench") || !strcmp(a, "--warmup") || !strcmp(a, "--threads")) {
      int v;
      if (!val || parse_int(val, &v)) { fprintf(stderr, "oa_run: error: %s needs a non-negative integer\n", a); return 2; }
      if (!strcmp(a, "--bench")) o->bench = v;
      else if (!strcmp(a, "--warmup")) o->warmup = v;
      else o->threads = v;
      i++;
    } else if (!strcmp(a, "--isa")) {
      if (!val || parse_isas(val, &o->disable_isas)) {
        fprintf(stderr, "oa_run: error: --isa needs a comma-separated list of avx512, avx2, neon, rvv, portable, vnni, amx\n");
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--input")) {
      if (!val) { fprintf(stderr, "oa_run: error: --input needs NAME=FILE.npy\n"); return 2; }
      if (o->n_inputs >= MAX_INPUTS) {
        fprintf(stderr, "oa_run: error: more than %d --input options\n", MAX_INPUTS);
        return 2;
      }
      o->inputs[o->n_inputs++] = val;
      i++;
    } else if (!strcmp(a, "--device")) {
      if (!val) { fprintf(stderr, "oa_run: error: --device needs a vendor library path\n"); return 2; }
      if (o->n_device_libs >= 8) { fprintf(stderr, "oa_run: error: too many --device\n"); return 2; }
      o->device_libs[o->n_device_libs++] = val;
      i++;
    } else if (!strcmp(a, "--output-dir")) {
      if (!val) { fprintf(stderr, "oa_run: error: --output-dir needs a directory\n"); return 2; }
      o->output_dir = val;
      i++;
    } else if (a[0] == '-') {
      fprintf(stderr, "oa_run: error: unknown option %s\n", a);
      usage(stderr);
      return 2;
    } else if (!o->file) {
      o->file = a;
    } else {
      fprintf(stderr, "oa_run: error: more than one file given (%s)\n", a);
      return 2;
    }
  }
  if (!o->file && !o->devices) {
    usage(stderr);
    return 2;
  }
  return 0;
}

static void *read_file(const char *path, size_t *out_size, char *err, size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "cannot open (%s)", strerror(errno));
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0) { snprintf(err, err_size, "cannot seek"); fclose(f); return NULL; }
  long n = ftell(f);
  if (n < 0) { snprintf(err, err_size, "cannot tell size"); fclose(f); return NULL; }
  rewind(f);
  void *buf = oa_platform_alloc((size_t)n ? (size_t)n : 1, 64);
  if (!buf) { snprintf(err, err_size, "out of memory for %ld bytes", n); fclose(f); return NULL; }
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
    snprintf(err, err_size, "short read");
    oa_platform_free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  *out_size = (size_t)n;
  return buf;
}

/* Op names to ask devices about: every op this runtime has CPU kernels for (the op set). */
static void print_device(uint32_t index, oa_device_t *dev) {
  oa_device_properties_t props;
  if (oa_device_get_properties(dev, &props)) return;
  static const char *cpu_keys[] = {"arch", "neon", "fp16", "dotprod", "sse4_1", "avx", "avx2", "fma", "f16c",
                                   "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx_vnni",
                                   "amx_tile", "amx_int8", "amx_bf16", "v", "vlen", "i8mm",
                                   "cores", "l1d_bytes", "l2_bytes", "l3_bytes", "threads", "isas"};
  static const char *dev_keys[] = {"alignment", "memory_total", "compute_units"};
  if (g_json) {
    printf("{\"event\": \"device\", \"index\": %u, \"name\": ", index);
    json_string(stdout, props.name);
    fputs(", \"vendor\": ", stdout);
    json_string(stdout, props.vendor);
    fputs(", \"kind\": ", stdout);
    json_string(stdout, props.kind_name);
    printf(", \"memory_total\": %llu, \"memory_free\": %llu, \"alignment\": %u, \"flags\": %u, \"queries\": {",
           (unsigned long long)props.memory_total, (unsigned long long)props.memory_free, props.alignment,
           props.flags);
    int first = 1;
    for (size_t i = 0; i < sizeof cpu_keys / sizeof cpu_keys[0]; i++) {
      int64_t v;
      if (oa_device_query_i64(dev, "cpu", cpu_keys[i], &v) == OA_OK) {
        printf("%s\"cpu.%s\": %lld", first ? "" : ", ", cpu_keys[i], (long long)v);
        first = 0;
      }
    }
    for (size_t i = 0; i < sizeof dev_keys / sizeof dev_keys[0]; i++) {
      int64_t v;
      if (oa_device_query_i64(dev, "device", dev_keys[i], &v) == OA_OK) {
        printf("%s\"device.%s\": %lld", first ? "" : ", ", dev_keys[i], (long long)v);
        first = 0;
      }
    }
    fputs("}, \"ops\": {", stdout);
    first = 1;
    for (uint32_t k = 0; oa_cpu_kernel_op_name(k); k++) {
      const char *op = oa_cpu_kernel_op_name(k);
      uint64_t mask = 0;
      if (oa_device_supports_op(dev, op, &mask) != OA_OK || !mask) continue;
      printf("%s\"%s\": [", first ? "" : ", ", op);
      first = 0;
      int f2 = 1;
      for (int32_t d = 0; d < 64; d++) {
        if (!(mask & OA_DTYPE_BIT(d)) || !oa_dtype_size(d)) continue;
        printf("%s\"%s\"", f2 ? "" : ", ", oa_dtype_name(d));
        f2 = 0;
      }
      fputs("]", stdout);
    }
    fputs("}}\n", stdout);
  } else {
    printf("device %u: %s [%s] vendor %s, alignment %u\n", index, props.name, props.kind_name, props.vendor,
           props.alignment);
    for (size_t i = 0; i < sizeof cpu_keys / sizeof cpu_keys[0]; i++) {
      int64_t v;
      if (oa_device_query_i64(dev, "cpu", cpu_keys[i], &v) == OA_OK) printf("  cpu.%s = %lld\n", cpu_keys[i], (long long)v);
    }
  }
}

/* The devices of this run: the CPU (caller storage) plus every vendor library's devices. */
typedef struct devices {
  oa_cpu_device_t cpu_storage;
  oa_registry_t registry;
  oa_device_t *list[OA_REGISTRY_MAX_DEVICES + 1];
  uint32_t count;
} devices_t;

static int open_devices(const options_t *o, devices_t *d) {
  oa_cpu_options_t cpu_opts = {.reference_only = o->reference, .threads = o->threads, .disable_isas = o->disable_isas};
  oa_device_t *cpu;
  if (oa_cpu_device_init(&d->cpu_storage, &cpu_opts, &cpu)) return fail("CPU device", OA_ERR_INTERNAL, "init failed");
  d->list[0] = cpu;
  d->count = 1;
  oa_registry_init(&d->registry, NULL);
  for (int i = 0; i < o->n_device_libs; i++) {
#if defined(OA_HAVE_DLOPEN)
    void *h = dlopen(o->device_libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return fail(o->device_libs[i], OA_ERR_NOT_FOUND, dlerror());
    const oa_device_factory_t *(*get)(void);
    *(void **)(&get) = dlsym(h, "oa_device_factory");
    if (!get) return fail(o->device_libs[i], OA_ERR_NOT_FOUND, "no symbol oa_device_factory (not a vendor device library?)");
    oa_status_t st = oa_registry_register(&d->registry, get());
    if (st) return fail(o->device_libs[i], st, "its factory was refused (ABI version?)");
#else
    return fail(o->device_libs[i], OA_ERR_UNSUPPORTED, "this oa_run is a static build without dlopen");
#endif
  }
  if (o->n_device_libs) {
    oa_diag_t diag;
    uint32_t n = 0;
    oa_status_t st = oa_registry_enumerate(&d->registry, d->list + 1, OA_REGISTRY_MAX_DEVICES, &n, &diag);
    if (st) return fail("vendor devices", st, diag.message);
    d->count += n < OA_REGISTRY_MAX_DEVICES ? n : OA_REGISTRY_MAX_DEVICES;
  }
  return 0;
}

static int find_input(oa_method_t *m, const char *name, uint32_t *out) {
  for (uint32_t i = 0; i < oa_method_input_count(m); i++) {
    oa_tensor_t *t;
    if (oa_method_input(m, i, &t) == OA_OK && strcmp(t->name, name) == 0) {
      *out = i;
      return 0;
    }
  }
  char *end;
  long v = strtol(name, &end, 10);
  if (*name && !*end && v >= 0 && (uint32_t)v < oa_method_input_count(m)) {
    *out = (uint32_t)v;
    return 0;
  }
  return 1;
}

static uint64_t *g_profile = NULL;

/* Instructions by time, slowest first: the ten slowest as text, every one with --json (`openaccel
 * inspect` shows their shapes and arguments). */
static int cmp_by_profile(const void *a, const void *b) {
  uint64_t x = g_profile[*(const uint32_t *)a], y = g_profile[*(const uint32_t *)b];
  return x < y ? 1 : (x > y ? -1 : 0);
}

static void print_slowest_instructions(oa_method_t *m, int runs, uint64_t all) {
  uint32_t n = oa_method_instruction_count(m);
  uint32_t *order = (uint32_t *)malloc(sizeof(uint32_t) * (n ? n : 1));
  if (!order) return;
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  qsort(order, n, sizeof(uint32_t), cmp_by_profile);
  const uint32_t shown = g_json ? n : (n < 10 ? n : 10);
  if (!g_json && shown) printf("  slowest instructions:\n");
  for (uint32_t a = 0; a < shown; a++) {
    uint32_t i = order[a];
    double ms = (double)g_profile[i] / 1e6 / runs;
    double pct = all ? 100.0 * (double)g_profile[i] / (double)all : 0.0;
    if (g_json) {
      printf("{\"event\": \"profile_instruction\", \"index\": %u, \"op\": \"%s\", \"kernel\": \"%s\", "
             "\"ms\": %.6f, \"percent\": %.2f}\n", i, oa_method_instruction_op(m, i),
             oa_method_instruction_kernel(m, i), ms, pct);
    } else {
      printf("    #%-5u %-22s %-8s %9.3f ms  %5.1f%%\n", i, oa_method_instruction_op(m, i),
             oa_method_instruction_kernel(m, i), ms, pct);
    }
  }
  free(order);
}

/* Time per op summed over instructions and averaged over runs, biggest first. */
static void print_profile(oa_method_t *m, int runs) {
  uint32_t n = oa_method_instruction_count(m);
  const char *names[256];
  uint64_t totals[256];
  uint32_t counts[256];
  uint32_t k = 0;
  uint64_t all = 0;
  for (uint32_t i = 0; i < n; i++) {
    const char *op = oa_method_instruction_op(m, i);
    uint32_t j = 0;
    while (j < k && strcmp(names[j], op)) j++;
    if (j == k) {
      if (k == 256) continue;
      names[k] = op;
      totals[k] = 0;
      counts[k] = 0;
      k++;
    }
    totals[j] += g_profile[i];
    counts[j]++;
    all += g_profile[i];
  }
  for (uint32_t a = 0; a < k; a++) /* selection sort: a handful of ops */
    for (uint32_t b = a + 1; b < k; b++)
      if (totals[b] > totals[a]) {
        uint64_t t = totals[a]; totals[a] = totals[b]; totals[b] = t;
        uint32_t c = counts[a]; counts[a] = counts[b]; counts[b] = c;
        const char *s = names[a]; names[a] = names[b]; names[b] = s;
      }
  for (uint32_t a = 0; a < k; a++) {
    double ms = (double)totals[a] / 1e6 / runs;
    double pct = all ? 100.0 * (double)totals[a] / (double)all : 0.0;
    if (g_json) {
      printf("{\"event\": \"profile\", \"op\": \"%s\", \"instructions\": %u, \"ms\": %.6f, \"percent\": %.2f}\n",
             names[a], counts[a], ms, pct);
    } else {
      printf("  %-22s x%-4u %9.3f ms  %5.1f%%\n", names[a], counts[a], ms, pct);
    }
  }
  print_slowest_instructions(m, runs, all);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_tensor_summary(uint32_t i, const oa_tensor_t *t) {
  char shape[128];
  size_t n = (size_t)snprintf(shape, sizeof shape, "[");
  for (int32_t d = 0; d < t->ndim && n < sizeof shape; d++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
  if (n < sizeof shape) snprintf(shape + n, sizeof shape - n, "]");
  if (g_json) {
    printf("{\"event\": \"output\", \"index\": %u, \"name\": ", i);
    json_string(stdout, t->name);
    printf(", \"dtype\": \"%s\", \"shape\": %s}\n", oa_dtype_name(t->dtype), shape);
    return;
  }
  printf("output %u '%s': %s%s", i, t->name, oa_dtype_name(t->dtype), shape);
  int64_t show = t->numel < 6 ? t->numel : 6;
  printf(" = [");
  for (int64_t k = 0; k < show; k++) {
    double v = 0;
    switch (t->dtype) {
      case OA_DTYPE_FLOAT32: v = ((const float *)t->data)[k]; break;
      case OA_DTYPE_FLOAT64: v = ((const double *)t->data)[k]; break;
      case OA_DTYPE_COMPLEX64: v = ((const float *)t->data)[2 * k]; break; /* the real part */
      case OA_DTYPE_INT32: v = ((const int32_t *)t->data)[k]; break;
      case OA_DTYPE_INT64: v = (double)((const int64_t *)t->data)[k]; break;
      case OA_DTYPE_BOOL:
      case OA_DTYPE_UINT8: v = ((const uint8_t *)t->data)[k]; break;
      case OA_DTYPE_INT8: v = ((const int8_t *)t->data)[k]; break;
      default: break;
    }
    printf(k ? ", %.6g" : "%.6g", v);
  }
  printf(t->numel > show ? ", ...]\n" : "]\n");
}

int main(int argc, char **argv) {
  options_t o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  g_json = o.json;
  static devices_t devs;
  if ((rc = open_devices(&o, &devs))) return rc;
  if (o.devices) {
    for (uint32_t i = 0; i < devs.count; i++) print_device(i, devs.list[i]);
    if (!o.file) return 0;
  }
  char err[4096]; /* messages name paths, which may be long */
  size_t size = 0;
  atexit(release_all);
  void *data = read_file(o.file, &size, err, sizeof err);
  if (!data) return fail(o.file, OA_ERR_IO, err);
  g_data = data;
  oa_diag_t diag;
  oa_diag_clear(&diag);
  oa_program_t program;
  oa_status_t st = oa_program_load(data, size, &program, &diag);
  if (st) return fail(o.file, st, diag.message);
  /* the CPU features the file was exported for (until oa_method_prepare checks them itself) */
  if ((st = oa_cpu_check_required_features(&program, devs.list[0], &diag))) return fail(o.file, st, diag.message);
  uint32_t method_index = 0;
  if (oa_program_find_method(&program, "forward", &method_index)) method_index = 0;
  oa_method_config_t cfg = {devs.list, devs.count};
  oa_memory_requirements_t req;
  if ((st = oa_method_requirements(&program, method_index, &cfg, &req, &diag))) return fail(o.file, st, diag.message);
  if (o.info) {
    if (g_json)
      printf("{\"event\": \"memory\", \"state_bytes\": %zu, \"arena_bytes\": %zu, \"scratch_bytes\": %zu, "
             "\"total_bytes\": %zu, \"file_bytes\": %zu}\n",
             req.state_bytes, req.arena_bytes, req.scratch_bytes, req.total_bytes, size);
    else
      printf("memory: state %zu + arena %zu + scratch %zu = %zu bytes (file %zu bytes)\n", req.state_bytes,
             req.arena_bytes, req.scratch_bytes, req.total_bytes, size);
  }
  oa_method_t *m;
  if ((st = oa_method_create(&program, method_index, &cfg, &m, &diag))) return fail(o.file, st, diag.message);
  g_method = m;
  int exit_code = 0;
  if (o.test) {
    uint32_t n = oa_method_test_count(m), passed = 0, failed = 0;
    for (uint32_t i = 0; i < n; i++) {
      oa_test_result_t r;
      oa_diag_clear(&diag);
      if ((st = oa_method_run_test(m, i, &r, &diag))) {
        failed++;
        if (g_json) {
          printf("{\"event\": \"test\", \"index\": %u, \"passed\": false, \"error\": ", i);
          json_string(stdout, diag.message);
          puts("}");
        } else {
          printf("FAIL test %u: %s: %s\n", i, oa_status_name(st), diag.message);
        }
        continue;
      }
      if (r.passed) passed++;
      else failed++;
      if (g_json) {
        printf("{\"event\": \"test\", \"index\": %u, \"name\": ", i);
        json_string(stdout, r.name);
        printf(", \"passed\": %s, \"max_abs_error\": ", r.passed ? "true" : "false");
        json_number(stdout, r.max_abs_error);
        fputs(", \"max_rel_error\": ", stdout);
        json_number(stdout, r.max_rel_error);
        fputs(", \"atol\": ", stdout);
        json_number(stdout, r.atol);
        fputs(", \"rtol\": ", stdout);
        json_number(stdout, r.rtol);
        printf(", \"mismatches\": %lld, \"first_mismatch\": %lld, \"output\": %u, \"ms\": ", (long long)r.mismatches,
               (long long)r.first_mismatch, r.worst_output);
        json_number(stdout, (double)r.elapsed_ns / 1e6);
        puts("}");
      } else {
        printf("%s %s: max abs error %.3g, max rel error %.3g (atol %g, rtol %g), %.3f ms", r.passed ? "PASS" : "FAIL",
               r.name, r.max_abs_error, r.max_rel_error, r.atol, r.rtol, (double)r.elapsed_ns / 1e6);
        if (!r.passed)
          printf(", %lld elements outside tolerance (first at flat index %lld of output %u)", (long long)r.mismatches,
                 (long long)r.first_mismatch, r.worst_output);
        putchar('\n');
      }
    }
    if (g_json) printf("{\"event\": \"summary\", \"passed\": %u, \"failed\": %u}\n", passed, failed);
    if (!g_json) printf("%u passed, %u failed\n", passed, failed);
    if (failed) exit_code = 1;
  } else {
    /* every input exactly once: a duplicate would leave another input holding whatever the arena held */
    const uint32_t n_in = oa_method_input_count(m);
    int *given = (int *)calloc(n_in ? n_in : 1, sizeof(int)); /* --input index + 1 that set input i */
    if (!given) return fail("--input", OA_ERR_OUT_OF_MEMORY, "");
    for (int k = 0; k < o.n_inputs; k++) {
      const char *spec = o.inputs[k];
      const char *eq = strchr(spec, '=');
      char name[256];
      const char *path = spec;
      uint32_t idx = (uint32_t)k;
      if (eq) {
        if ((size_t)(eq - spec) >= sizeof name) {
          free(given);
          snprintf(err, sizeof err, "input name of %zu characters in '%.40s...' (at most %zu)", (size_t)(eq - spec), spec,
                   sizeof name - 1);
          return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
        }
        memcpy(name, spec, (size_t)(eq - spec));
        name[eq - spec] = '\0';
        path = eq + 1;
        if (find_input(m, name, &idx)) {
          free(given);
          snprintf(err, sizeof err, "the program has no input named '%s'", name);
          return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
        }
      } else if (idx >= n_in) {
        free(given);
        snprintf(err, sizeof err, "%d --input files for a program with %u inputs", o.n_inputs, n_in);
        return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
      }
      oa_tensor_t *dst;
      oa_method_input(m, idx, &dst);
      if (given[idx]) {
        snprintf(err, sizeof err, "input %u ('%s') is given twice (--input %s and --input %s); give each input once",
                 idx, dst->name, o.inputs[given[idx] - 1], spec);
        free(given);
        return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
      }
      given[idx] = k + 1;
      npy_array_t arr;
      if (npy_read(path, &arr, err, sizeof err)) {
        free(given);
        return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
      }
      oa_tensor_t src;
      memset(&src, 0, sizeof src);
      src.data = arr.data;
      src.ndim = arr.ndim;
      src.dtype = arr.dtype;
      memcpy(src.shape, arr.shape, sizeof src.shape);
      src.nbytes = arr.nbytes;
      oa_diag_clear(&diag);
      st = oa_method_set_input(m, idx, &src, &diag);
      npy_free(&arr);
      if (st) {
        free(given);
        return fail(path, st, diag.message);
      }
    }
    if (!o.n_inputs && oa_method_test_count(m)) {
      /* no inputs given: use the first bundled test's inputs */
      oa_test_result_t r;
      free(given);
      if ((st = oa_method_run_test(m, 0, &r, &diag))) return fail(o.file, st, diag.message);
    } else if (!o.n_inputs && o.bench) {
      /* a benchmark of a file without bundled tests runs on zeros, not on what the arena held */
      free(given);
      for (uint32_t i = 0; i < n_in; i++) {
        oa_tensor_t *t;
        oa_method_input(m, i, &t);
        if (t->nbytes) memset(t->data, 0, t->nbytes);
      }
    } else {
      for (uint32_t i = 0; i < n_in; i++) {
        if (given[i]) continue;
        oa_tensor_t *t;
        oa_method_input(m, i, &t);
        size_t n = (size_t)snprintf(err, sizeof err, "input %u ('%s') is not given (the program takes %u input%s:", i,
                                    t->name, n_in, n_in == 1 ? "" : "s");
        for (uint32_t j = 0; j < n_in && n < sizeof err; j++) {
          oa_tensor_t *u;
          oa_method_input(m, j, &u);
          n += (size_t)snprintf(err + n, sizeof err - n, "%s '%s'", j ? "," : "", u->name);
        }
        if (n < sizeof err)
          snprintf(err + n, sizeof err - n, "%s); give each once with --input NAME=FILE.npy",
                   o.n_inputs ? "" : "; the file has no bundled test to take them from");
        free(given);
        return fail("--input", OA_ERR_INVALID_ARGUMENT, err);
      }
      free(given);
    }
    uint64_t t0 = oa_platform_now_ns();
    if ((st = oa_method_execute(m, &diag))) return fail(o.file, st, diag.message);
    double ms = (double)(oa_platform_now_ns() - t0) / 1e6;
    if (!o.bench) {
      if (g_json) printf("{\"event\": \"run\", \"ms\": %.6f}\n", ms);
      for (uint32_t i = 0; i < oa_method_output_count(m); i++) {
        const oa_tensor_t *t;
        oa_method_output(m, i, &t);
        print_tensor_summary(i, t);
        if (o.output_dir) {
          /* sized for the directory given: a fixed buffer silently cut long paths short */
          size_t len = strlen(o.output_dir) + 32;
          char *path = (char *)malloc(len);
          if (!path) return fail("--output-dir", OA_ERR_OUT_OF_MEMORY, "");
          snprintf(path, len, "%s/output_%u.npy", o.output_dir, i);
          int bad = npy_write(path, t, err, sizeof err);
          free(path);
          if (bad) return fail("--output-dir", OA_ERR_IO, err);
        }
      }
    }
  }
  if (o.bench) {
    int warm = o.warmup >= 0 ? o.warmup : (o.bench < 5 ? 1 : o.bench / 5);
    for (int i = 0; i < warm; i++)
      if ((st = oa_method_execute(m, &diag))) return fail(o.file, st, diag.message);
    double *times = (double *)malloc(sizeof(double) * (size_t)o.bench);
    if (!times) return fail("bench", OA_ERR_OUT_OF_MEMORY, "");
    uint64_t *prof = o.profile ? (uint64_t *)calloc(oa_method_instruction_count(m) + 1, sizeof(uint64_t)) : NULL;
    g_profile = prof;
    oa_method_set_profile(m, prof);
    for (int i = 0; i < o.bench; i++) {
      uint64_t t0 = oa_platform_now_ns();
      if ((st = oa_method_execute(m, &diag))) { free(times); return fail(o.file, st, diag.message); }
      times[i] = (double)(oa_platform_now_ns() - t0) / 1e6;
    }
    qsort(times, (size_t)o.bench, sizeof(double), cmp_double);
    if (o.profile) print_profile(m, o.bench);
    double sum = 0;
    for (int i = 0; i < o.bench; i++) sum += times[i];
    double median = o.bench % 2 ? times[o.bench / 2] : (times[o.bench / 2 - 1] + times[o.bench / 2]) / 2;
    if (g_json)
      printf("{\"event\": \"bench\", \"runs\": %d, \"median_ms\": %.6f, \"min_ms\": %.6f, \"mean_ms\": %.6f, "
             "\"max_ms\": %.6f, \"threads\": %d, \"arena_bytes\": %zu, \"total_bytes\": %zu}\n",
             o.bench, median, times[0], sum / o.bench, times[o.bench - 1], o.threads, req.arena_bytes,
             req.total_bytes);
    else
      printf("bench: %d runs, median %.3f ms, min %.3f ms, mean %.3f ms, max %.3f ms\n", o.bench, median, times[0],
             sum / o.bench, times[o.bench - 1]);
    free(times);
    oa_method_set_profile(m, NULL);
    free(prof);
  }
  fflush(stdout);
  return exit_code;
}
