/* Views of a verified program's tables, shared by the program phases (src/program/: load.c,
 * verify.c, view.c, op_rules.c), the method phases (src/method/) and the fuzzer. Every accessor
 * (view.c) checks what it reads, so the executor never trusts the file. It stays at src/ rather
 * than in src/program/ because the method phases and fuzz/ include it as much as the loader. */
#ifndef OA_PROGRAM_INTERNAL_H
#define OA_PROGRAM_INTERNAL_H

#include "fb.h"
#include "openaccel/program.h"

/* Limits that keep stack use and state sizes bounded; files beyond them are refused. */
#define OA_MAX_OP_INPUTS 64
#define OA_MAX_OP_OUTPUTS 64
#define OA_MAX_DEVICE_SLOTS 8
#define OA_MAX_POOLS 8
#define OA_MAX_EVENTS 4096

typedef struct oa_method_view {
  oa_fb_t fb;
  oa_fb_table_t table;
  const char *name;
  oa_fb_vec_t inputs, outputs, tensors, instructions, devices, tests, debug, pools;
  uint32_t num_events;
} oa_method_view_t;

typedef struct oa_tensor_desc {
  const char *name;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  int64_t numel;
  uint8_t storage;      /* OAB_STORAGE_* */
  uint8_t contiguous;   /* dim order is the default one */
  uint32_t pool;
  uint32_t segment;
  uint64_t offset;
  uint64_t nbytes;
  oa_quant_params_t quant; /* from Tensor.quant, checked; scale NULL when absent; zero_point NULL when
                            * the file stores none (all zero: the method supplies zeros) */
} oa_tensor_desc_t;

typedef struct oa_instr_desc {
  uint32_t op;
  oa_fb_vec_t inputs, outputs, ints, floats, waits;
  uint8_t device;
  uint8_t kind;          /* OAB_INSTRUCTION_KIND_* */
  int32_t debug;
  int32_t signal;        /* event index or -1 */
} oa_instr_desc_t;

typedef struct oa_pool_desc {
  uint8_t device;
  uint64_t size;
  uint32_t alignment;
} oa_pool_desc_t;

typedef struct oa_test_desc {
  const char *name;
  double atol, rtol;
  oa_fb_vec_t inputs, outputs;
} oa_test_desc_t;

typedef struct oa_data_desc {
  int32_t dtype;
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  const uint8_t *data;
  uint64_t nbytes;
} oa_data_desc_t;

oa_status_t oa_program_method_view(const oa_program_t *p, uint32_t index, oa_method_view_t *out,
                                   oa_diag_t *diag);
oa_status_t oa_program_tensor(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                              oa_tensor_desc_t *out, oa_diag_t *diag);
oa_status_t oa_program_instruction(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                   oa_instr_desc_t *out, oa_diag_t *diag);
oa_status_t oa_program_pool(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                            oa_pool_desc_t *out, oa_diag_t *diag);
oa_status_t oa_program_device_slot(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                   const char **out_kind, uint32_t *out_ordinal, oa_diag_t *diag);
oa_status_t oa_program_test(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                            oa_test_desc_t *out, oa_diag_t *diag);
/* Tensor data `index` of a test's inputs or outputs vector. */
oa_status_t oa_program_test_data(const oa_program_t *p, const oa_fb_vec_t *vec, uint32_t index,
                                 oa_data_desc_t *out, oa_diag_t *diag);
/* Source location of debug entry `index` ("file:line" and code), or "" when absent. */
void oa_program_debug(const oa_program_t *p, const oa_method_view_t *m, int32_t index,
                      const char **out_file, uint32_t *out_line, const char **out_code);
/* Verify phase (program/verify.c): the tree walk, then every operator, segment, string and method
 * of `program` (whose header and root load.c has read); fills its method, operator and segment
 * counts. */
oa_status_t oa_program_verify(oa_program_t *program, const oa_fb_table_t *root, oa_diag_t *diag);
/* The in-place rule of op `op` (src/program/op_rules.c, from the opset): the input whose bytes output 0
 * may share exactly (same offset, size, dtype and shape), or -1 when outputs and inputs must be
 * disjoint. *out_elementwise: inputs identical to that one may share them too. */
int oa_op_inplace_input(const char *op, int *out_elementwise);

/* The format minor version since which `op`'s inputs mean what this runtime reads (0: always),
 * and what changed then (one sentence for the loader's message). */
uint32_t oa_op_format_minor(const char *op);
const char *oa_op_format_change(const char *op);
/* Address and size of segment `index`. */
oa_status_t oa_program_segment(const oa_program_t *p, uint32_t index, const uint8_t **out_data,
                               uint64_t *out_size, oa_diag_t *diag);

#endif /* OA_PROGRAM_INTERNAL_H */
