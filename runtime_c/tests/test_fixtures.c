/* Every loadable fixture runs its bundled tests and passes them, on the CPU device with its chosen
 * (optimized) kernels and with the reference kernels only: the expected outputs were computed
 * outside this runtime (fixtures/gen_fixtures.py: exact in float32; the pytest driver adds torch
 * exports with torch's outputs), so a broken kernel, plan or executor fails here. The checked-in
 * programs must all be found, each with at least one test. */
#include "check.h"
#include "fixtures.h"

static const char *const k_required[] = {"add_relu.oab", "mlp.oab", "linear_rows.oab", "conv_relu.oab"};

/* Run every bundled test of every method of `p`; returns the number of tests run. */
static unsigned run_all(const oa_program_t *p, const char *path, int reference_only) {
  oa_cpu_options_t opts;
  memset(&opts, 0, sizeof opts);
  opts.reference_only = reference_only;
  oa_cpu_device_t cpu_storage;
  oa_device_t *cpu;
  oa_diag_t diag;
  unsigned ran = 0;
  CHECK(oa_cpu_device_init(&cpu_storage, &opts, &cpu) == OA_OK);
  oa_method_config_t cfg = {&cpu, 1};
  for (uint32_t mi = 0; mi < p->method_count; mi++) {
    oa_method_t *m = NULL;
    if (oa_method_create(p, mi, &cfg, &m, &diag) != OA_OK) {
      fprintf(stderr, "%s: method %u: %s\n", path, mi, diag.message);
      g_failures++;
      continue;
    }
    for (uint32_t t = 0; t < oa_method_test_count(m); t++) {
      oa_test_result_t r;
      if (oa_method_run_test(m, t, &r, &diag) != OA_OK) {
        fprintf(stderr, "%s: test %u did not run: %s\n", path, t, diag.message);
        g_failures++;
        continue;
      }
      ran++;
      if (!r.passed) {
        fprintf(stderr, "%s (%s kernels): test '%s' failed: %lld mismatches, first at %lld of output %u, max abs error "
                "%g (atol %g, rtol %g)\n", path, reference_only ? "reference" : "chosen", r.name, (long long)r.mismatches,
                (long long)r.first_mismatch, r.worst_output, r.max_abs_error, r.atol, r.rtol);
        g_failures++;
      }
    }
    oa_method_destroy(m);
  }
  oa_device_destroy(cpu);
  return ran;
}

int main(void) {
  const char *dir = fixture_dir();
  DIR *d = *dir ? opendir(dir) : NULL;
  if (!d) {
    fprintf(stderr, "no fixture directory ('%s'): set OA_FIXTURES\n", dir);
    return 2;
  }
  unsigned files = 0, tests = 0, required = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".oab")) continue;
    if (strncmp(e->d_name, "refused_", 8) == 0 || strstr(e->d_name, "newer_version")) continue;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    fixture_t fx;
    CHECK(fixture_read(path, &fx) == 0);
    oa_program_t p;
    oa_diag_t diag;
    if (oa_program_load(fx.data, fx.size, &p, &diag) != OA_OK) {
      fprintf(stderr, "%s: %s\n", path, diag.message);
      g_failures++;
      fixture_free(&fx);
      continue;
    }
    unsigned chosen = run_all(&p, path, 0), reference = run_all(&p, path, 1);
    CHECK(chosen == reference);
    for (size_t k = 0; k < sizeof k_required / sizeof k_required[0]; k++) {
      if (strcmp(e->d_name, k_required[k]) != 0) continue;
      required++;
      if (!chosen) fprintf(stderr, "%s has no bundled tests\n", path);
      CHECK(chosen > 0);
    }
    files++;
    tests += chosen + reference;
    fixture_free(&fx);
  }
  closedir(d);
  if (required != sizeof k_required / sizeof k_required[0])
    fprintf(stderr, "found %u of the %zu checked-in programs in '%s'\n", required,
            sizeof k_required / sizeof k_required[0], dir);
  CHECK(required == sizeof k_required / sizeof k_required[0]);
  printf("%u fixtures, %u bundled tests run (chosen and reference kernels)\n", files, tests);
  TEST_MAIN_END();
}
