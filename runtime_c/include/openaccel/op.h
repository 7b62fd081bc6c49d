/* One instruction as a device sees it: an op name, tensors and scalar arguments. */
#ifndef OPENACCEL_OP_H
#define OPENACCEL_OP_H

#include "openaccel/status.h"
#include "openaccel/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An op call. `ints` / `floats` follow the per-op layout of docs/ops.md. Absent optional inputs
 * are NULL entries in `inputs`. Pointers stay valid for the prepared method's lifetime. */
typedef struct oa_op_call {
  const char *op;               /* op name from the file's manifest, e.g. "conv2d" */
  uint32_t index;               /* instruction index (for messages) */
  oa_tensor_t *const *inputs;
  uint32_t n_inputs;
  oa_tensor_t *const *outputs;
  uint32_t n_outputs;
  const int64_t *ints;
  uint32_t n_ints;
  const double *floats;
  uint32_t n_floats;
} oa_op_call_t;

#define OA_OP_PARAM_WORDS 24

/* What a device decided for one op at prepare time: the kernel it will run, how much scratch
 * that kernel needs, and a small block of precomputed parameters. Filled by the device's
 * prepare_op; the executor stores it and passes it back to execute_op untouched. */
typedef struct oa_op_plan {
  const void *kernel;          /* device-private: the chosen kernel */
  size_t scratch_bytes;        /* planned scratch the kernel needs at execute */
  int64_t params[OA_OP_PARAM_WORDS]; /* device-private precomputed parameters */
} oa_op_plan_t;

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_OP_H */
