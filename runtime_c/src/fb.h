/* A small bounds-checked flatbuffers reader.
 *
 * Every offset, vtable, vector length and string is checked against the buffer before use;
 * values are assembled byte by byte (little-endian), so neither alignment nor host byte order
 * matters. Failures return OA_ERR_INVALID_PROGRAM with the byte offset in the message.
 */
#ifndef OA_FB_H
#define OA_FB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openaccel/status.h"

typedef struct oa_fb {
  const uint8_t *buf;
  size_t size;            /* bytes of the flatbuffer region */
} oa_fb_t;

/* Tables and vectors carry the buffer by value so they stay valid when copied. */
typedef struct oa_fb_table {
  oa_fb_t fb;
  size_t pos;             /* table start */
  size_t vt;              /* vtable start */
  uint16_t vt_size;
  uint16_t tbl_size;
} oa_fb_table_t;

typedef struct oa_fb_vec {
  oa_fb_t fb;
  size_t pos;             /* first element */
  uint32_t count;
  uint32_t elem_size;
} oa_fb_vec_t;

static inline uint16_t oa_rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t oa_rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t oa_rd_u64(const uint8_t *p) {
  return (uint64_t)oa_rd_u32(p) | ((uint64_t)oa_rd_u32(p + 4) << 32);
}

/* The table whose start is `pos`. */
oa_status_t oa_fb_table_at(const oa_fb_t *fb, size_t pos, oa_fb_table_t *out, oa_diag_t *diag);

/* The root table (uoffset at position 0). */
oa_status_t oa_fb_root(const oa_fb_t *fb, oa_fb_table_t *out, oa_diag_t *diag);

/* Scalars: the default when the field is absent. */
oa_status_t oa_fb_u8(const oa_fb_table_t *t, unsigned slot, uint8_t def, uint8_t *out, oa_diag_t *diag);
oa_status_t oa_fb_u16(const oa_fb_table_t *t, unsigned slot, uint16_t def, uint16_t *out, oa_diag_t *diag);
oa_status_t oa_fb_u32(const oa_fb_table_t *t, unsigned slot, uint32_t def, uint32_t *out, oa_diag_t *diag);
oa_status_t oa_fb_i32(const oa_fb_table_t *t, unsigned slot, int32_t def, int32_t *out, oa_diag_t *diag);
oa_status_t oa_fb_u64(const oa_fb_table_t *t, unsigned slot, uint64_t def, uint64_t *out, oa_diag_t *diag);
oa_status_t oa_fb_f64(const oa_fb_table_t *t, unsigned slot, double def, double *out, oa_diag_t *diag);

/* A string: "" when absent. Checked to be NUL-terminated inside the buffer. */
oa_status_t oa_fb_string(const oa_fb_table_t *t, unsigned slot, const char **out, oa_diag_t *diag);

/* A vector of `elem_size`-byte elements (scalars, or 4-byte offsets to tables/strings); an empty
 * vector (count 0) when absent. */
oa_status_t oa_fb_vector(const oa_fb_table_t *t, unsigned slot, uint32_t elem_size, oa_fb_vec_t *out,
                         oa_diag_t *diag);

/* A sub-table; *present = false (and `out` untouched) when absent. */
oa_status_t oa_fb_subtable(const oa_fb_table_t *t, unsigned slot, oa_fb_table_t *out, bool *present,
                           oa_diag_t *diag);

/* Element access; `i` must be < count (callers loop to count). */
static inline int64_t oa_fb_vec_i64(const oa_fb_vec_t *v, uint32_t i) {
  return (int64_t)oa_rd_u64(v->fb.buf + v->pos + (size_t)i * 8u);
}
static inline uint64_t oa_fb_vec_u64(const oa_fb_vec_t *v, uint32_t i) {
  return oa_rd_u64(v->fb.buf + v->pos + (size_t)i * 8u);
}
static inline int32_t oa_fb_vec_i32(const oa_fb_vec_t *v, uint32_t i) {
  return (int32_t)oa_rd_u32(v->fb.buf + v->pos + (size_t)i * 4u);
}
static inline uint32_t oa_fb_vec_u32(const oa_fb_vec_t *v, uint32_t i) {
  return oa_rd_u32(v->fb.buf + v->pos + (size_t)i * 4u);
}
static inline uint8_t oa_fb_vec_u8(const oa_fb_vec_t *v, uint32_t i) { return v->fb.buf[v->pos + i]; }
static inline double oa_fb_vec_f64(const oa_fb_vec_t *v, uint32_t i) {
  uint64_t bits = oa_rd_u64(v->fb.buf + v->pos + (size_t)i * 8u);
  double d;
  __builtin_memcpy(&d, &bits, sizeof d);
  return d;
}
static inline float oa_fb_vec_f32(const oa_fb_vec_t *v, uint32_t i) {
  uint32_t bits = oa_rd_u32(v->fb.buf + v->pos + (size_t)i * 4u);
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

/* Element `i` of a vector of tables / strings. */
oa_status_t oa_fb_vec_table(const oa_fb_vec_t *v, uint32_t i, oa_fb_table_t *out, oa_diag_t *diag);
oa_status_t oa_fb_vec_string(const oa_fb_vec_t *v, uint32_t i, const char **out, oa_diag_t *diag);

#endif /* OA_FB_H */
