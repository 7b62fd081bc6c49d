/* Portable C11 Winograd transforms (opt/winograd_transform.inc on one-lane vectors), every target. */
#include "kernels/opt/opt.h"
#include "kernels/simd/vec.h"

#define WINO_NAME(x) oa_wino_portable_##x
#include "kernels/opt/winograd_transform.inc"
