/* Element types and the tensor descriptor kernels and devices see. */
#ifndef OPENACCEL_TYPES_H
#define OPENACCEL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the numbering is c10::ScalarType's (and the .oab file's). */
typedef enum oa_dtype {
  OA_DTYPE_UINT8 = 0,
  OA_DTYPE_INT8 = 1,
  OA_DTYPE_INT16 = 2,
  OA_DTYPE_INT32 = 3,
  OA_DTYPE_INT64 = 4,
  OA_DTYPE_FLOAT16 = 5,
  OA_DTYPE_FLOAT32 = 6,
  OA_DTYPE_FLOAT64 = 7,
  OA_DTYPE_COMPLEX64 = 9, /* interleaved float32 (real, imaginary) pairs */
  OA_DTYPE_BOOL = 11,
  OA_DTYPE_BFLOAT16 = 15
} oa_dtype_t;

/* Bit for a dtype in a supported-dtype set (as torch.accelerator's "supported_dtypes"). */
#define OA_DTYPE_BIT(dt) (UINT64_C(1) << (unsigned)(dt))

/* Size in bytes of one element, or 0 for a value that is not a known dtype. */
size_t oa_dtype_size(int32_t dtype);

/* Short name ("float32", "int64", "bool", ...) or "unknown". Never NULL. */
const char *oa_dtype_name(int32_t dtype);

#define OA_MAX_DIMS 8

/* How an int8 / uint8 tensor of a quantized program maps to real numbers (the file's
 * Tensor.quant): real = (q - zero_point[i]) * scale[i], with i = 0 for per-tensor parameters
 * (axis -1, count 1) and i the index along dim `axis` for per-channel ones (count = shape[axis]).
 * `scale` NULL: the tensor carries no quantization parameters. The loader checked every value:
 * scales finite and > 0, zero points within the dtype, count matching the axis. Host memory (the
 * program's bytes, read-only), valid while the program is loaded; zero points the file does not
 * store (all 0, format 1.2) point at `count` zeros in the method's memory instead, valid while the
 * method is prepared. The int8 kernels take their
 * requantization from the instruction's arguments (docs/ops.md); these are the same parameters in
 * the form a device or a tool reads. */
typedef struct oa_quant_params {
  const float *scale;        /* count values */
  const int64_t *zero_point; /* count values (zeros the executor supplies when the file stores none) */
  int32_t axis;              /* -1: per tensor; else the dim the vectors run along */
  uint32_t count;
} oa_quant_params_t;

/* A dense tensor in a device's memory: contiguous and row-major (the last dim varies fastest). The
 * executor refuses a file whose tensors declare another dim order; channels-last data is a tensor
 * whose shape is in NHWC order. `data` is a host pointer for the CPU and a device address for
 * others. */
typedef struct oa_tensor {
  void *data;
  int64_t shape[OA_MAX_DIMS];
  int32_t ndim;
  int32_t dtype;       /* oa_dtype_t */
  int64_t numel;       /* product of shape (1 for a 0-d tensor) */
  size_t nbytes;       /* numel * oa_dtype_size(dtype) */
  const char *name;    /* from the file; never NULL ("" when unnamed) */
  /* ---- appended in device ABI version 2 (openaccel/device_abi.h): a device built against version 1
   * never reads past `name`; zero-filled (no parameters) wherever the tensor is not quantized ---- */
  oa_quant_params_t quant;
} oa_tensor_t;

#ifdef __cplusplus
}
#endif
#endif /* OPENACCEL_TYPES_H */
