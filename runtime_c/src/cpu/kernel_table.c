/* The CPU kernel table of this build, expanded from kernels/kernels.def. A selective build
 * (openaccel build-runtime --for model.oab) compiles with OA_KERNELS_DEF naming a filtered copy. */
#include "kernels/kernel.h"

#ifndef OA_KERNELS_DEF
#define OA_KERNELS_DEF "kernels/kernels.def"
#endif

#define OA_KERNEL(op, variant, dtypes, prepare, run)                                                  \
  oa_status_t prepare(const oa_op_call_t *, const oa_kernel_env_t *, oa_op_plan_t *, oa_diag_t *); \
  oa_status_t run(const oa_op_call_t *, const oa_op_plan_t *, void *, const oa_kernel_env_t *, oa_diag_t *);
#include OA_KERNELS_DEF
#undef OA_KERNEL

const oa_kernel_t oa_kernel_table[] = {
#define OA_KERNEL(op, variant, dtypes, prepare, run) {op, variant, dtypes, prepare, run},
#include OA_KERNELS_DEF
#undef OA_KERNEL
    {0, 0, 0, 0, 0} /* sentinel: keeps an empty selective build valid C */
};

const uint32_t oa_kernel_table_size = (uint32_t)(sizeof oa_kernel_table / sizeof oa_kernel_table[0]) - 1u;
