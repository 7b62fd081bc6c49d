/* Thread pool: one job at a time, chunks handed out with an atomic counter. Between jobs a worker
 * first polls for up to OA_SPIN_NS (a model's kernels come back to back with serial gaps of up to
 * some tens of microseconds between them, and waking a sleeping thread costs as much), then sleeps
 * on a condition variable. A count of polls was too short: 20000 polls took 6 us here, so workers
 * slept in the gaps inside one ResNet-18 run (2 threads 8.8 -> 8.4 ms with the time bound).
 * A caller that finds the pool busy (another thread's method executing on the same CPU device, or
 * a kernel nested inside a job) runs its range itself: the same result, since kernels never depend
 * on how a range is split, and two submitters never share the job fields.
 *
 * The caller waits for the job's chunks, not for the workers: a worker that is not running (its
 * core taken by another process, or asleep) leaves its chunks to the others, the caller included.
 * Waiting for every worker to check in made each call wait for the worker's next time slice
 * whenever another process held the other core (2 threads, a busy loop on the second core of two,
 * oa_run medians: MobileNetV2 int8 6.1-15.4 ms -> 3.5-4.0, ResNet-18 fp32 25-28 -> 18-20; one
 * thread 2.5-2.8 and 15-17; on a quiet machine no difference). A chunk is claimed from `ticket`,
 * which holds the job's generation, its chunk count and the next chunk: a worker that wakes late
 * either finds the job's chunks gone or claims a chunk of the job that is current when it claims,
 * and it reads the job's fields only after a claim succeeded, while the caller still waits for
 * that chunk. */
#include "threadpool.h"

#if defined(OA_HAVE_PTHREADS)
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "openaccel/platform.h"

typedef struct oa_threadpool {
  oa_allocator_t allocator;
  int32_t n_workers;
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  /* the current job */
  atomic_ullong generation; /* bumped (under lock) for every job, after its fields are set */
  int stop;                 /* guarded by lock */
  oa_parallel_fn fn;
  void *ctx;
  int64_t n, chunk;
  atomic_ullong ticket;     /* generation << 32 | chunks << 16 | next chunk (TICKET_* below) */
  atomic_llong done;        /* chunks of the current job finished */
  unsigned long long jobs;  /* jobs submitted (the caller holding in_use writes it) */
  atomic_flag in_use;       /* set by the caller that owns the current job */
} oa_threadpool_t;

/* chunks per job: at most 4 per thread, threads <= 256 */
#define TICKET_CHUNKS(t) (((t) >> 16) & 0xffffu)
#define TICKET_NEXT(t) ((t)&0xffffu)

#if defined(OA_THREADPOOL_TESTING)
/* tests/test_threadpool.c: while set, workers claim nothing (a stand-in for workers that do not
 * get the CPU) */
atomic_int oa_threadpool_test_hold_workers;
#define WORKERS_HELD() atomic_load(&oa_threadpool_test_hold_workers)
#else
#define WORKERS_HELD() 0
#endif

/* Claim and run chunks of the current job until none is left. */
static void run_chunks(oa_threadpool_t *p) {
  unsigned long long t = atomic_load_explicit(&p->ticket, memory_order_acquire);
  for (;;) {
    if (TICKET_NEXT(t) >= TICKET_CHUNKS(t)) return;
    if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire))
      continue; /* t reloaded: another claim, or a newer job */
    /* chunk TICKET_NEXT(t) of the job is ours: the caller waits for it, so the fields are its */
    const int64_t begin = (int64_t)TICKET_NEXT(t) * p->chunk;
    const int64_t end = begin + p->chunk < p->n ? begin + p->chunk : p->n;
    p->fn(p->ctx, begin, end);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    t = atomic_load_explicit(&p->ticket, memory_order_acquire);
  }
}

#ifndef OA_SPIN_NS
#define OA_SPIN_NS 200000 /* 0.2 ms: longer than the gaps inside a run, short next to a run */
#endif

/* Poll for a job after `seen` until one comes or OA_SPIN_NS have passed. The clock is read every
 * 1024 polls (a vDSO call costs as much as some hundred polls). */
static void spin_for_job(oa_threadpool_t *p, unsigned long long seen) {
  const uint64_t start = oa_platform_now_ns();
  for (;;) {
    for (int i = 0; i < 1024; i++)
      if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen) return;
    if (oa_platform_now_ns() - start > (uint64_t)OA_SPIN_NS) return;
  }
}

static void *worker_main(void *arg) {
  oa_threadpool_t *p = (oa_threadpool_t *)arg;
  unsigned long long seen = 0;
  for (;;) {
    spin_for_job(p, seen);
    pthread_mutex_lock(&p->lock);
    while (!p->stop && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) {
      pthread_mutex_unlock(&p->lock);
      return NULL;
    }
    seen = atomic_load(&p->generation);
    pthread_mutex_unlock(&p->lock);
    while (WORKERS_HELD()) sched_yield();
    run_chunks(p);
  }
}

oa_status_t oa_threadpool_create(int32_t threads, const oa_allocator_t *allocator, oa_threadpool_t **out_pool) {
  *out_pool = NULL;
  if (threads <= 1) return OA_OK;
  if (threads > 256) threads = 256;
  oa_threadpool_t *p = (oa_threadpool_t *)allocator->alloc(allocator->ctx, sizeof *p, 64);
  if (!p) return OA_ERR_OUT_OF_MEMORY;
  *p = (oa_threadpool_t){0};
  p->allocator = *allocator;
  p->workers = (pthread_t *)allocator->alloc(allocator->ctx, sizeof(pthread_t) * (size_t)(threads - 1), 16);
  if (!p->workers) {
    allocator->free(allocator->ctx, p);
    return OA_ERR_OUT_OF_MEMORY;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  atomic_init(&p->ticket, 0);
  atomic_init(&p->generation, 0);
  atomic_init(&p->done, 0);
  atomic_flag_clear(&p->in_use);
  for (int32_t i = 0; i < threads - 1; i++) {
    if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) break;
    p->n_workers++;
  }
  *out_pool = p;
  return OA_OK;
}

void oa_threadpool_destroy(oa_threadpool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (int32_t i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  oa_allocator_t a = p->allocator;
  a.free(a.ctx, p->workers);
  a.free(a.ctx, p);
}

int32_t oa_threadpool_size(const oa_threadpool_t *p) { return p ? p->n_workers + 1 : 1; }

void oa_parallel_for(oa_threadpool_t *p, int64_t n, int64_t grain, oa_parallel_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->n_workers == 0 || n <= grain || atomic_flag_test_and_set_explicit(&p->in_use, memory_order_acquire)) {
    fn(ctx, 0, n);
    return;
  }
  int64_t threads = p->n_workers + 1;
  /* a few chunks per thread balance uneven work without much counter traffic */
  int64_t chunk = (n + threads * 4 - 1) / (threads * 4);
  if (chunk < grain) chunk = grain;
  const int64_t chunks = (n + chunk - 1) / chunk; /* <= 4 * threads <= 1024 */
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->chunk = chunk;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  p->jobs++;
  /* publishes the fields above to whoever claims a chunk (acquire on the ticket) */
  atomic_store_explicit(&p->ticket, (p->jobs & 0xffffffffull) << 32 | (unsigned long long)chunks << 16,
                        memory_order_release);
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->generation, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  run_chunks(p);
  /* the chunks the workers claimed: they are running them */
  while (atomic_load_explicit(&p->done, memory_order_acquire) < chunks) sched_yield();
  atomic_flag_clear_explicit(&p->in_use, memory_order_release);
}

#else /* no threads in this build: everything runs on the caller */

oa_status_t oa_threadpool_create(int32_t threads, const oa_allocator_t *allocator, struct oa_threadpool **out_pool) {
  (void)threads;
  (void)allocator;
  *out_pool = NULL;
  return OA_OK;
}
void oa_threadpool_destroy(struct oa_threadpool *pool) { (void)pool; }
int32_t oa_threadpool_size(const struct oa_threadpool *pool) {
  (void)pool;
  return 1;
}
void oa_parallel_for(struct oa_threadpool *pool, int64_t n, int64_t grain, oa_parallel_fn fn, void *ctx) {
  (void)pool;
  (void)grain;
  if (n > 0) fn(ctx, 0, n);
}
#endif
