#include "openaccel/types.h"

size_t oa_dtype_size(int32_t dtype) {
  switch (dtype) {
    case OA_DTYPE_UINT8:
    case OA_DTYPE_INT8:
    case OA_DTYPE_BOOL: return 1;
    case OA_DTYPE_INT16:
    case OA_DTYPE_FLOAT16:
    case OA_DTYPE_BFLOAT16: return 2;
    case OA_DTYPE_INT32:
    case OA_DTYPE_FLOAT32: return 4;
    case OA_DTYPE_INT64:
    case OA_DTYPE_FLOAT64:
    case OA_DTYPE_COMPLEX64: return 8;
    default: return 0;
  }
}

const char *oa_dtype_name(int32_t dtype) {
  switch (dtype) {
    case OA_DTYPE_UINT8: return "uint8";
    case OA_DTYPE_INT8: return "int8";
    case OA_DTYPE_INT16: return "int16";
    case OA_DTYPE_INT32: return "int32";
    case OA_DTYPE_INT64: return "int64";
    case OA_DTYPE_FLOAT16: return "float16";
    case OA_DTYPE_FLOAT32: return "float32";
    case OA_DTYPE_FLOAT64: return "float64";
    case OA_DTYPE_COMPLEX64: return "complex64";
    case OA_DTYPE_BOOL: return "bool";
    case OA_DTYPE_BFLOAT16: return "bfloat16";
    default: return "unknown";
  }
}
