/* AVX-512 depthwise convolution (16 outputs or channels per vector): opt/dwconv.inc and
 * opt/dwconv_nhwc.inc on the AVX-512 backend of simd/vec.h. Compiled with -mavx512f -mavx512bw
 * -mavx512dq -mavx512vl -mfma; only called when env->isas has OA_CPU_ISA_AVX512. */
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#define OA_SIMD_AVX512 1
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define DW_FN oa_avx512_dw
#include "kernels/opt/dwconv.inc"
#define DWC_FN oa_avx512_dwc
#include "kernels/opt/dwconv_nhwc.inc"
#else
typedef int oa_avx512_dw_unused_t; /* not an AVX-512 build of this file */
#endif
