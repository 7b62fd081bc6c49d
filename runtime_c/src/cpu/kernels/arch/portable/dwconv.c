/* Portable depthwise convolution (one output at a time): opt/dwconv.inc and opt/dwconv_nhwc.inc
 * on the one-lane backend of simd/vec.h. */
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define DW_FN oa_portable_dw
#include "kernels/opt/dwconv.inc"
#define DWC_FN oa_portable_dwc
#include "kernels/opt/dwconv_nhwc.inc"
