/* Loading .oab fixtures: from $OA_FIXTURES when set (tests/test_c_runtime.py exports torch models
 * there next to copies of the checked-in ones), else from the checked-in runtime_c/tests/fixtures
 * (OA_FIXTURES_DIR, compiled in; written by fixtures/gen_fixtures.py), so `make test-c` needs no
 * Python. */
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

#ifndef OA_FIXTURES_DIR
#define OA_FIXTURES_DIR ""
#endif

/* The directory the fixtures are read from ("" when neither is set). */
static inline const char *fixture_dir(void) {
  const char *dir = getenv("OA_FIXTURES");
  return dir && *dir ? dir : OA_FIXTURES_DIR;
}

/* Path of fixture `name` in fixture_dir(), or NULL. */
static inline const char *fixture_path(const char *name, char *buf, size_t size) {
  const char *dir = fixture_dir();
  if (!*dir) return NULL;
  snprintf(buf, size, "%s/%s", dir, name);
  FILE *f = fopen(buf, "rb");
  if (!f) return NULL;
  fclose(f);
  return buf;
}

#endif
