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
#include "program_internal.h"

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

/* A bound on the work of method `m`: a kernel's work is at most about the product of its two
 * largest operands' element counts (zero dims counted as 1: the loader bounds those like non-empty
 * dims), e.g. matmul M N K <= |A| |B|, a convolution |out| |weight|, sdpa |q| |k|. A valid 1 MB
 * program can legitimately ask for 10^12 of that; programs under WORK_LIMIT run, and one that
 * still runs past libFuzzer's -timeout does work its operands do not account for: a bug. */
#define WORK_LIMIT ((uint64_t)1 << 27)

static uint64_t nominal(const oa_tensor_desc_t *t) {
  uint64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d] > 0 ? (uint64_t)t->shape[d] : 1u; /* <= 2^50 (loader) */
  return n;
}

static uint64_t method_work(const oa_program_t *p, uint32_t m) {
  oa_method_view_t v;
  uint64_t total = 0;
  if (oa_program_method_view(p, m, &v, NULL)) return UINT64_MAX;
  for (uint32_t i = 0; i < v.instructions.count; i++) {
    oa_instr_desc_t ins;
    if (oa_program_instruction(p, &v, i, &ins, NULL)) return UINT64_MAX;
    uint64_t big = 1, second = 1;
    for (uint32_t k = 0; k < ins.inputs.count + ins.outputs.count; k++) {
      int32_t t = k < ins.inputs.count ? oa_fb_vec_i32(&ins.inputs, k) : oa_fb_vec_i32(&ins.outputs, k - ins.inputs.count);
      oa_tensor_desc_t d;
      if (t < 0) continue;
      if (oa_program_tensor(p, &v, (uint32_t)t, &d, NULL)) return UINT64_MAX;
      uint64_t n = nominal(&d);
      if (n > big) {
        second = big;
        big = n;
      } else if (n > second) {
        second = n;
      }
    }
    if (big > WORK_LIMIT || second > WORK_LIMIT / big) return UINT64_MAX;
    total += big * second;
    if (total > WORK_LIMIT) return UINT64_MAX;
  }
  return total;
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
      if (oa_method_instruction_count(method) < 512 && method_work(&p, m) <= WORK_LIMIT) {
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
