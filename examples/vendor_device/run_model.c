/* run_model: an application that runs an .oab program on the CPU plus the devices of vendor
 * libraries, and checks its bundled test vectors.
 *
 *   run_model MODEL.oab LIB.so [LIB.so ...]
 *
 * It registers the built-in CPU factory and each library's `oa_device_factory` in one registry and
 * passes every device to the method: the file's device slots ("cpu", "vendor.sim", ...) bind to
 * devices by kind name. Prints one line per test and "N passed, N failed"; exit 0 when all pass,
 * 1 when a test fails, 2 when the file or a library cannot be used. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openaccel/openaccel.h"

#define MAX_LIBS 8

static void *read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = oa_platform_alloc(n ? (size_t)n : 1, 64); /* constants are used in place */
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    oa_platform_free(buf);
    buf = NULL;
  }
  fclose(f);
  *out_size = n > 0 ? (size_t)n : 0;
  return buf;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc - 2 > MAX_LIBS) {
    fprintf(stderr, "usage: run_model MODEL.oab LIB.so [LIB.so ...] (at most %d libraries)\n", MAX_LIBS);
    return 2;
  }
  int rc = 2;
  void *handles[MAX_LIBS] = {NULL};
  int n_handles = 0;
  oa_method_t *method = NULL;
  oa_diag_t diag;
  oa_diag_clear(&diag);
  size_t size = 0;
  void *data = read_file(argv[1], &size);
  oa_registry_t reg;
  oa_registry_init(&reg, NULL);
  if (!data) {
    fprintf(stderr, "run_model: error: cannot read %s\n", argv[1]);
    goto out;
  }
  if (oa_registry_register(&reg, oa_cpu_device_factory())) goto out;
  for (int i = 2; i < argc; i++) {
    void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "run_model: error: cannot load %s: %s\n", argv[i], dlerror());
      goto out;
    }
    handles[n_handles++] = h;
    void *sym = dlsym(h, OA_DEVICE_FACTORY_SYMBOL);
    oa_device_factory_fn get;
    if (!sym) {
      fprintf(stderr, "run_model: error: %s does not export oa_device_factory\n", argv[i]);
      goto out;
    }
    memcpy(&get, &sym, sizeof get);
    oa_status_t st = oa_registry_register(&reg, get());
    if (st) {
      fprintf(stderr, "run_model: error: %s: cannot register its factory: %s\n", argv[i], oa_status_name(st));
      goto out;
    }
  }
  oa_device_t *devices[OA_REGISTRY_MAX_DEVICES];
  uint32_t count = 0;
  oa_status_t st = oa_registry_enumerate(&reg, devices, OA_REGISTRY_MAX_DEVICES, &count, &diag);
  if (st) {
    fprintf(stderr, "run_model: error: creating devices: %s\n", diag.message);
    goto out;
  }
  for (uint32_t d = 0; d < count && d < OA_REGISTRY_MAX_DEVICES; d++) {
    oa_device_properties_t p;
    if (!oa_device_get_properties(devices[d], &p)) printf("device %u: %s [%s]\n", d, p.name, p.kind_name);
  }
  oa_program_t program;
  if ((st = oa_program_load(data, size, &program, &diag))) {
    fprintf(stderr, "run_model: error: %s: %s\n", argv[1], diag.message);
    goto out;
  }
  uint32_t mi = 0;
  if (oa_program_find_method(&program, "forward", &mi)) mi = 0;
  oa_method_config_t cfg = {devices, count < OA_REGISTRY_MAX_DEVICES ? count : OA_REGISTRY_MAX_DEVICES};
  if ((st = oa_method_create(&program, mi, &cfg, &method, &diag))) {
    fprintf(stderr, "run_model: error: %s: %s: %s\n", argv[1], oa_status_name(st), diag.message);
    goto out;
  }
  uint32_t passed = 0, failed = 0;
  for (int round = 0; round < 2; round++) { /* twice: a method runs again from a clean state */
    for (uint32_t t = 0; t < oa_method_test_count(method); t++) {
      oa_test_result_t r;
      oa_diag_clear(&diag);
      if ((st = oa_method_run_test(method, t, &r, &diag))) {
        printf("FAIL test %u: %s: %s\n", t, oa_status_name(st), diag.message);
        failed++;
        continue;
      }
      printf("%s %s: max abs error %.3g (atol %g, rtol %g)\n", r.passed ? "PASS" : "FAIL", r.name, r.max_abs_error,
             r.atol, r.rtol);
      if (r.passed) passed++;
      else failed++;
    }
  }
  printf("%u passed, %u failed\n", passed, failed);
  rc = failed || !passed ? 1 : 0;
out:
  oa_method_destroy(method);
  oa_registry_release(&reg);
  for (int i = n_handles; i > 0; i--) dlclose(handles[i - 1]);
  oa_platform_free(data);
  return rc;
}
