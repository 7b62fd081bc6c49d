#include "fb.h"

static oa_status_t bad(oa_diag_t *diag, size_t at, const char *what, size_t value, size_t limit) {
  return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                      "malformed flatbuffer at byte offset %zu: %s (%zu, limit %zu)", at, what,
                      value, limit);
}

oa_status_t oa_fb_table_at(const oa_fb_t *fb, size_t pos, oa_fb_table_t *out, oa_diag_t *diag) {
  if (pos > fb->size || fb->size - pos < 4) return bad(diag, pos, "table start outside buffer", pos, fb->size);
  int32_t soff = (int32_t)oa_rd_u32(fb->buf + pos);
  /* vtable = pos - soff, computed without overflow */
  int64_t vt = (int64_t)pos - (int64_t)soff;
  if (vt < 0 || (uint64_t)vt > fb->size || fb->size - (size_t)vt < 4)
    return bad(diag, pos, "vtable offset outside buffer", (size_t)(vt < 0 ? 0 : vt), fb->size);
  uint16_t vt_size = oa_rd_u16(fb->buf + vt);
  uint16_t tbl_size = oa_rd_u16(fb->buf + vt + 2);
  if (vt_size < 4 || (vt_size & 1u)) return bad(diag, (size_t)vt, "vtable size invalid", vt_size, 4);
  if (fb->size - (size_t)vt < vt_size) return bad(diag, (size_t)vt, "vtable runs past end", vt_size, fb->size - (size_t)vt);
  if (tbl_size < 4) return bad(diag, pos, "table size invalid", tbl_size, 4);
  if (fb->size - pos < tbl_size) return bad(diag, pos, "table runs past end", tbl_size, fb->size - pos);
  out->fb = *fb;
  out->pos = pos;
  out->vt = (size_t)vt;
  out->vt_size = vt_size;
  out->tbl_size = tbl_size;
  return OA_OK;
}

oa_status_t oa_fb_root(const oa_fb_t *fb, oa_fb_table_t *out, oa_diag_t *diag) {
  if (fb->size < 8) return bad(diag, 0, "buffer too small for a flatbuffer", fb->size, 8);
  return oa_fb_table_at(fb, oa_rd_u32(fb->buf), out, diag);
}

/* Absolute position of field `slot` if present (0 if absent); checks `width` bytes fit the table. */
static oa_status_t field(const oa_fb_table_t *t, unsigned slot, size_t width, size_t *out_pos,
                         oa_diag_t *diag) {
  size_t entry = 4u + 2u * (size_t)slot;
  *out_pos = 0;
  if (entry + 2 > t->vt_size) return OA_OK; /* older writer: field absent */
  uint16_t voff = oa_rd_u16(t->fb.buf + t->vt + entry);
  if (voff == 0) return OA_OK;
  if ((size_t)voff + width > t->tbl_size)
    return bad(diag, t->pos, "field runs past its table", (size_t)voff + width, t->tbl_size);
  *out_pos = t->pos + voff;
  return OA_OK;
}

#define SCALAR_GETTER(NAME, TYPE, WIDTH, READ)                                                \
  oa_status_t NAME(const oa_fb_table_t *t, unsigned slot, TYPE def, TYPE *out, oa_diag_t *diag) { \
    size_t p;                                                                                  \
    oa_status_t st = field(t, slot, WIDTH, &p, diag);                                          \
    if (st) return st;                                                                         \
    *out = p ? (TYPE)(READ) : def;                                                             \
    return OA_OK;                                                                              \
  }

SCALAR_GETTER(oa_fb_u8, uint8_t, 1, t->fb.buf[p])
SCALAR_GETTER(oa_fb_u16, uint16_t, 2, oa_rd_u16(t->fb.buf + p))
SCALAR_GETTER(oa_fb_u32, uint32_t, 4, oa_rd_u32(t->fb.buf + p))
SCALAR_GETTER(oa_fb_i32, int32_t, 4, (int32_t)oa_rd_u32(t->fb.buf + p))
SCALAR_GETTER(oa_fb_u64, uint64_t, 8, oa_rd_u64(t->fb.buf + p))

oa_status_t oa_fb_f64(const oa_fb_table_t *t, unsigned slot, double def, double *out, oa_diag_t *diag) {
  size_t p;
  oa_status_t st = field(t, slot, 8, &p, diag);
  if (st) return st;
  if (!p) {
    *out = def;
    return OA_OK;
  }
  uint64_t bits = oa_rd_u64(t->fb.buf + p);
  __builtin_memcpy(out, &bits, sizeof *out);
  return OA_OK;
}

/* Follow the uoffset stored at `at` to its target; checks the target lies in the buffer. */
static oa_status_t follow(const oa_fb_t *fb, size_t at, size_t *out_target, oa_diag_t *diag) {
  uint32_t off = oa_rd_u32(fb->buf + at);
  if (off == 0 || off > fb->size - at) return bad(diag, at, "offset points outside buffer", off, fb->size - at);
  *out_target = at + off;
  return OA_OK;
}

static oa_status_t string_at(const oa_fb_t *fb, size_t pos, const char **out, oa_diag_t *diag) {
  if (fb->size - pos < 4) return bad(diag, pos, "string length outside buffer", pos, fb->size);
  uint32_t len = oa_rd_u32(fb->buf + pos);
  if ((size_t)len >= fb->size - pos - 4) return bad(diag, pos, "string runs past end", len, fb->size - pos - 4);
  if (fb->buf[pos + 4 + len] != 0) return bad(diag, pos, "string not NUL-terminated", len, len);
  *out = (const char *)(fb->buf + pos + 4);
  return OA_OK;
}

oa_status_t oa_fb_string(const oa_fb_table_t *t, unsigned slot, const char **out, oa_diag_t *diag) {
  size_t p = 0, target = 0;
  oa_status_t st = field(t, slot, 4, &p, diag);
  if (st) return st;
  *out = "";
  if (!p) return OA_OK;
  if ((st = follow(&t->fb, p, &target, diag))) return st;
  return string_at(&t->fb, target, out, diag);
}

static oa_status_t vector_at(const oa_fb_t *fb, size_t pos, uint32_t elem_size, oa_fb_vec_t *out,
                             oa_diag_t *diag) {
  if (fb->size - pos < 4) return bad(diag, pos, "vector length outside buffer", pos, fb->size);
  uint32_t count = oa_rd_u32(fb->buf + pos);
  size_t avail = fb->size - pos - 4;
  if ((uint64_t)count * elem_size > avail)
    return bad(diag, pos, "vector runs past end (elements)", count, avail / (elem_size ? elem_size : 1));
  out->fb = *fb;
  out->pos = pos + 4;
  out->count = count;
  out->elem_size = elem_size;
  return OA_OK;
}

oa_status_t oa_fb_vector(const oa_fb_table_t *t, unsigned slot, uint32_t elem_size, oa_fb_vec_t *out,
                         oa_diag_t *diag) {
  size_t p = 0, target = 0;
  out->fb = t->fb;
  out->pos = 0;
  out->count = 0;
  out->elem_size = elem_size;
  oa_status_t st = field(t, slot, 4, &p, diag);
  if (st || !p) return st;
  if ((st = follow(&t->fb, p, &target, diag))) return st;
  return vector_at(&t->fb, target, elem_size, out, diag);
}

oa_status_t oa_fb_subtable(const oa_fb_table_t *t, unsigned slot, oa_fb_table_t *out, bool *present,
                           oa_diag_t *diag) {
  size_t p = 0, target = 0;
  *present = false;
  oa_status_t st = field(t, slot, 4, &p, diag);
  if (st || !p) return st;
  if ((st = follow(&t->fb, p, &target, diag))) return st;
  if ((st = oa_fb_table_at(&t->fb, target, out, diag))) return st;
  *present = true;
  return OA_OK;
}

oa_status_t oa_fb_vec_table(const oa_fb_vec_t *v, uint32_t i, oa_fb_table_t *out, oa_diag_t *diag) {
  if (i >= v->count || v->elem_size != 4) return bad(diag, v->pos, "vector index out of range", i, v->count);
  size_t target = 0;
  oa_status_t st = follow(&v->fb, v->pos + (size_t)i * 4u, &target, diag);
  if (st) return st;
  return oa_fb_table_at(&v->fb, target, out, diag);
}

oa_status_t oa_fb_vec_string(const oa_fb_vec_t *v, uint32_t i, const char **out, oa_diag_t *diag) {
  if (i >= v->count || v->elem_size != 4) return bad(diag, v->pos, "vector index out of range", i, v->count);
  size_t target = 0;
  oa_status_t st = follow(&v->fb, v->pos + (size_t)i * 4u, &target, diag);
  if (st) return st;
  return string_at(&v->fb, target, out, diag);
}
