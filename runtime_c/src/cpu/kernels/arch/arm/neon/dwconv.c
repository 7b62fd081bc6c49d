/* NEON depthwise convolution (4 outputs or channels per vector): opt/dwconv.inc and
 * opt/dwconv_nhwc.inc on the NEON backend of simd/vec.h. */
#if defined(__ARM_NEON)
#define OA_SIMD_NEON 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define DW_FN oa_neon_dw
#include "kernels/opt/dwconv.inc"
#define DWC_FN oa_neon_dwc
#include "kernels/opt/dwconv_nhwc.inc"
#else
typedef int oa_neon_dw_unused_t; /* ISO C: no empty translation unit */
#endif
