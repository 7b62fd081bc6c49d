/* A tiny assertion layer for the C unit tests (no framework dependency). */
#ifndef OA_TEST_CHECK_H
#define OA_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      g_failures++;                                                           \
    }                                                                         \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                              \
  do {                                                                                               \
    if (!strstr((hay), (needle))) {                                                                  \
      fprintf(stderr, "%s:%d: expected \"%s\" in \"%s\"\n", __FILE__, __LINE__, (needle), (hay));    \
      g_failures++;                                                                                  \
    }                                                                                                \
  } while (0)

#define TEST_MAIN_END()                                               \
  do {                                                                \
    if (g_failures) fprintf(stderr, "%d check(s) failed\n", g_failures); \
    else printf("all checks passed\n");                               \
    return g_failures ? 1 : 0;                                        \
  } while (0)

#endif
