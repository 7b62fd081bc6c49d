/* The platform layer for hosted builds (Linux and other POSIX systems). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "openaccel/platform.h"

void *oa_platform_alloc(size_t size, size_t alignment) {
  void *p = NULL;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (size == 0) size = alignment;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  return p;
}

void oa_platform_free(void *ptr) { free(ptr); }

uint64_t oa_platform_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
