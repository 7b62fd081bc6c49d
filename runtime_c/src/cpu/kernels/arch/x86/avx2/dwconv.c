/* AVX2+FMA depthwise convolution (8 outputs or channels per vector): opt/dwconv.inc and
 * opt/dwconv_nhwc.inc on the AVX2 backend of simd/vec.h. Compiled with -mavx2 -mfma; only called
 * when env->isas has OA_CPU_ISA_AVX2. */
#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define OA_SIMD_AVX2 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define DW_FN oa_avx2_dw
#include "kernels/opt/dwconv.inc"
#define DWC_FN oa_avx2_dwc
#include "kernels/opt/dwconv_nhwc.inc"
#else
typedef int oa_avx2_dw_unused_t; /* not an AVX2 build of this file */
#endif
