/* A firmware developer's starting point: embed a model, ask the runtime for the exact memory it
 * needs, run it in ONE static arena, print the outputs. No malloc anywhere in the runtime:
 * the allocator is wrapped and counted while openaccel runs, and the count is printed.
 *
 *   c_app [model.oab]      (without an argument, the model linked in with -DOA_APP_MODEL)
 *   c_app --heap-probe M   use the allocating convenience API instead, to show the counter works
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openaccel/openaccel.h"

#ifndef OA_APP_ARENA_BYTES
#define OA_APP_ARENA_BYTES (8u << 20)
#endif

/* ---- heap accounting ---------------------------------------------------------------------- */
static int g_counting = 0;
static long g_heap_calls = 0;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n) { g_heap_calls += g_counting; return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { g_heap_calls += g_counting; return __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { g_heap_calls += g_counting; return __real_realloc(p, n); }
void __wrap_free(void *p) { g_heap_calls += g_counting && p; __real_free(p); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { g_heap_calls += g_counting; return __real_posix_memalign(p, a, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { g_heap_calls += g_counting; return __real_aligned_alloc(a, n); }

/* ---- the model ---------------------------------------------------------------------------- */
#ifdef OA_APP_EMBEDDED_MODEL
extern const unsigned char oa_app_model[];
extern const size_t oa_app_model_size;
#endif

/* the one arena: method state, planned activations and kernel scratch all live here */
static _Alignas(64) unsigned char g_arena[OA_APP_ARENA_BYTES];
/* a file read at start-up lands here (a real firmware would point at flash instead) */
static _Alignas(64) unsigned char g_file[OA_APP_ARENA_BYTES];

static int fail(const char *what, oa_status_t st, const oa_diag_t *diag) {
  fprintf(stderr, "c_app: %s failed: %s: %s\n", what, oa_status_name(st), diag->message);
  return 2;
}

int main(int argc, char **argv) {
  int heap_probe = argc > 2 && strcmp(argv[1], "--heap-probe") == 0;
  if (heap_probe) {
    argv++;
    argc--;
  }
  const unsigned char *model = NULL;
  size_t model_size = 0;
  if (argc > 1) {
    FILE *f = fopen(argv[1], "rb");
    if (!f) { fprintf(stderr, "c_app: cannot open %s\n", argv[1]); return 2; }
    model_size = fread(g_file, 1, sizeof g_file, f);
    int too_big = fgetc(f) != EOF;
    fclose(f);
    if (too_big) { fprintf(stderr, "c_app: %s is larger than %zu bytes\n", argv[1], sizeof g_file); return 2; }
    model = g_file;
  } else {
#ifdef OA_APP_EMBEDDED_MODEL
    model = oa_app_model;
    model_size = oa_app_model_size;
#else
    fprintf(stderr, "usage: c_app model.oab (or build with -DOA_APP_MODEL=model.oab)\n");
    return 2;
#endif
  }

  oa_diag_t diag;
  oa_program_t program;
  oa_cpu_device_t cpu_storage;
  oa_device_t *cpu;
  oa_memory_requirements_t req;
  oa_method_t *method;
  oa_status_t st;

  g_counting = 1; /* from here to the end of execute, any heap call is the runtime's */
  if ((st = oa_program_load(model, model_size, &program, &diag))) return fail("load", st, &diag);
  if ((st = oa_cpu_device_init(&cpu_storage, NULL, &cpu))) return fail("cpu device", st, &diag);
  oa_method_config_t config = {&cpu, 1};
  if ((st = oa_method_requirements(&program, 0, &config, &req, &diag))) return fail("requirements", st, &diag);
  g_counting = 0;
  printf("model: %zu bytes (%s); memory needed: %zu bytes (state %zu + arena %zu + scratch %zu), "
         "static arena %zu bytes\n", model_size, argc > 1 ? "from file" : "linked in", req.total_bytes,
         req.state_bytes, req.arena_bytes, req.scratch_bytes, sizeof g_arena);
  if (req.total_bytes > sizeof g_arena) {
    fprintf(stderr, "c_app: the arena is too small: rebuild with -DOA_APP_ARENA_BYTES=%zu\n", req.total_bytes);
    return 2;
  }
  g_counting = 1;
  if (heap_probe) {
    /* the convenience API allocates through the platform layer: the counter must see it */
    if ((st = oa_method_create(&program, 0, &config, &method, &diag))) return fail("create", st, &diag);
    g_counting = 0;
    printf("heap allocations by oa_method_create: %ld\n", g_heap_calls);
    oa_method_destroy(method);
    return g_heap_calls > 0 ? 0 : 1;
  }
  if ((st = oa_method_prepare(&program, 0, &config, g_arena, sizeof g_arena, &method, &diag)))
    return fail("prepare", st, &diag);
  /* inputs: the bundled test vector's if the file has one, else zeros as placed by prepare */
  oa_test_result_t result;
  int have_test = oa_method_test_count(method) > 0;
  if (have_test) {
    if ((st = oa_method_run_test(method, 0, &result, &diag))) return fail("bundled test", st, &diag);
  } else if ((st = oa_method_execute(method, &diag))) {
    return fail("execute", st, &diag);
  }
  g_counting = 0;

  for (uint32_t i = 0; i < oa_method_output_count(method); i++) {
    const oa_tensor_t *t;
    oa_method_output(method, i, &t);
    printf("output %u '%s' %s [", i, t->name, oa_dtype_name(t->dtype));
    for (int32_t d = 0; d < t->ndim; d++) printf(d ? ", %lld" : "%lld", (long long)t->shape[d]);
    printf("]:");
    for (int64_t k = 0; k < t->numel && k < 8; k++) {
      if (t->dtype == OA_DTYPE_FLOAT32) printf(" %.5g", (double)((const float *)t->data)[k]);
      else if (t->dtype == OA_DTYPE_INT64) printf(" %lld", (long long)((const int64_t *)t->data)[k]);
    }
    printf(t->numel > 8 ? " ...\n" : "\n");
  }
  if (have_test)
    printf("bundled test: %s (max abs error %.3g)\n", result.passed ? "PASS" : "FAIL", result.max_abs_error);
  printf("heap allocations by the runtime: %ld\n", g_heap_calls);
  oa_method_release(method);
  return (have_test && !result.passed) || g_heap_calls ? 1 : 0;
}
