/* The CPU thread pool under concurrent callers: two application threads driving one pool at once
 * (two methods on one CPU device, executed from two threads) must each get their whole range done
 * exactly once; the one that finds the pool busy runs its range itself. Also nested calls, and
 * jobs that finish while no worker runs (the pool is compiled in here with its test hold: the
 * workers then claim nothing, as when their cores are taken; a caller that waited for them would
 * never return). */
#include <stdint.h>

#include "check.h"
#define OA_THREADPOOL_TESTING 1
#include "cpu/threadpool.c"

#if defined(OA_HAVE_PTHREADS)
#include <pthread.h>

#define N 4096
#define ROUNDS 300

typedef struct {
  struct oa_threadpool *pool;
  int32_t *out;
  int32_t value;
  int failures;
} job_t;

static void fill(void *ctx, int64_t begin, int64_t end) {
  job_t *j = (job_t *)ctx;
  for (int64_t i = begin; i < end; i++) j->out[i] += j->value;
}

static void *caller(void *arg) {
  job_t *j = (job_t *)arg;
  for (int r = 0; r < ROUNDS; r++) {
    for (int64_t i = 0; i < N; i++) j->out[i] = 0;
    oa_parallel_for(j->pool, N, 16, fill, j);
    for (int64_t i = 0; i < N; i++)
      if (j->out[i] != j->value) { j->failures++; break; }
  }
  return NULL;
}

typedef struct {
  struct oa_threadpool *pool;
  int32_t *out;
} nest_t;

static void nested(void *ctx, int64_t begin, int64_t end) {
  nest_t *n = (nest_t *)ctx;
  for (int64_t i = begin; i < end; i++) {
    job_t inner = {n->pool, n->out + i * 8, 1, 0};
    oa_parallel_for(n->pool, 8, 1, fill, &inner); /* the pool is busy: runs inline */
  }
}

int main(void) {
  oa_allocator_t a = oa_platform_allocator();
  struct oa_threadpool *pool = NULL;
  CHECK(oa_threadpool_create(3, &a, &pool) == OA_OK);
  CHECK(oa_threadpool_size(pool) == 3);
  static int32_t out1[N], out2[N], out3[N];
  job_t j1 = {pool, out1, 1, 0}, j2 = {pool, out2, 2, 0}, j3 = {pool, out3, 3, 0};
  pthread_t t1, t2, t3;
  CHECK(pthread_create(&t1, NULL, caller, &j1) == 0);
  CHECK(pthread_create(&t2, NULL, caller, &j2) == 0);
  CHECK(pthread_create(&t3, NULL, caller, &j3) == 0);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  pthread_join(t3, NULL);
  CHECK(j1.failures == 0 && j2.failures == 0 && j3.failures == 0);

  static int32_t grid[64 * 8];
  nest_t n = {pool, grid};
  oa_parallel_for(pool, 64, 1, nested, &n);
  int ok = 1;
  for (int i = 0; i < 64 * 8; i++) ok &= grid[i] == 1;
  CHECK(ok);

  /* workers held: every job still completes, on the caller alone; released: they take part again */
  atomic_store(&oa_threadpool_test_hold_workers, 1);
  for (int r = 0; r < 200; r++) {
    for (int64_t i = 0; i < N; i++) out1[i] = 0;
    oa_parallel_for(pool, N, 16, fill, &j1);
    for (int64_t i = 0; i < N; i++)
      if (out1[i] != 1) { ok = 0; break; }
  }
  CHECK(ok);
  atomic_store(&oa_threadpool_test_hold_workers, 0);
  j1.failures = 0;
  caller(&j1);
  CHECK(j1.failures == 0);
  oa_threadpool_destroy(pool);
  TEST_MAIN_END();
}
#else
int main(void) {
  printf("no pthreads in this build: nothing to check\n");
  return 0;
}
#endif
