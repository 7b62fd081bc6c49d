/* A small thread pool for the CPU kernels. Created with the CPU device (options.threads > 1),
 * never on the execute path. `oa_parallel_for` splits [0, n) into chunks run by the workers and
 * the calling thread; it allocates nothing. With a NULL pool (threads 0 or 1, or a build without
 * pthreads) it simply calls fn(ctx, 0, n): no threads at all. */
#ifndef OA_CPU_THREADPOOL_H
#define OA_CPU_THREADPOOL_H

#include <stdint.h>

#include "openaccel/allocator.h"
#include "openaccel/status.h"

struct oa_threadpool;

typedef void (*oa_parallel_fn)(void *ctx, int64_t begin, int64_t end);

/* Start `threads - 1` workers (the caller is the last one). NULL when threads <= 1. */
oa_status_t oa_threadpool_create(int32_t threads, const oa_allocator_t *allocator, struct oa_threadpool **out_pool);
void oa_threadpool_destroy(struct oa_threadpool *pool);
int32_t oa_threadpool_size(const struct oa_threadpool *pool);

/* Run fn over [0, n) in chunks of at least `grain` items. Results must not depend on how the
 * range is split (kernels partition outputs, never a reduction's summation order). */
void oa_parallel_for(struct oa_threadpool *pool, int64_t n, int64_t grain, oa_parallel_fn fn, void *ctx);

#endif
