/* The CPU device allocates everything through the allocator it is given: its thread pool, its
 * memory, its streams and events (and, from a factory, the device object), and nothing at init
 * with threads 1 or on prepare / execute.
 *
 * "Everything" is checked against the heap itself: the test is linked with --wrap for malloc,
 * calloc, realloc, free, posix_memalign and aligned_alloc, so any heap call the runtime makes
 * other than through the counting allocator (oa_platform_alloc included) is counted as direct. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "openaccel/openaccel.h"

/* ---- heap calls the runtime makes directly ---------------------------------------------------- */
static long g_direct = 0;
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
void *__wrap_malloc(size_t n) { g_direct++; return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { g_direct++; return __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { g_direct++; return __real_realloc(p, n); }
void __wrap_free(void *p) { g_direct += p != NULL; __real_free(p); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { g_direct++; return __real_posix_memalign(p, a, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { g_direct++; return __real_aligned_alloc(a, n); }

/* ---- the counting allocator --------------------------------------------------------------------- */
typedef struct counter {
  long allocs, frees, live;
} counter_t;

static void *count_alloc(void *ctx, size_t size, size_t alignment) {
  counter_t *c = (counter_t *)ctx;
  void *p = NULL;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (__real_posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
  c->allocs++;
  c->live++;
  return p;
}

static void count_free(void *ctx, void *ptr) {
  counter_t *c = (counter_t *)ctx;
  if (!ptr) return;
  c->frees++;
  c->live--;
  __real_free(ptr);
}

#if defined(OA_HAVE_PTHREADS)
#define POOL_BLOCKS 2 /* the pool's state and its worker handles */
#else
#define POOL_BLOCKS 0 /* no thread pool in this build */
#endif

enum { N = 1 << 16 };
static float g_x[N], g_y[N];

/* Memory, a stream and an event, then a relu over N floats: exactly three allocations and three
 * frees through the allocator, none on prepare / execute, and no direct heap call. */
static void use_device(oa_device_t *dev, const counter_t *c, const char *what) {
  long a0 = c->allocs, f0 = c->frees, d0 = g_direct;
  void *mem = NULL;
  oa_stream_t *stream = NULL;
  oa_event_t *event = NULL;
  CHECK(oa_device_allocate(dev, 1000, 256, &mem) == OA_OK && mem && (uintptr_t)mem % 256 == 0);
  CHECK(oa_stream_create(dev, 0, &stream) == OA_OK && stream);
  CHECK(oa_event_create(dev, OA_EVENT_TIMING, &event) == OA_OK && event);
  CHECK(c->allocs == a0 + 3);
  oa_tensor_t x = {.data = g_x, .shape = {N}, .ndim = 1, .dtype = OA_DTYPE_FLOAT32, .numel = N,
                   .nbytes = sizeof g_x, .name = "x"};
  oa_tensor_t y = x;
  y.data = g_y;
  y.name = "y";
  for (int i = 0; i < N; i++) g_x[i] = (float)(i % 7) - 3.0f;
  oa_tensor_t *in[1] = {&x}, *out[1] = {&y};
  oa_op_call_t call = {.op = "relu", .inputs = in, .n_inputs = 1, .outputs = out, .n_outputs = 1};
  oa_op_plan_t plan;
  oa_diag_t diag;
  long before = c->allocs;
  CHECK(oa_device_prepare_op(dev, &call, &plan, &diag) == OA_OK && plan.scratch_bytes == 0);
  CHECK(oa_device_execute_op(dev, stream, &call, &plan, NULL, &diag) == OA_OK);
  CHECK(oa_event_record(dev, event, stream) == OA_OK);
  CHECK(c->allocs == before);
  CHECK(g_y[0] == 0.0f && g_y[6] == 3.0f);
  CHECK(oa_event_destroy(dev, event) == OA_OK);
  CHECK(oa_stream_destroy(dev, stream) == OA_OK);
  CHECK(oa_device_free(dev, mem) == OA_OK);
  CHECK(c->allocs == a0 + 3 && c->frees == f0 + 3);
  CHECK(g_direct == d0);
  if (c->allocs != a0 + 3 || c->frees != f0 + 3 || g_direct != d0)
    fprintf(stderr, "  (%s: %ld allocations, %ld frees, %ld direct heap calls)\n", what, c->allocs - a0,
            c->frees - f0, g_direct - d0);
}

static void test_init_with_threads(int32_t threads, long expected_pool_blocks) {
  counter_t c = {0, 0, 0};
  oa_allocator_t a = {&c, count_alloc, count_free};
  oa_cpu_options_t opts = {.threads = threads, .allocator = &a};
  oa_cpu_device_t storage;
  oa_device_t *dev = NULL;
  long d0 = g_direct;
  CHECK(oa_cpu_device_init(&storage, &opts, &dev) == OA_OK && dev);
  CHECK(c.allocs == expected_pool_blocks);
  CHECK(g_direct == d0);
  int64_t v = -1;
  CHECK(oa_device_query_i64(dev, "cpu", "threads", &v) == OA_OK && v == threads);
  a.ctx = NULL; /* the device copied the allocator at init */
  use_device(dev, &c, threads > 1 ? "threads 3" : "threads 1");
  oa_cpu_device_deinit(&storage);
  CHECK(c.frees == c.allocs && c.live == 0);
  CHECK(g_direct == d0);
  if (c.allocs != expected_pool_blocks + 3)
    fprintf(stderr, "  (threads %d: %ld allocations through the allocator, expected %ld)\n", (int)threads, c.allocs,
            expected_pool_blocks + 3);
}

/* Without an allocator the pool comes from the platform's heap: the direct counter sees it, so
 * the zero counts above mean something. */
static void test_default_allocator_is_the_platform(void) {
  oa_cpu_options_t opts = {.threads = 3};
  oa_cpu_device_t storage;
  oa_device_t *dev = NULL;
  long d0 = g_direct;
  CHECK(oa_cpu_device_init(&storage, &opts, &dev) == OA_OK);
  CHECK(g_direct - d0 == POOL_BLOCKS);
  void *mem = NULL;
  CHECK(oa_device_allocate(dev, 64, 0, &mem) == OA_OK);
  CHECK(g_direct - d0 == POOL_BLOCKS + 1);
  CHECK(oa_device_free(dev, mem) == OA_OK);
  oa_cpu_device_deinit(&storage);
  CHECK(g_direct - d0 == 2 * POOL_BLOCKS + 2);
}

/* A registry's allocator reaches the CPU device its factory creates: the device object too. */
static void test_factory_device(void) {
  counter_t c = {0, 0, 0};
  oa_allocator_t a = {&c, count_alloc, count_free};
  oa_registry_t reg;
  oa_device_t *devs[OA_REGISTRY_MAX_DEVICES];
  uint32_t n = 0;
  long d0 = g_direct;
  oa_registry_init(&reg, &a);
  CHECK(oa_registry_register(&reg, oa_cpu_device_factory()) == OA_OK);
  CHECK(oa_registry_enumerate(&reg, devs, OA_REGISTRY_MAX_DEVICES, &n, NULL) == OA_OK && n == 1);
  CHECK(c.allocs == 1);
  use_device(devs[0], &c, "factory device");
  oa_registry_release(&reg);
  CHECK(c.live == 0 && c.frees == c.allocs);
  CHECK(g_direct == d0);
}

static void test_incomplete_allocator_is_refused(void) {
  counter_t c = {0, 0, 0};
  oa_allocator_t no_free = {&c, count_alloc, NULL};
  oa_cpu_options_t opts = {.threads = 3, .allocator = &no_free};
  oa_cpu_device_t storage;
  oa_device_t *dev = NULL;
  CHECK(oa_cpu_device_init(&storage, &opts, &dev) == OA_ERR_INVALID_ARGUMENT && dev == NULL);
  CHECK(c.allocs == 0);
}

int main(void) {
  test_init_with_threads(1, 0);
  test_init_with_threads(3, POOL_BLOCKS);
  test_default_allocator_is_the_platform();
  test_factory_device();
  test_incomplete_allocator_is_refused();
  TEST_MAIN_END();
}
