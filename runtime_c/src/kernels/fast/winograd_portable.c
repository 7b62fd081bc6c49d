/* Portable C11 Winograd transforms (fast/winograd_tmpl.inc on one-lane vectors), every target. */
#include "fast.h"
#include "simd_vec.h"

#define WINO_NAME(x) oa_wino_portable_##x
#include "winograd_tmpl.inc"
