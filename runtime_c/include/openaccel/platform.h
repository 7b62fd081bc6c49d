/* The platform layer: everything the runtime needs from an OS. The core (loader, verifier,
 * executor) never calls it on the execute path; a bare-metal port replaces platform_posix.c. */
#ifndef OPENACCEL_PLATFORM_H
#define OPENACCEL_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Aligned allocation for the optional convenience API (oa_method_create). NULL on failure.
 * `alignment` is a power of two. */
void *oa_platform_alloc(size_t size, size_t alignment);
void oa_platform_free(void *ptr);

/* Monotonic clock in nanoseconds (for benchmarks and event timing). */
uint64_t oa_platform_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_PLATFORM_H */
