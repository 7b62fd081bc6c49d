/* The CPU kernel ABI and the helpers kernels share.
 *
 * A kernel is a (prepare, run) pair for one op name and one variant: "ref" (ref/<family>.c) or
 * "opt" (opt/<same file name>.c, one entry for every ISA, see isa.h). prepare sees only metadata
 * (shapes, dtypes, arguments; tensor data may be NULL) and must check EVERYTHING it relies on at
 * run time: counts, dtypes, shapes, argument values. Files are untrusted, so a kernel that skips
 * a check can be made to read or write out of bounds.
 * run must not allocate, abort or print; it may fail only on data-dependent errors (an index out
 * of range), with a message naming the op, argument and value.
 *
 * Selection (cpu/device_cpu.c): the reference kernel's prepare always runs first and gives the
 * canonical error for a bad call; then the op's "opt" kernel, if the build has one, is prepared:
 * OA_OK = use it (its prepare may set plan->kernel to the variant of the ISA it chose; else the
 * table entry is used), OA_ERR_UNSUPPORTED = "not for this call", the reference kernel runs.
 */
#ifndef OA_KERNELS_KERNEL_H
#define OA_KERNELS_KERNEL_H

#include <stdbool.h>
#include <string.h>

#include "../../oab_args.h" /* OA_ARG_<OP>_<NAME>: argument positions, from opset.py */
#include "openaccel/cpu.h"
#include "openaccel/op.h"

struct oa_threadpool;

typedef struct oa_kernel_env {
  const oa_cpu_features_t *features;
  struct oa_threadpool *pool; /* worker threads; NULL = run on the calling thread */
  uint32_t isas; /* prepare: OA_CPU_ISA_* the optimized kernels may use (built, detected, not disabled); 0 in run */
} oa_kernel_env_t;

typedef oa_status_t (*oa_kernel_prepare_fn)(const oa_op_call_t *call, const oa_kernel_env_t *env,
                                            oa_op_plan_t *plan, oa_diag_t *diag);
typedef oa_status_t (*oa_kernel_run_fn)(const oa_op_call_t *call, const oa_op_plan_t *plan,
                                        void *scratch, const oa_kernel_env_t *env, oa_diag_t *diag);

typedef struct oa_kernel {
  const char *op;        /* op name as in the file's manifest */
  const char *variant;   /* "ref", "opt"; an opt plan's variant: "avx2", "neon", "portable" */
  uint64_t dtypes;       /* OA_DTYPE_BIT set of the element types it computes in */
  oa_kernel_prepare_fn prepare;
  oa_kernel_run_fn run;
} oa_kernel_t;

/* The kernel table of this build (cpu/kernel_table.c, from kernels/kernels.def). */
extern const oa_kernel_t oa_kernel_table[];
extern const uint32_t oa_kernel_table_size;

/* ---- dtype sets -------------------------------------------------------------------------- */
#define OA_DT_F32 OA_DTYPE_BIT(OA_DTYPE_FLOAT32)
#define OA_DT_I32 OA_DTYPE_BIT(OA_DTYPE_INT32)
#define OA_DT_I64 OA_DTYPE_BIT(OA_DTYPE_INT64)
#define OA_DT_BOOL OA_DTYPE_BIT(OA_DTYPE_BOOL)
#define OA_DT_U8 OA_DTYPE_BIT(OA_DTYPE_UINT8)
#define OA_DT_I8 OA_DTYPE_BIT(OA_DTYPE_INT8)
#define OA_DT_INT (OA_DT_I32 | OA_DT_I64)
#define OA_DT_NUM (OA_DT_F32 | OA_DT_INT)
#define OA_DT_ALL (OA_DT_NUM | OA_DT_BOOL | OA_DT_U8 | OA_DT_I8)
#define OA_DT_C64 OA_DTYPE_BIT(OA_DTYPE_COMPLEX64) /* interleaved float32 (real, imaginary) pairs */
#define OA_DT_MOVE (OA_DT_ALL | OA_DT_C64)         /* data movement: any element type */

/* ---- checks used by prepare: each fills `diag` with op, argument, expected and received ---- */

/* "[1, 3, 224, 224]" into buf (at least 96 bytes recommended). */
const char *oa_shape_str(const oa_tensor_t *t, char *buf, size_t size);
/* Integer argument i (0 when the file omits it) within [lo, hi], else an error naming it. */
oa_status_t oa_check_int_arg(const oa_op_call_t *call, uint32_t i, const char *name, int64_t lo, int64_t hi,
                             oa_diag_t *diag);
/* PyTorch's pooling_output_shape (arguments bounded by the caller: no overflow below 2^50). */
int64_t oa_pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, int ceil_mode);
/* slice / slice_scatter arguments of x (dim, 0 <= start <= end <= size, step >= 1) checked, and
 * the sliced shape written to out_shape (x->ndim dims). */
oa_status_t oa_check_slice(const oa_tensor_t *x, int64_t dim, int64_t start, int64_t end, int64_t step,
                           int64_t *out_shape, oa_diag_t *diag);
/* Element i of an int32 / int64 index tensor. */
int64_t oa_load_index(const oa_tensor_t *t, int64_t i);
/* "[1, 2]" for flat position `i` of a tensor (row-major), "[]" for a 0-d one (error messages). */
const char *oa_position_str(const oa_tensor_t *t, int64_t i, char *buf, size_t size);
/* dst[i] = src[j] for elements of `es` bytes. */
void oa_copy_elem(void *dst, int64_t i, const void *src, int64_t j, size_t es);

/* Exactly n_in (or between min and max) inputs and n_out outputs; ints/floats at least as many. */
oa_status_t oa_check_arity(const oa_op_call_t *call, uint32_t min_in, uint32_t max_in, uint32_t n_out,
                           uint32_t min_ints, uint32_t min_floats, oa_diag_t *diag);

/* Input `i` is present (not an absent optional). */
oa_status_t oa_check_present(const oa_op_call_t *call, uint32_t i, const char *arg, oa_diag_t *diag);

/* Tensor dtype is in `allowed`. `arg` names it in messages ("input 0 (self)"). */
oa_status_t oa_check_dtype(const oa_op_call_t *call, const oa_tensor_t *t, uint64_t allowed,
                           const char *arg, oa_diag_t *diag);

/* The per-channel requantization shift of conv2d_q8 / linear_q8 (input 4) is int8 (format 1.2);
 * an int32 one comes from an older exporter: the message says to export the model again. */
oa_status_t oa_check_q8_shift_dtype(const oa_op_call_t *call, const oa_tensor_t *t, oa_diag_t *diag);

/* The bias of conv2d_q8 / linear_q8 (input 2) is float32 in output steps (format 1.3); an int32 one
 * comes from an older exporter: the message says to export the model again. */
oa_status_t oa_check_q8_bias_dtype(const oa_op_call_t *call, const oa_tensor_t *t, oa_diag_t *diag);

/* conv2d_q8 / linear_q8: the values of inputs 2 (bias), 3 (multiplier) and 4 (shift) are in the
 * domain of the requantization rule (quant_rule.h): multiplier >= 0, shift in [12, 62], the bias
 * finite with |round(bias * 2^shift)| < 2^61 (q8_bias_addend). Inputs without data yet (run-time
 * ones at prepare) pass. */
oa_status_t oa_check_q8_requant_values(const oa_op_call_t *call, oa_diag_t *diag);

/* Same dtype as a reference tensor. */
oa_status_t oa_check_same_dtype(const oa_op_call_t *call, const oa_tensor_t *t, const oa_tensor_t *ref,
                                const char *arg, oa_diag_t *diag);

/* Tensor has ndim in [min_ndim, max_ndim]. */
oa_status_t oa_check_ndim(const oa_op_call_t *call, const oa_tensor_t *t, int32_t min_ndim,
                          int32_t max_ndim, const char *arg, oa_diag_t *diag);

/* Tensor shape equals `shape` (ndim dims). */
oa_status_t oa_check_shape(const oa_op_call_t *call, const oa_tensor_t *t, const int64_t *shape,
                           int32_t ndim, const char *arg, oa_diag_t *diag);

/* A linear layer's input x [..., k] and output out [..., n] (x's leading dims): in_features and
 * the output shape (linear, linear_packed, linear_q8, linear_dq8). */
oa_status_t oa_check_linear_io(const oa_op_call_t *call, const oa_tensor_t *x, int64_t k, const oa_tensor_t *out,
                               int64_t n, oa_diag_t *diag);

/* Two tensors have the same shape. */
oa_status_t oa_check_same_shape(const oa_op_call_t *call, const oa_tensor_t *t, const oa_tensor_t *ref,
                                const char *arg, oa_diag_t *diag);

/* Messages: kernels write what is wrong with the call ("input 1 (weight): expected 4 dims,
 * received 3 ([64, 3, 3])"); the executor prefixes the instruction index, op name and the model
 * source line. Use oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM or OA_ERR_UNSUPPORTED, ...). */

/* Normalize a possibly negative dim against ndim (ndim 0 treated as 1); -1 when out of range. */
int32_t oa_norm_dim(int64_t dim, int32_t ndim);

/* ---- broadcasting ------------------------------------------------------------------------- */

/* Strides (in elements) of `t` broadcast to `out_shape` (out_ndim dims, right-aligned): 0 on
 * broadcast dims. Fails when shapes are not broadcast-compatible. */
oa_status_t oa_broadcast_strides(const oa_op_call_t *call, const oa_tensor_t *t, const int64_t *out_shape,
                                 int32_t out_ndim, int64_t *out_strides, const char *arg, oa_diag_t *diag);

/* Row-major contiguous strides of a shape. */
void oa_contiguous_strides(const int64_t *shape, int32_t ndim, int64_t *out_strides);

/* An N-d index counter for walking an output in row-major order while tracking offsets into up
 * to 3 broadcast operands. Usage:
 *   oa_nd_iter_t it; oa_nd_iter_init(&it, out->shape, out->ndim, 2, strides_a, strides_b, NULL);
 *   for (int64_t i = 0; i < n; i++) { ... it.off[0], it.off[1] ...; oa_nd_iter_next(&it); } */
typedef struct oa_nd_iter {
  int32_t ndim;
  int32_t n_operands;
  int64_t shape[OA_MAX_DIMS];
  int64_t idx[OA_MAX_DIMS];
  int64_t strides[3][OA_MAX_DIMS];
  int64_t off[3];
} oa_nd_iter_t;

static inline void oa_nd_iter_next(oa_nd_iter_t *it) {
  for (int32_t d = it->ndim - 1; d >= 0; d--) {
    for (int32_t k = 0; k < it->n_operands; k++) it->off[k] += it->strides[k][d];
    if (++it->idx[d] < it->shape[d]) return;
    for (int32_t k = 0; k < it->n_operands; k++) it->off[k] -= it->strides[k][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

/* Convert between element types through double (for casts and mixed-dtype helpers); complex64 reads its
 * real part and stores (v, 0). */
double oa_load_as_double(const void *data, int32_t dtype, int64_t i);
void oa_store_from_double(void *data, int32_t dtype, int64_t i, double v);

/* A convolution's fused activation (act 1 relu, 2 clamp to [lo, hi], else none) on a double sum,
 * rounded to float first, then clamped (as PyTorch clamps the float result). NaN propagates. */
static inline float oa_fused_act_to_float(double v, int64_t act, double lo, double hi) {
  if (act == 1) return v < 0.0 ? 0.0f : (float)v;
  if (act == 2) {
    float f = (float)v;
    return f < (float)lo ? (float)lo : (f > (float)hi ? (float)hi : f);
  }
  return (float)v;
}

void oa_nd_iter_init(oa_nd_iter_t *it, const int64_t *shape, int32_t ndim, int32_t n_operands,
                     const int64_t *s0, const int64_t *s1, const int64_t *s2);
#endif /* OA_KERNELS_KERNEL_H */
