/* Preparing and executing a method of a program.
 *
 *   oa_method_requirements -> exact bytes needed, before anything is allocated
 *   oa_method_prepare      -> bind devices, resolve every instruction to a kernel once,
 *                             lay out state, planned activations and scratch in one caller buffer
 *   oa_method_execute      -> run; no allocation, no abort, no locks on the CPU path
 */
#ifndef OPENACCEL_METHOD_H
#define OPENACCEL_METHOD_H

#include "openaccel/device.h"
#include "openaccel/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oa_method oa_method_t;

typedef struct oa_method_config {
  /* Devices the method may use. Each device slot of the file (a kind and an ordinal) binds to the
   * devices here whose kind_name matches the slot's kind: the first for ordinal 0, the second for
   * ordinal 1, ... */
  oa_device_t *const *devices;
  uint32_t n_devices;
} oa_method_config_t;

#define OA_MEMORY_ALIGNMENT 64

typedef struct oa_memory_requirements {
  size_t state_bytes;    /* method bookkeeping: tensors, instructions, arguments */
  size_t arena_bytes;    /* CPU pool of the memory plan: inputs, outputs, activations */
  size_t scratch_bytes;  /* largest temporary space a chosen CPU kernel needs */
  size_t total_bytes;    /* one OA_MEMORY_ALIGNMENT-aligned buffer of this size is enough */
} oa_memory_requirements_t;

/* Exact memory needs of method `method_index` with the given devices (kernel choice, and so
 * scratch, depends on them). Verifies that every op has a kernel on its device. Devices see the
 * tensors in a dry run: when a tensor's all-zero zero points are not stored and it has more than
 * 256 channels, their zeros come from a temporary oa_platform_alloc block, freed before return. */
oa_status_t oa_method_requirements(const oa_program_t *program, uint32_t method_index,
                                   const oa_method_config_t *config,
                                   oa_memory_requirements_t *out_requirements, oa_diag_t *diag);

/* Prepare method `method_index` inside `memory` (OA_MEMORY_ALIGNMENT-aligned, at least
 * total_bytes of oa_method_requirements). The method lives in `memory`; nothing else is
 * allocated on the CPU path. */
oa_status_t oa_method_prepare(const oa_program_t *program, uint32_t method_index,
                              const oa_method_config_t *config, void *memory, size_t memory_size,
                              oa_method_t **out_method, oa_diag_t *diag);

/* Run every instruction once. Inputs must have been written. */
oa_status_t oa_method_execute(oa_method_t *method, oa_diag_t *diag);

/* Per-instruction profiling: while set, every execute adds each instruction's wall time (ns) to
 * ns_per_instruction[i] (caller-owned, oa_method_instruction_count entries; NULL turns it off).
 * For an asynchronous device this is the time to issue the work, not to finish it. */
void oa_method_set_profile(oa_method_t *method, uint64_t *ns_per_instruction);

/* Op name and source line of instruction `index` (for profiles and messages); "" when unknown. */
const char *oa_method_instruction_op(const oa_method_t *method, uint32_t index);

/* The kernel instruction `index` was prepared with on the CPU device: "ref" (the reference
 * kernel) or the ISA of the optimized kernel ("portable", "avx2", "neon", "avx512", "rvv"); ""
 * for transfers, other devices and unknown indices. */
const char *oa_method_instruction_kernel(const oa_method_t *method, uint32_t index);

/* Release what prepare obtained from devices (non-CPU pools, streams). The caller's memory is
 * untouched; call before freeing it. Safe on NULL. */
void oa_method_release(oa_method_t *method);

uint32_t oa_method_input_count(const oa_method_t *method);
uint32_t oa_method_output_count(const oa_method_t *method);
uint32_t oa_method_instruction_count(const oa_method_t *method);

/* The input tensor `index`: its data may be written directly (host memory, `nbytes` bytes). */
oa_status_t oa_method_input(oa_method_t *method, uint32_t index, oa_tensor_t **out_tensor);

/* Copy `src` into input `index` after checking its dtype and shape; the message names the
 * input, the expected and the received dtype/shape. */
oa_status_t oa_method_set_input(oa_method_t *method, uint32_t index, const oa_tensor_t *src,
                                oa_diag_t *diag);

/* The output tensor `index` (read-only host memory, valid until the next execute). */
oa_status_t oa_method_output(const oa_method_t *method, uint32_t index,
                             const oa_tensor_t **out_tensor);

/* Result of one bundled test vector. */
typedef struct oa_test_result {
  const char *name;
  int passed;            /* 1 if every output is within tolerance */
  double atol, rtol;
  double max_abs_error;  /* over all outputs */
  double max_rel_error;  /* |got - want| / |want| over elements with want != 0 */
  int64_t mismatches;    /* elements outside tolerance */
  int64_t first_mismatch; /* flat index into output `worst_output`, or -1 */
  uint32_t worst_output; /* the output of first_mismatch when an element is outside tolerance, else
                          * the output with the largest absolute error */
  uint64_t elapsed_ns;   /* wall time of the execute */
} oa_test_result_t;

uint32_t oa_method_test_count(const oa_method_t *method);

/* Run bundled test `index`: write its inputs, execute, compare every output with
 * |got - want| <= atol + rtol * |want| (exact for integer and bool outputs; NaN equals NaN).
 * Returns OK when the test ran (see out_result->passed), an error when it could not run. */
oa_status_t oa_method_run_test(oa_method_t *method, uint32_t index, oa_test_result_t *out_result,
                               oa_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_METHOD_H */
