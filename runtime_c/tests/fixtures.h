/* Loading the .oab fixtures the pytest driver exported into $OA_FIXTURES. */
#ifndef OA_TEST_FIXTURES_H
#define OA_TEST_FIXTURES_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openaccel/openaccel.h"

typedef struct fixture {
  char path[2048];
  uint8_t *data; /* 64-byte aligned */
  size_t size;
} fixture_t;

static inline int fixture_read(const char *path, fixture_t *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  out->data = (uint8_t *)oa_platform_alloc((size_t)n + 64, 64);
  out->size = (size_t)n;
  snprintf(out->path, sizeof out->path, "%s", path);
  int bad = !out->data || fread(out->data, 1, (size_t)n, f) != (size_t)n;
  fclose(f);
  return bad;
}

static inline void fixture_free(fixture_t *f) { oa_platform_free(f->data); f->data = NULL; }

/* Path of fixture `name` in $OA_FIXTURES, or NULL. */
static inline const char *fixture_path(const char *name, char *buf, size_t size) {
  const char *dir = getenv("OA_FIXTURES");
  if (!dir || !*dir) return NULL;
  snprintf(buf, size, "%s/%s", dir, name);
  FILE *f = fopen(buf, "rb");
  if (!f) return NULL;
  fclose(f);
  return buf;
}

#endif
