/* Minimal .npy (NumPy format 1.0/2.0/3.0) reading and writing for oa_run. */
#ifndef OA_TOOLS_NPY_H
#define OA_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "openaccel/types.h"

typedef struct npy_array {
  int32_t dtype;          /* oa_dtype_t */
  int32_t ndim;
  int64_t shape[OA_MAX_DIMS];
  void *data;             /* malloc'ed; free with npy_free */
  size_t nbytes;
} npy_array_t;

/* Read `path`; on failure returns nonzero and writes a reason into err. */
int npy_read(const char *path, npy_array_t *out, char *err, size_t err_size);
void npy_free(npy_array_t *a);

/* Write a tensor to `path`; nonzero on failure. */
int npy_write(const char *path, const oa_tensor_t *t, char *err, size_t err_size);

#endif
