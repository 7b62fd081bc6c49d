/* Allocators: passed in explicitly (IREE style), never a hidden global.
 *
 * Whoever creates an object that needs memory outside the execute path (a registry creating its
 * devices, a device creating its streams, events, thread pool or memory) is handed an
 * oa_allocator_t and uses it for exactly that. Execute never allocates.
 */
#ifndef OPENACCEL_ALLOCATOR_H
#define OPENACCEL_ALLOCATOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `alloc` returns `size` bytes aligned to `alignment` (a power of two), or NULL when it cannot;
 * `free` releases a block `alloc` returned. `ctx` is passed back to both. An allocator may be
 * called from any thread that creates or destroys the objects it serves. */
typedef struct oa_allocator {
  void *ctx;
  void *(*alloc)(void *ctx, size_t size, size_t alignment); /* NULL on failure */
  void (*free)(void *ctx, void *ptr);
} oa_allocator_t;

/* The platform layer's allocator (oa_platform_alloc / oa_platform_free). A function of
 * libopenaccel: a device plugin uses the allocator its factory is handed instead. */
oa_allocator_t oa_platform_allocator(void);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_ALLOCATOR_H */
