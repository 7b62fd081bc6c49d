/* oa_format, diagnostics and status names. */
#include "check.h"
#include "openaccel/openaccel.h"

static void expect_fmt(const char *want, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  oa_vformat(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (strcmp(buf, want) != 0) {
    fprintf(stderr, "format \"%s\": got \"%s\", want \"%s\"\n", fmt, buf, want);
    g_failures++;
  }
}

int main(void) {
  expect_fmt("a 12 -7 ff x", "a %d %lld %x %s", 12, -7LL, 255u, "x");
  expect_fmt("size 42 / 18446744073709551615", "size %zu / %llu", (size_t)42, 18446744073709551615ULL);
  expect_fmt("1.5 0.0001 1e-05 1e+20 -2 nan inf 0", "%g %g %g %g %g %g %g %g", 1.5, 1e-4, 1e-5, 1e20, -2.0,
             0.0 / 0.0, 1.0 / 0.0, 0.0);
  expect_fmt("3.142", "%.4g", 3.14159);
  expect_fmt("100%", "100%%");
  /* truncation always NUL-terminates */
  char small[5];
  size_t n = oa_format(small, sizeof small, "%s", "abcdefgh");
  CHECK(n == 4);
  CHECK(strcmp(small, "abcd") == 0);
  /* diagnostics: fail replaces, context prepends */
  oa_diag_t d;
  oa_diag_clear(&d);
  CHECK(oa_diag_fail(&d, OA_ERR_INVALID_PROGRAM, "inner %d", 1) == OA_ERR_INVALID_PROGRAM);
  oa_diag_context(&d, OA_ERR_INVALID_PROGRAM, "outer");
  CHECK(strcmp(d.message, "outer: inner 1") == 0);
  CHECK(d.status == OA_ERR_INVALID_PROGRAM);
  oa_diag_fail(&d, OA_ERR_UNSUPPORTED, "fresh");
  CHECK(strcmp(d.message, "fresh") == 0);
  CHECK(oa_diag_fail(NULL, OA_ERR_IO, "ignored") == OA_ERR_IO);
  CHECK(strcmp(oa_status_name(OA_ERR_TIMEOUT), "TIMEOUT") == 0);
  CHECK(strcmp(oa_status_name((oa_status_t)999), "UNKNOWN") == 0);
  CHECK(oa_dtype_size(OA_DTYPE_FLOAT32) == 4 && oa_dtype_size(OA_DTYPE_BOOL) == 1 && oa_dtype_size(99) == 0);
  CHECK(strcmp(oa_dtype_name(OA_DTYPE_INT64), "int64") == 0);
  TEST_MAIN_END();
}
