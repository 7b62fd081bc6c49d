/* libFuzzer target: any bytes -> load, verify, prepare, execute, bundled tests. The runtime
 * must answer every input with a status, never a crash, leak or undefined behaviour.
 *
 * Mutations: three in four change the value of fields of a valid program (dims, offsets, tensor
 * indices, ops, arguments, sizes, table offsets: mutate_oab.c), so mutants pass the bounds checks
 * and reach the semantic rules and the kernels; the rest are libFuzzer's byte mutations. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mutate_oab.h"
#include "openaccel/openaccel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  if (seed % 4 != 0 && getenv("OA_FUZZ_BYTES_ONLY") == NULL) {
    size_t n = oa_fuzz_mutate_oab(data, size, seed / 4, 1 + seed % 3);
    if (n) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *buf = (uint8_t *)oa_platform_alloc(size ? size : 1, 64);
  if (!buf) return 0;
  memcpy(buf, data, size);
  oa_diag_t diag;
  oa_program_t p;
  if (oa_program_load(buf, size, &p, &diag) == OA_OK) {
    oa_cpu_device_t cpu_storage;
    oa_device_t *cpu;
    oa_cpu_device_init(&cpu_storage, NULL, &cpu);
    oa_method_config_t cfg = {&cpu, 1};
    for (uint32_t m = 0; m < p.method_count && m < 4; m++) {
      oa_memory_requirements_t req;
      /* bound the work: a valid file may legitimately ask for a lot of memory or compute */
      if (oa_method_requirements(&p, m, &cfg, &req, &diag) || req.total_bytes > (8u << 20)) continue;
      oa_method_t *method;
      if (oa_method_create(&p, m, &cfg, &method, &diag)) continue;
      if (oa_method_instruction_count(method) < 512) {
        for (uint32_t t = 0; t < oa_method_test_count(method) && t < 2; t++) {
          oa_test_result_t r;
          (void)oa_method_run_test(method, t, &r, &diag);
        }
        (void)oa_method_execute(method, &diag);
      }
      oa_method_destroy(method);
    }
  }
  oa_platform_free(buf);
  return 0;
}
