/* Structured mutations of .oab files for the fuzzer: change the value of one field of a valid
 * program (a dim, an offset, a tensor index, an op, an argument, a pool size, an offset of a table
 * vector) in place, so the file still parses and the change reaches the semantic checks and the
 * kernels instead of stopping at the first bounds check, as random byte flips mostly do.
 *
 * The walk below uses the loader's own bounds-checked reader (src/fb.h) and the generated field
 * table (OAB_WALK_FIELDS); it records "sites" (a byte range and what it means), picks one, and
 * writes an interesting value there. A dim change also rewrites the tensor's nbytes (and may grow
 * its pool) so the new shape is not refused for a byte count that no longer matches. */
#include "mutate_oab.h"

#include <string.h>

#include "fb.h"
#include "oab_schema.h"

enum site_kind {
  S_DIM,          /* Tensor.shape element (i64); owner = the tensor table */
  S_TENSOR_OFF,   /* Tensor.offset (u64); owner = the tensor table */
  S_TENSOR_REF,   /* a tensor index: Instruction.inputs/outputs, Method.inputs/outputs (i32/u32) */
  S_OP,           /* Instruction.op (u32) */
  S_INT,          /* Instruction.ints element (i64) */
  S_FLOAT,        /* Instruction.floats element, TestCase atol/rtol (f64) */
  S_SIZE,         /* a byte size or offset (u64): nbytes, pool size, segment fields, test data */
  S_SMALL,        /* a small scalar (u8/u32/i32): dtype, storage, pool, segment, device, kind, events */
  S_TABLE_REF     /* an element of a vector of tables (uoffset); owner = the vector's first element */
};

typedef struct site {
  size_t pos;
  uint32_t width;
  uint8_t kind;
  uint8_t table;    /* OAB_TABLE_* of the table holding the field (or the vector) */
  size_t owner;     /* owning table (S_DIM, S_TENSOR_OFF) or vector start (S_TABLE_REF) */
  uint32_t count;   /* S_TABLE_REF: vector length; S_TENSOR_REF: tensors in the method */
  size_t method;    /* the method table the site belongs to (0: none) */
} site_t;

#define MAX_SITES 8192

typedef struct walker {
  oa_fb_t fb;
  uint8_t *buf;
  site_t sites[MAX_SITES];
  uint32_t n_sites;
  uint64_t seen;     /* sites offered (reservoir sampling keeps a uniform subset) */
  uint64_t rng;
  size_t budget;     /* bytes of tables and vectors still to walk (as the loader) */
  size_t method;     /* the method being walked */
  uint32_t n_tensors, n_ops;
} walker_t;

static uint64_t next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x ? x : 0x9e3779b97f4a7c15u;
}

static uint64_t below(uint64_t *s, uint64_t n) { return n ? next(s) % n : 0; }

static void offer(walker_t *w, size_t pos, uint32_t width, uint8_t kind, unsigned table, size_t owner,
                  uint32_t count) {
  site_t s = {pos, width, kind, (uint8_t)table, owner, count, w->method};
  w->seen++;
  if (w->n_sites < MAX_SITES) {
    w->sites[w->n_sites++] = s;
  } else {
    uint64_t j = below(&w->rng, w->seen);
    if (j < MAX_SITES) w->sites[j] = s;
  }
}

/* Absolute position of scalar field `slot` if present with `width` bytes inside the table (else 0). */
static size_t scalar_pos(const oa_fb_table_t *t, unsigned slot, size_t width) {
  size_t entry = 4u + 2u * (size_t)slot;
  if (entry + 2 > t->vt_size) return 0;
  uint16_t voff = oa_rd_u16(t->fb.buf + t->vt + entry);
  if (!voff || (size_t)voff + width > t->tbl_size) return 0;
  return t->pos + voff;
}

typedef struct scalar_field {
  uint8_t table, slot, width, kind;
} scalar_field_t;

static const scalar_field_t k_scalars[] = {
    {OAB_TABLE_TENSOR, OAB_TENSOR_DTYPE, 1, S_SMALL},
    {OAB_TABLE_TENSOR, OAB_TENSOR_STORAGE, 1, S_SMALL},
    {OAB_TABLE_TENSOR, OAB_TENSOR_POOL, 4, S_SMALL},
    {OAB_TABLE_TENSOR, OAB_TENSOR_SEGMENT, 4, S_SMALL},
    {OAB_TABLE_TENSOR, OAB_TENSOR_OFFSET, 8, S_TENSOR_OFF},
    {OAB_TABLE_TENSOR, OAB_TENSOR_NBYTES, 8, S_SIZE},
    {OAB_TABLE_INSTRUCTION, OAB_INSTRUCTION_OP, 4, S_OP},
    {OAB_TABLE_INSTRUCTION, OAB_INSTRUCTION_DEVICE, 1, S_SMALL},
    {OAB_TABLE_INSTRUCTION, OAB_INSTRUCTION_DEBUG, 4, S_SMALL},
    {OAB_TABLE_INSTRUCTION, OAB_INSTRUCTION_KIND, 1, S_SMALL},
    {OAB_TABLE_INSTRUCTION, OAB_INSTRUCTION_SIGNAL_EVENT, 4, S_SMALL},
    {OAB_TABLE_MEMORY_POOL, OAB_MEMORY_POOL_DEVICE, 1, S_SMALL},
    {OAB_TABLE_MEMORY_POOL, OAB_MEMORY_POOL_SIZE, 8, S_SIZE},
    {OAB_TABLE_MEMORY_POOL, OAB_MEMORY_POOL_ALIGNMENT, 4, S_SMALL},
    {OAB_TABLE_TENSOR_DATA, OAB_TENSOR_DATA_DTYPE, 1, S_SMALL},
    {OAB_TABLE_TENSOR_DATA, OAB_TENSOR_DATA_SEGMENT, 4, S_SMALL},
    {OAB_TABLE_TENSOR_DATA, OAB_TENSOR_DATA_OFFSET, 8, S_SIZE},
    {OAB_TABLE_TENSOR_DATA, OAB_TENSOR_DATA_NBYTES, 8, S_SIZE},
    {OAB_TABLE_TEST_CASE, OAB_TEST_CASE_ATOL, 8, S_FLOAT},
    {OAB_TABLE_TEST_CASE, OAB_TEST_CASE_RTOL, 8, S_FLOAT},
    {OAB_TABLE_SEGMENT, OAB_SEGMENT_OFFSET, 8, S_SIZE},
    {OAB_TABLE_SEGMENT, OAB_SEGMENT_SIZE, 8, S_SIZE},
    {OAB_TABLE_METHOD, OAB_METHOD_NUM_EVENTS, 4, S_SMALL},
};

typedef struct walk_field {
  uint8_t table, slot, kind, elem;
  int8_t target;
} walk_field_t;
#define MUT_WALK_ENTRY(T, S, K, E, TG) {T, S, K, E, TG},
static const walk_field_t k_fields[] = {OAB_WALK_FIELDS(MUT_WALK_ENTRY)};

/* What the elements of a scalar vector mean. */
static int vector_kind(unsigned table, unsigned slot) {
  if (table == OAB_TABLE_TENSOR && slot == OAB_TENSOR_SHAPE) return S_DIM;
  if (table == OAB_TABLE_INSTRUCTION && (slot == OAB_INSTRUCTION_INPUTS || slot == OAB_INSTRUCTION_OUTPUTS))
    return S_TENSOR_REF;
  if (table == OAB_TABLE_METHOD && (slot == OAB_METHOD_INPUTS || slot == OAB_METHOD_OUTPUTS)) return S_TENSOR_REF;
  if (table == OAB_TABLE_INSTRUCTION && slot == OAB_INSTRUCTION_INTS) return S_INT;
  if (table == OAB_TABLE_INSTRUCTION && slot == OAB_INSTRUCTION_FLOATS) return S_FLOAT;
  if (table == OAB_TABLE_TENSOR_DATA && slot == OAB_TENSOR_DATA_SHAPE) return S_SIZE;
  return S_SMALL;
}

static int walk(walker_t *w, const oa_fb_table_t *t, unsigned type, int depth) {
  if (depth > 8 || t->tbl_size > w->budget) return 1;
  w->budget -= t->tbl_size;
  if (type == OAB_TABLE_METHOD) {
    oa_fb_vec_t v;
    w->method = t->pos;
    w->n_tensors = oa_fb_vector(t, OAB_METHOD_TENSORS, 4, &v, NULL) ? 0 : v.count;
  }
  for (size_t f = 0; f < sizeof k_scalars / sizeof k_scalars[0]; f++) {
    if (k_scalars[f].table != type) continue;
    size_t pos = scalar_pos(t, k_scalars[f].slot, k_scalars[f].width);
    if (pos) offer(w, pos, k_scalars[f].width, k_scalars[f].kind, type, t->pos, w->n_tensors);
  }
  for (size_t f = 0; f < sizeof k_fields / sizeof k_fields[0]; f++) {
    const walk_field_t *wf = &k_fields[f];
    if (wf->table != type) continue;
    oa_fb_vec_t v;
    oa_fb_table_t sub;
    bool present;
    if (wf->kind == OAB_WALK_TABLE) {
      if (oa_fb_subtable(t, wf->slot, &sub, &present, NULL)) return 1;
      if (present && walk(w, &sub, (unsigned)wf->target, depth + 1)) return 1;
      continue;
    }
    if (wf->kind == OAB_WALK_STRING) continue;
    if (oa_fb_vector(t, wf->slot, wf->elem, &v, NULL)) return 1;
    size_t bytes = 4u + (size_t)v.count * wf->elem;
    if (bytes > w->budget) return 1;
    w->budget -= bytes;
    if (wf->kind == OAB_WALK_VECTOR) {
      int kind = vector_kind(type, wf->slot);
      for (uint32_t i = 0; i < v.count; i++)
        offer(w, v.pos + (size_t)i * wf->elem, wf->elem, (uint8_t)kind, type, t->pos, w->n_tensors);
    } else if (wf->kind == OAB_WALK_TABLES) {
      for (uint32_t i = 0; i < v.count; i++) {
        if (v.count > 1) offer(w, v.pos + (size_t)i * 4u, 4, S_TABLE_REF, type, v.pos, v.count);
        if (oa_fb_vec_table(&v, i, &sub, NULL) || walk(w, &sub, (unsigned)wf->target, depth + 1)) return 1;
      }
    }
  }
  return 0;
}

static void put(uint8_t *p, uint32_t width, uint64_t v) {
  for (uint32_t i = 0; i < width; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, uint32_t width) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < width; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* An interesting integer near or instead of `old`. */
static uint64_t interesting(uint64_t *rng, uint64_t old, uint32_t width) {
  static const int64_t fixed[] = {0, 1, 2, 3, 4, 7, 8, 16, 63, 64, 255, 256, 4096, 65535, 65536, -1, -2,
                                  INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, (int64_t)1 << 31, (int64_t)1 << 32,
                                  (int64_t)1 << 40, (int64_t)1 << 50, ((int64_t)1 << 50) + 1, (int64_t)1 << 62};
  switch (below(rng, 6)) {
    case 0: return (uint64_t)fixed[below(rng, sizeof fixed / sizeof fixed[0])];
    case 1: return old + 1 + below(rng, 4);
    case 2: return old - 1 - below(rng, 4);
    case 3: return old * (2 + below(rng, 3));
    case 4: return old / (2 + below(rng, 3));
    default: return width >= 8 ? (uint64_t)1 << below(rng, 63) : below(rng, 1u << (8 * width - 1));
  }
}

/* The element count of a tensor table's shape (0 on overflow or an unreadable shape). */
static int tensor_bytes(const oa_fb_table_t *t, uint64_t *out_bytes) {
  oa_fb_vec_t shape;
  uint8_t dtype;
  if (oa_fb_vector(t, OAB_TENSOR_SHAPE, 8, &shape, NULL) || oa_fb_u8(t, OAB_TENSOR_DTYPE, OAB_DTYPE_FLOAT32, &dtype, NULL))
    return 1;
  static const uint8_t sizes[16] = {1, 1, 2, 4, 8, 2, 4, 8, 0, 0, 0, 1, 0, 0, 0, 2};
  uint64_t n = dtype < 16 ? sizes[dtype] : 0;
  for (uint32_t d = 0; d < shape.count; d++) {
    int64_t dim = oa_fb_vec_i64(&shape, d);
    if (dim < 0 || (dim && n > UINT64_MAX / (uint64_t)dim)) return 1;
    n *= (uint64_t)dim;
  }
  *out_bytes = n;
  return 0;
}

/* After a dim or dtype change: the tensor's nbytes to match, and sometimes its pool grown to hold it. */
static void fix_tensor(walker_t *w, size_t tensor_pos, size_t method) {
  oa_fb_table_t t, m, plan, pool;
  oa_fb_vec_t pools;
  bool present;
  uint64_t bytes, offset;
  uint32_t index;
  if (oa_fb_table_at(&w->fb, tensor_pos, &t, NULL) || tensor_bytes(&t, &bytes)) return;
  size_t nb = scalar_pos(&t, OAB_TENSOR_NBYTES, 8);
  if (nb) put(w->buf + nb, 8, bytes);
  if (below(&w->rng, 2) || oa_fb_u64(&t, OAB_TENSOR_OFFSET, 0, &offset, NULL) ||
      oa_fb_u32(&t, OAB_TENSOR_POOL, 0, &index, NULL))
    return;
  if (!method || oa_fb_table_at(&w->fb, method, &m, NULL) ||
      oa_fb_subtable(&m, OAB_METHOD_MEMORY_PLAN, &plan, &present, NULL) || !present ||
      oa_fb_vector(&plan, OAB_MEMORY_PLAN_POOLS, 4, &pools, NULL) || index >= pools.count ||
      oa_fb_vec_table(&pools, index, &pool, NULL))
    return;
  size_t sz = scalar_pos(&pool, OAB_MEMORY_POOL_SIZE, 8);
  uint64_t need = offset + bytes;
  /* within what the fuzz target runs (it skips methods needing more than 8 MB) */
  if (sz && need >= offset && need <= ((uint64_t)6 << 20) && get(w->buf + sz, 8) < need) put(w->buf + sz, 8, need);
}

/* Another tensor's offset in the same method (to make two tensors share bytes). */
static uint64_t other_offset(walker_t *w, const site_t *s, uint64_t old) {
  oa_fb_table_t m, t;
  oa_fb_vec_t tensors;
  uint64_t off = old;
  if (!s->method || oa_fb_table_at(&w->fb, s->method, &m, NULL) ||
      oa_fb_vector(&m, OAB_METHOD_TENSORS, 4, &tensors, NULL) || !tensors.count)
    return old;
  uint32_t i = (uint32_t)below(&w->rng, tensors.count);
  if (oa_fb_vec_table(&tensors, i, &t, NULL) || oa_fb_u64(&t, OAB_TENSOR_OFFSET, 0, &off, NULL)) return old;
  return off + (below(&w->rng, 3) == 0 ? 4u * below(&w->rng, 16) : 0u);
}

static void apply(walker_t *w, const site_t *s) {
  uint8_t *p = w->buf + s->pos;
  uint64_t old = get(p, s->width);
  uint64_t v;
  switch (s->kind) {
    case S_DIM:
      v = below(&w->rng, 4) == 0 ? 0 : interesting(&w->rng, old, 8);
      put(p, 8, v);
      fix_tensor(w, s->owner, s->method);
      return;
    case S_TENSOR_OFF:
      put(p, 8, below(&w->rng, 3) ? other_offset(w, s, old) : interesting(&w->rng, old, 8));
      return;
    case S_TENSOR_REF:
      v = below(&w->rng, 8) == 0 ? (uint64_t)-1 : below(&w->rng, s->count ? s->count : 1);
      put(p, s->width, v);
      return;
    case S_OP: {
      oa_fb_table_t root;
      oa_fb_vec_t ops;
      uint32_t n = (!oa_fb_root(&w->fb, &root, NULL) && !oa_fb_vector(&root, OAB_PROGRAM_OPERATORS, 4, &ops, NULL))
                       ? ops.count : 1;
      put(p, 4, below(&w->rng, n ? n : 1));
      return;
    }
    case S_FLOAT: {
      static const double fl[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 1e300, -1e300, 3.4e38};
      double d;
      uint64_t bits;
      memcpy(&d, &old, sizeof d);
      switch (below(&w->rng, 4)) {
        case 0: d = fl[below(&w->rng, sizeof fl / sizeof fl[0])]; break;
        case 1: d = d * 2.0 + 1.0; break;
        case 2: bits = 0x7ff8000000000000u | below(&w->rng, 2); memcpy(&d, &bits, sizeof d); break; /* NaN */
        default: bits = below(&w->rng, 2) ? 0x7ff0000000000000u : 0xfff0000000000000u; memcpy(&d, &bits, sizeof d);
      }
      memcpy(&v, &d, sizeof v);
      put(p, 8, v);
      return;
    }
    case S_TABLE_REF: {
      /* point this element at a sibling's table: one table referenced twice */
      uint32_t j = (uint32_t)below(&w->rng, s->count);
      size_t at = s->owner + (size_t)j * 4u;
      uint64_t target = at + get(w->buf + at, 4);
      if (target > s->pos) put(p, 4, target - s->pos);
      return;
    }
    default:
      put(p, s->width, interesting(&w->rng, old, s->width));
      if (s->table == OAB_TABLE_TENSOR && s->width == 1 && below(&w->rng, 2)) fix_tensor(w, s->owner, s->method);
      return;
  }
}

size_t oa_fuzz_mutate_oab(uint8_t *data, size_t size, unsigned int seed, unsigned int count) {
  static walker_t w; /* large: kept off the stack */
  if (size < 40 || memcmp(data + 4, OAB_FILE_IDENTIFIER, 4) || memcmp(data + 8, "OAXH", 4)) return 0;
  uint64_t fb_size = oa_rd_u64(data + 16);
  if (fb_size < 40 || fb_size > size) return 0;
  memset(&w, 0, sizeof w);
  w.fb.buf = data;
  w.fb.size = (size_t)fb_size;
  w.buf = data;
  w.rng = ((uint64_t)seed << 1) | 1u;
  w.budget = (size_t)fb_size;
  oa_fb_table_t root;
  if (oa_fb_root(&w.fb, &root, NULL) || walk(&w, &root, OAB_TABLE_PROGRAM, 0) || !w.n_sites) return 0;
  for (unsigned int k = 0; k < count; k++) apply(&w, &w.sites[below(&w.rng, w.n_sites)]);
  return size;
}
