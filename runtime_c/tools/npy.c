#define _POSIX_C_SOURCE 200809L
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *descr; int32_t dtype; } kDescrs[] = {
    {"<f4", OA_DTYPE_FLOAT32}, {"<f8", OA_DTYPE_FLOAT64}, {"<i4", OA_DTYPE_INT32}, {"<i8", OA_DTYPE_INT64},
    {"<i2", OA_DTYPE_INT16},   {"|i1", OA_DTYPE_INT8},    {"|u1", OA_DTYPE_UINT8}, {"|b1", OA_DTYPE_BOOL},
    {"<f2", OA_DTYPE_FLOAT16}, {"<c8", OA_DTYPE_COMPLEX64},
};

static const char *descr_of(int32_t dtype) {
  for (size_t i = 0; i < sizeof kDescrs / sizeof kDescrs[0]; i++)
    if (kDescrs[i].dtype == dtype) return kDescrs[i].descr;
  return NULL;
}

void npy_free(npy_array_t *a) {
  free(a->data);
  a->data = NULL;
}

int npy_read(const char *path, npy_array_t *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "%s: cannot open (%s)", path, strerror(errno));
    return 1;
  }
  unsigned char pre[12];
  size_t got = fread(pre, 1, 10, f);
  if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    snprintf(err, err_size, "%s: not a .npy file (bad magic)", path);
    fclose(f);
    return 1;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) { snprintf(err, err_size, "%s: truncated header", path); fclose(f); return 1; }
    hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
  } else {
    snprintf(err, err_size, "%s: unsupported .npy version %d", path, pre[6]);
    fclose(f);
    return 1;
  }
  if (hlen > 1 << 20) { snprintf(err, err_size, "%s: header too large", path); fclose(f); return 1; }
  char *h = (char *)malloc(hlen + 1);
  if (!h || fread(h, 1, hlen, f) != hlen) {
    snprintf(err, err_size, "%s: truncated header", path);
    free(h);
    fclose(f);
    return 1;
  }
  h[hlen] = '\0';
  for (size_t n = hlen; n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\n'); n--) h[n - 1] = '\0'; /* (padding) */
  const char *d = strstr(h, "'descr'");
  const char *fo = strstr(h, "'fortran_order'");
  const char *sh = strstr(h, "'shape'");
  int ok = d && fo && sh;
  out->dtype = -1;
  if (ok) {
    /* the value of 'descr' must be one of the plain type strings: a structured (record) dtype is a
     * list of fields ('descr': [('a', '<f4'), ...]) whose bytes are not an array of one type */
    const char *q = d + 7;
    while (*q == ' ') q++;
    if (*q == ':') q++;
    while (*q == ' ') q++;
    for (size_t i = 0; *q == '\'' && i < sizeof kDescrs / sizeof kDescrs[0]; i++)
      if (strncmp(q + 1, kDescrs[i].descr, 3) == 0 && q[4] == '\'') out->dtype = kDescrs[i].dtype;
    if (out->dtype < 0) {
      if (*q == '[')
        snprintf(err, err_size, "%s: a structured (record) dtype is not supported (header %s); save a plain array",
                 path, h);
      else
        snprintf(err, err_size, "%s: unsupported dtype in header %s (expected one of <f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 |b1)",
                 path, h);
      free(h);
      fclose(f);
      return 1;
    }
    const char *v = strchr(fo, ':');
    if (v) v++;
    while (v && *v == ' ') v++;
    if (v && strncmp(v, "True", 4) == 0) {
      snprintf(err, err_size, "%s: Fortran-order arrays are not supported (save with np.ascontiguousarray)", path);
      free(h);
      fclose(f);
      return 1;
    }
    const char *p = strchr(sh, '(');
    ok = p != NULL;
    if (ok) p++;
    out->ndim = 0;
    while (ok && *p && *p != ')') {
      while (*p == ' ' || *p == ',') p++;
      if (*p == ')') break;
      char *end;
      long long dim = strtoll(p, &end, 10);
      if (end == p || dim < 0 || out->ndim >= OA_MAX_DIMS) { ok = 0; break; }
      out->shape[out->ndim++] = dim;
      p = end;
      while (*p == 'L' || *p == ' ') p++;
    }
  }
  free(h);
  if (!ok) {
    snprintf(err, err_size, "%s: cannot parse the .npy header", path);
    fclose(f);
    return 1;
  }
  uint64_t numel = 1;
  for (int32_t i = 0; i < out->ndim; i++) {
    if (out->shape[i] && numel > ((uint64_t)1 << 40) / (uint64_t)out->shape[i]) {
      snprintf(err, err_size, "%s: array too large", path);
      fclose(f);
      return 1;
    }
    numel *= (uint64_t)out->shape[i];
  }
  if (numel * oa_dtype_size(out->dtype) > (uint64_t)(SIZE_MAX / 2)) {
    snprintf(err, err_size, "%s: array too large for this platform", path);
    fclose(f);
    return 1;
  }
  out->nbytes = (size_t)numel * oa_dtype_size(out->dtype);
  out->data = malloc(out->nbytes ? out->nbytes : 1);
  if (!out->data || fread(out->data, 1, out->nbytes, f) != out->nbytes) {
    snprintf(err, err_size, "%s: file holds fewer bytes than its header promises (%zu)", path, out->nbytes);
    npy_free(out);
    fclose(f);
    return 1;
  }
  fclose(f);
  return 0;
}

int npy_write(const char *path, const oa_tensor_t *t, char *err, size_t err_size) {
  const char *descr = descr_of(t->dtype);
  if (!descr) {
    snprintf(err, err_size, "%s: dtype %s cannot be written as .npy", path, oa_dtype_name(t->dtype));
    return 1;
  }
  char shape[256];
  size_t n = 0;
  shape[0] = '\0';
  for (int32_t i = 0; i < t->ndim; i++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld,%s", (long long)t->shape[i], i + 1 < t->ndim ? " " : "");
  if (t->ndim > 1) shape[n - 1] = '\0'; /* (2, 3) not (2, 3,) */
  char header[512];
  int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
  size_t total = 10 + (size_t)len + 1;
  size_t pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) {
    snprintf(err, err_size, "%s: cannot create (%s)", path, strerror(errno));
    return 1;
  }
  unsigned hl = (unsigned)((size_t)len + pad + 1);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  int bad = fwrite(pre, 1, 10, f) != 10 || fwrite(header, 1, (size_t)len, f) != (size_t)len;
  for (size_t i = 0; !bad && i < pad; i++) bad = fputc(' ', f) == EOF;
  bad = bad || fputc('\n', f) == EOF;
  bad = bad || (t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes);
  bad = fclose(f) != 0 || bad;
  if (bad) snprintf(err, err_size, "%s: write failed (%s)", path, strerror(errno));
  return bad;
}
