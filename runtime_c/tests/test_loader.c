/* The loader and executor against damaged files: every truncation and many byte flips of each
 * fixture must give a clean error (or, if still valid, run) without crashing. Run under
 * ASan+UBSan by `make test-c` and by the pytest driver. */
#include "check.h"
#include "fixtures.h"
#include "mutate_oab.h"

/* Try to load, prepare and run a buffer; returns the load status. Bounded memory and work. */
static oa_status_t try_program(const uint8_t *data, size_t size, oa_diag_t *diag) {
  oa_program_t p;
  oa_status_t st = oa_program_load(data, size, &p, diag);
  if (st) {
    if (!diag->message[0]) {
      fprintf(stderr, "error %s without a message\n", oa_status_name(st));
      g_failures++;
    }
    return st;
  }
  oa_cpu_device_t cpu_storage;
  oa_device_t *cpu;
  oa_cpu_device_init(&cpu_storage, NULL, &cpu);
  oa_method_config_t cfg = {&cpu, 1};
  oa_memory_requirements_t req;
  for (uint32_t m = 0; m < p.method_count; m++) {
    if (oa_method_requirements(&p, m, &cfg, &req, diag)) continue;
    if (req.total_bytes > (64u << 20)) continue;
    oa_method_t *method;
    if (oa_method_create(&p, m, &cfg, &method, diag)) continue;
    for (uint32_t t = 0; t < oa_method_test_count(method) && t < 2; t++) {
      oa_test_result_t r;
      (void)oa_method_run_test(method, t, &r, diag);
    }
    oa_method_destroy(method);
  }
  return OA_OK;
}

static void damage_tests(fixture_t *fx) {
  uint8_t *copy = (uint8_t *)oa_platform_alloc(fx->size + 64, 64);
  oa_diag_t diag;
  /* every truncation for small files, ~4000 evenly spaced ones otherwise */
  size_t step = fx->size > 4000 ? fx->size / 4000 : 1;
  for (size_t n = 0; n < fx->size; n += step) {
    memcpy(copy, fx->data, n);
    oa_diag_clear(&diag);
    oa_status_t st = try_program(copy, n, &diag);
    /* a truncated file may only load if the cut removed trailing padding */
    if (st == OA_OK && n < fx->size - 64) {
      fprintf(stderr, "%s truncated to %zu of %zu bytes still loaded\n", fx->path, n, fx->size);
      g_failures++;
    }
  }
  /* byte flips over the flatbuffer (the metadata), sampled over the segments */
  oa_program_t p;
  CHECK(oa_program_load(fx->data, fx->size, &p, NULL) == OA_OK);
  size_t meta = p.flatbuffer_size;
  size_t flip_step = meta > 3000 ? meta / 3000 : 1;
  for (size_t pos = 0; pos < fx->size; pos += pos < meta ? flip_step : (fx->size / 200 + 1)) {
    static const uint8_t masks[] = {0xff, 0x01, 0x80, 0x10};
    for (size_t k = 0; k < sizeof masks; k++) {
      memcpy(copy, fx->data, fx->size);
      copy[pos] ^= masks[k];
      oa_diag_clear(&diag);
      (void)try_program(copy, fx->size, &diag);
    }
  }
  oa_platform_free(copy);
}

/* The fuzzer's structured mutations (fuzz/mutate_oab.c), a fixed sweep of them: values of dims,
 * offsets, tensor indices, ops, arguments and table offsets changed in a valid file, which then
 * must load and run, or be refused with a message. */
static void structured_mutations(const fixture_t *fx) {
  uint8_t *copy = (uint8_t *)oa_platform_alloc(fx->size + 64, 64);
  oa_diag_t diag;
  unsigned mutated = 0, loaded = 0;
  for (unsigned seed = 1; copy && seed <= 1500; seed++) {
    memcpy(copy, fx->data, fx->size);
    if (!oa_fuzz_mutate_oab(copy, fx->size, seed * 2654435761u, 1 + seed % 3)) continue;
    mutated++;
    oa_diag_clear(&diag);
    if (try_program(copy, fx->size, &diag) == OA_OK) loaded++;
  }
  if (!mutated) {
    fprintf(stderr, "%s: the structured mutator found nothing to change\n", fx->path);
    g_failures++;
  }
  printf("%s: %u structured mutants, %u loaded\n", fx->path, mutated, loaded);
  oa_platform_free(copy);
}

int main(void) {
  const char *dir = fixture_dir();
  if (!*dir) {
    fprintf(stderr, "no fixture directory: set OA_FIXTURES\n");
    return 2;
  }
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".oab")) continue;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    fixture_t fx;
    CHECK(fixture_read(path, &fx) == 0);
    oa_diag_t diag;
    oa_program_t p;
    oa_status_t st = oa_program_load(fx.data, fx.size, &p, &diag);
    if (strstr(e->d_name, "newer_version")) {
      CHECK(st == OA_ERR_UNSUPPORTED_VERSION);
      CHECK_STR_CONTAINS(diag.message, "newer");
      fixture_free(&fx);
      continue;
    }
    if (strncmp(e->d_name, "refused_", 8) == 0) {
      /* hand-built files breaking one semantic rule (tests/craft.py): refused with a message at load,
       * and no truncation or byte flip of them crashes the loader either */
      if (st != OA_ERR_INVALID_PROGRAM) fprintf(stderr, "%s was not refused (%s)\n", path, oa_status_name(st));
      CHECK(st == OA_ERR_INVALID_PROGRAM);
      CHECK(diag.message[0] != '\0');
      uint8_t *copy = (uint8_t *)oa_platform_alloc(fx.size + 64, 64);
      for (size_t cut = 0; copy && cut < fx.size; cut += fx.size > 2000 ? fx.size / 2000 : 1) {
        memcpy(copy, fx.data, cut);
        (void)try_program(copy, cut, &diag);
      }
      oa_platform_free(copy);
      fixture_free(&fx);
      n++;
      continue;
    }
    if (st) fprintf(stderr, "%s: %s\n", path, diag.message);
    CHECK(st == OA_OK);
    damage_tests(&fx);
    structured_mutations(&fx);
    /* wrong identifier */
    fx.data[5] ^= 0x20;
    CHECK(oa_program_load(fx.data, fx.size, &p, &diag) == OA_ERR_INVALID_PROGRAM);
    CHECK_STR_CONTAINS(diag.message, "not an .oab file");
    fx.data[5] ^= 0x20;
    /* misaligned buffer */
    CHECK(oa_program_load(fx.data + 1, fx.size - 1, &p, &diag) == OA_ERR_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(diag.message, "aligned");
    /* NULL arguments */
    CHECK(oa_program_load(NULL, 10, &p, &diag) == OA_ERR_INVALID_ARGUMENT);
    fixture_free(&fx);
    n++;
  }
  if (d) closedir(d);
  CHECK(n > 0);
  printf("checked %d fixtures\n", n);
  TEST_MAIN_END();
}
