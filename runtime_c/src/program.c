/* Loading and verifying .oab files. Nothing here allocates; every read is checked. */
#include <string.h>

#include "oab_schema.h"
#include "openaccel/program.h"
#include "program_internal.h"

#define HEADER_MAGIC "OAXH"
#define HEADER_BYTES 40 /* root offset + identifier + 32-byte extended header */
#define OA_MAX_ELEMENTS ((uint64_t)1 << 50) /* per dim, per tensor, and of a tensor's non-zero dims */

/* ---- the tree walk: every table and vector reachable from the root, each counted where it is
 * referenced. A file that stores every table once (as a flatbuffer writer does) adds up to at most
 * its own size; one whose offsets point at the same table from many places (a methods vector of N
 * offsets to one Method whose tensors vector holds N offsets to one Tensor: 8N bytes, N^2 visits)
 * runs out of budget, so loading is linear in the file size whatever the offsets say. */
typedef struct walk_field {
  uint8_t table, slot, kind, elem;
  int8_t target;
} walk_field_t;
#define OA_WALK_ENTRY(T, S, K, E, TG) {T, S, K, E, TG},
static const walk_field_t k_walk_fields[] = {OAB_WALK_FIELDS(OA_WALK_ENTRY)};
static const char *const k_table_names[OAB_TABLE_COUNT] = {OAB_TABLE_NAMES};

typedef struct walk {
  size_t budget; /* bytes of tables and vectors the rest of the walk may still reach */
  size_t fb_size;
} walk_t;

/* Take `bytes` (a table at `at`, or with slot >= 0 the vector in that field) from the budget. */
static oa_status_t charge(walk_t *w, size_t bytes, size_t at, unsigned table, int slot, oa_diag_t *diag) {
  if (bytes <= w->budget) {
    w->budget -= bytes;
    return OA_OK;
  }
  char what[96];
  if (slot < 0) oa_format(what, sizeof what, "a %s table", k_table_names[table]);
  else oa_format(what, sizeof what, "the vector in field %d of a %s table", slot, k_table_names[table]);
  return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                      "malformed flatbuffer at byte offset %zu (%s): the tables and vectors reachable from the root "
                      "add up to more than the flatbuffer's %zu bytes, so some are referenced from more than one "
                      "place; every table and vector must be stored once, where it is used",
                      at, what, w->fb_size);
}

static oa_status_t walk_table(walk_t *w, const oa_fb_table_t *t, unsigned type, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = charge(w, t->tbl_size, t->pos, type, -1, diag))) return st;
  for (size_t f = 0; f < sizeof k_walk_fields / sizeof k_walk_fields[0]; f++) {
    const walk_field_t *wf = &k_walk_fields[f];
    if (wf->table != type) continue;
    const char *s;
    oa_fb_vec_t v;
    oa_fb_table_t sub;
    bool present;
    switch (wf->kind) {
      case OAB_WALK_STRING:
        if ((st = oa_fb_string(t, wf->slot, &s, diag))) return st;
        break;
      case OAB_WALK_TABLE:
        if ((st = oa_fb_subtable(t, wf->slot, &sub, &present, diag))) return st;
        if (present && (st = walk_table(w, &sub, (unsigned)wf->target, diag))) return st;
        break;
      default: /* vectors: charged before their elements are visited */
        if ((st = oa_fb_vector(t, wf->slot, wf->elem, &v, diag))) return st;
        if (!v.count) break;
        if ((st = charge(w, 4u + (size_t)v.count * wf->elem, v.pos - 4, type, wf->slot, diag))) return st;
        for (uint32_t i = 0; i < v.count && wf->kind == OAB_WALK_STRINGS; i++)
          if ((st = oa_fb_vec_string(&v, i, &s, diag))) return st;
        for (uint32_t i = 0; i < v.count && wf->kind == OAB_WALK_TABLES; i++) {
          if ((st = oa_fb_vec_table(&v, i, &sub, diag))) return st;
          if ((st = walk_table(w, &sub, (unsigned)wf->target, diag))) return st;
        }
        break;
    }
  }
  return OA_OK;
}

static oa_fb_t fb_of(const oa_program_t *p) {
  oa_fb_t fb = {p->data, p->flatbuffer_size};
  return fb;
}

static oa_status_t root_table(const oa_program_t *p, const oa_fb_t *fb, oa_fb_table_t *out,
                              oa_diag_t *diag) {
  return oa_fb_table_at(fb, p->root, out, diag);
}

oa_status_t oa_program_segment(const oa_program_t *p, uint32_t index, const uint8_t **out_data,
                               uint64_t *out_size, oa_diag_t *diag) {
  oa_fb_t fb = fb_of(p);
  oa_fb_table_t root, seg;
  oa_fb_vec_t segs;
  oa_status_t st;
  if ((st = root_table(p, &fb, &root, diag))) return st;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_SEGMENTS, 4, &segs, diag))) return st;
  if (index >= segs.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "segment index %u out of range (file has %u)",
                        index, segs.count);
  if ((st = oa_fb_vec_table(&segs, index, &seg, diag))) return st;
  uint64_t off, size;
  if ((st = oa_fb_u64(&seg, OAB_SEGMENT_OFFSET, 0, &off, diag))) return st;
  if ((st = oa_fb_u64(&seg, OAB_SEGMENT_SIZE, 0, &size, diag))) return st;
  if (off % 64 != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "segment %u: offset %llu is not 64-byte aligned", index, (unsigned long long)off);
  if (off > p->segment_size || size > p->segment_size - off)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "segment %u: bytes [%llu, +%llu) run past the segment data (%zu bytes at file offset %zu)",
                        index, (unsigned long long)off, (unsigned long long)size, p->segment_size,
                        p->segment_base);
  *out_data = p->data + p->segment_base + off;
  *out_size = size;
  return OA_OK;
}

oa_status_t oa_program_method_view(const oa_program_t *p, uint32_t index, oa_method_view_t *out,
                                   oa_diag_t *diag) {
  oa_status_t st;
  oa_fb_table_t root;
  oa_fb_vec_t methods;
  memset(out, 0, sizeof *out);
  out->fb = fb_of(p);
  if ((st = root_table(p, &out->fb, &root, diag))) return st;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_METHODS, 4, &methods, diag))) return st;
  if (index >= methods.count)
    return oa_diag_fail(diag, OA_ERR_NOT_FOUND, "method index %u out of range (file has %u)", index,
                        methods.count);
  if ((st = oa_fb_vec_table(&methods, index, &out->table, diag))) return st;
  if ((st = oa_fb_string(&out->table, OAB_METHOD_NAME, &out->name, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_INPUTS, 4, &out->inputs, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_OUTPUTS, 4, &out->outputs, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_TENSORS, 4, &out->tensors, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_INSTRUCTIONS, 4, &out->instructions, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_DEVICES, 4, &out->devices, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_TESTS, 4, &out->tests, diag))) return st;
  if ((st = oa_fb_vector(&out->table, OAB_METHOD_DEBUG, 4, &out->debug, diag))) return st;
  oa_fb_table_t plan;
  bool has_plan;
  if ((st = oa_fb_subtable(&out->table, OAB_METHOD_MEMORY_PLAN, &plan, &has_plan, diag))) return st;
  if (has_plan) {
    if ((st = oa_fb_vector(&plan, OAB_MEMORY_PLAN_POOLS, 4, &out->pools, diag))) return st;
  } else {
    out->pools.fb = out->fb;
    out->pools.count = 0;
  }
  if ((st = oa_fb_u32(&out->table, OAB_METHOD_NUM_EVENTS, 0, &out->num_events, diag))) return st;
  if (out->num_events > OA_MAX_EVENTS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "method '%s' uses %u events; this runtime supports %d",
                        out->name, out->num_events, OA_MAX_EVENTS);
  if (out->devices.count > OA_MAX_DEVICE_SLOTS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "method '%s' uses %u device slots; this runtime supports %d",
                        out->name, out->devices.count, OA_MAX_DEVICE_SLOTS);
  if (out->pools.count > OA_MAX_POOLS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "method '%s' has %u memory pools; this runtime supports %d",
                        out->name, out->pools.count, OA_MAX_POOLS);
  return OA_OK;
}

oa_status_t oa_program_pool(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                            oa_pool_desc_t *out, oa_diag_t *diag) {
  (void)p;
  oa_fb_table_t t;
  oa_status_t st;
  if ((st = oa_fb_vec_table(&m->pools, index, &t, diag))) return st;
  if ((st = oa_fb_u8(&t, OAB_MEMORY_POOL_DEVICE, 0, &out->device, diag))) return st;
  if ((st = oa_fb_u64(&t, OAB_MEMORY_POOL_SIZE, 0, &out->size, diag))) return st;
  if ((st = oa_fb_u32(&t, OAB_MEMORY_POOL_ALIGNMENT, 64, &out->alignment, diag))) return st;
  if (out->device >= m->devices.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "memory pool %u: device slot %u out of range (method has %u)",
                        index, out->device, m->devices.count);
  if (out->alignment == 0 || (out->alignment & (out->alignment - 1)) || out->alignment > 4096)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "memory pool %u: alignment %u is not a power of two <= 4096",
                        index, out->alignment);
  if (out->size > (uint64_t)SIZE_MAX / 2)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "memory pool %u: %llu bytes exceed this platform's address space",
                        index, (unsigned long long)out->size);
  return OA_OK;
}

oa_status_t oa_program_device_slot(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                   const char **out_kind, uint32_t *out_ordinal, oa_diag_t *diag) {
  (void)p;
  oa_fb_table_t t;
  oa_status_t st;
  if ((st = oa_fb_vec_table(&m->devices, index, &t, diag))) return st;
  if ((st = oa_fb_string(&t, OAB_DEVICE_SLOT_KIND, out_kind, diag))) return st;
  if ((st = oa_fb_u32(&t, OAB_DEVICE_SLOT_INDEX, 0, out_ordinal, diag))) return st;
  if (!**out_kind)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "device slot %u has no kind", index);
  return OA_OK;
}

/* "[2, 0, 3]" into buf. */
static const char *shape_str(const int64_t *shape, int32_t ndim, char *buf, size_t size) {
  size_t n = oa_format(buf, size, "[");
  for (int32_t d = 0; d < ndim && n + 1 < size; d++) n += oa_format(buf + n, size - n, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (n + 1 < size) oa_format(buf + n, size - n, "]");
  return buf;
}

/* Shape, dtype and element count of a shape vector; shared by tensors and test data.
 * Every dim and the element count are at most 2^50, and so is the product of the non-zero dims
 * (`out_nominal`, the element count with zero dims counted as 1): a tensor with no elements still
 * has kernels loop over its other dims, so they are bounded like a non-empty tensor's, and any
 * product of one tensor's dims fits in int64 with room to spare. */
static oa_status_t read_shape(const oa_fb_vec_t *shape, int32_t dtype, int32_t *out_ndim,
                              int64_t *out_shape, int64_t *out_numel, uint64_t *out_bytes,
                              uint64_t *out_nominal, const char *what, uint32_t index, const char *name,
                              oa_diag_t *diag) {
  char who[160]; /* "tensor 3 ('x')", written only for a message */
#define OA_WHO() (oa_format(who, sizeof who, name && *name ? "%s %u ('%s')" : "%s %u", what, index, name), who)
  size_t esize = oa_dtype_size(dtype);
  if (!esize)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s: unknown dtype %d", OA_WHO(), dtype);
  if (shape->count > OA_MAX_DIMS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s: %u dimensions, at most %d supported", OA_WHO(),
                        shape->count, OA_MAX_DIMS);
  uint64_t numel = 1, nominal = 1;
  for (uint32_t d = 0; d < shape->count; d++) {
    int64_t dim = oa_fb_vec_i64(shape, d);
    if (dim < 0 || (uint64_t)dim > OA_MAX_ELEMENTS)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "%s: dimension %u has invalid size %lld (expected 0 to 2^50)",
                          OA_WHO(), d, (long long)dim);
    out_shape[d] = dim;
    if (dim && nominal > OA_MAX_ELEMENTS / (uint64_t)dim) {
      char buf[200];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "%s: shape %s: the product of its non-zero dims exceeds 2^50 elements", OA_WHO(),
                          shape_str(out_shape, (int32_t)d + 1, buf, sizeof buf));
    }
    nominal *= dim ? (uint64_t)dim : 1u;
    numel *= (uint64_t)dim;
  }
  for (uint32_t d = shape->count; d < OA_MAX_DIMS; d++) out_shape[d] = 1;
  *out_ndim = (int32_t)shape->count;
  *out_numel = (int64_t)numel;
  *out_bytes = numel * esize;
  *out_nominal = nominal * esize;
  return OA_OK;
#undef OA_WHO
}

oa_status_t oa_program_tensor(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                              oa_tensor_desc_t *out, oa_diag_t *diag) {
  oa_fb_table_t t;
  oa_fb_vec_t shape, order;
  oa_status_t st;
  uint8_t dtype;
  if (index >= m->tensors.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor index %u out of range (method has %u)",
                        index, m->tensors.count);
  if ((st = oa_fb_vec_table(&m->tensors, index, &t, diag))) return st;
  if ((st = oa_fb_string(&t, OAB_TENSOR_NAME, &out->name, diag))) return st;
  if ((st = oa_fb_u8(&t, OAB_TENSOR_DTYPE, OAB_DTYPE_FLOAT32, &dtype, diag))) return st;
  out->dtype = (int8_t)dtype;
  if ((st = oa_fb_vector(&t, OAB_TENSOR_SHAPE, 8, &shape, diag))) return st;
  uint64_t bytes, nominal;
  if ((st = read_shape(&shape, out->dtype, &out->ndim, out->shape, &out->numel, &bytes, &nominal, "tensor", index,
                       out->name, diag)))
    return st;
  if ((st = oa_fb_vector(&t, OAB_TENSOR_DIM_ORDER, 1, &order, diag))) return st;
  out->contiguous = 1;
  if (order.count) {
    if (order.count != shape.count)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): dim order has %u entries for %u dims",
                          index, out->name, order.count, shape.count);
    uint32_t seen = 0;
    for (uint32_t d = 0; d < order.count; d++) {
      uint8_t v = oa_fb_vec_u8(&order, d);
      if (v >= order.count || (seen & (1u << v)))
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): dim order is not a permutation",
                            index, out->name);
      seen |= 1u << v;
      if (v != d) out->contiguous = 0;
    }
  }
  if ((st = oa_fb_u8(&t, OAB_TENSOR_STORAGE, OAB_STORAGE_PLANNED, &out->storage, diag))) return st;
  if ((st = oa_fb_u32(&t, OAB_TENSOR_POOL, 0, &out->pool, diag))) return st;
  if ((st = oa_fb_u32(&t, OAB_TENSOR_SEGMENT, 0, &out->segment, diag))) return st;
  if ((st = oa_fb_u64(&t, OAB_TENSOR_OFFSET, 0, &out->offset, diag))) return st;
  if ((st = oa_fb_u64(&t, OAB_TENSOR_NBYTES, 0, &out->nbytes, diag))) return st;
  if (out->nbytes != bytes)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "tensor %u ('%s'): nbytes %llu does not match its shape and dtype (%llu)", index,
                        out->name, (unsigned long long)out->nbytes, (unsigned long long)bytes);
  size_t esize = oa_dtype_size(out->dtype);
  if (out->offset % esize)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): offset %llu not aligned to %zu bytes",
                        index, out->name, (unsigned long long)out->offset, esize);
  if (out->storage == OAB_STORAGE_PLANNED) {
    oa_pool_desc_t pool;
    if (out->pool >= m->pools.count)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): pool %u out of range (plan has %u)",
                          index, out->name, out->pool, m->pools.count);
    if ((st = oa_program_pool(p, m, out->pool, &pool, diag))) return st;
    if (out->offset > pool.size || out->nbytes > pool.size - out->offset)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): bytes [%llu, +%llu) run past pool %u (%llu bytes)", index,
                          out->name, (unsigned long long)out->offset, (unsigned long long)out->nbytes,
                          out->pool, (unsigned long long)pool.size);
    if (nominal > pool.size) {
      char buf[200];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): shape %s has no elements, but with its zero dims counted as 1 it "
                          "describes %llu bytes, more than pool %u holds (%llu bytes); a tensor's dims are bounded "
                          "by its pool whether it is empty or not", index, out->name,
                          shape_str(out->shape, out->ndim, buf, sizeof buf), (unsigned long long)nominal, out->pool,
                          (unsigned long long)pool.size);
    }
  } else if (out->storage == OAB_STORAGE_CONSTANT) {
    const uint8_t *data;
    uint64_t size;
    if ((st = oa_program_segment(p, out->segment, &data, &size, diag)))
      return oa_diag_context(diag, st, "tensor %u ('%s')", index, out->name);
    if (out->offset > size || out->nbytes > size - out->offset)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): bytes [%llu, +%llu) run past segment %u (%llu bytes)", index,
                          out->name, (unsigned long long)out->offset, (unsigned long long)out->nbytes,
                          out->segment, (unsigned long long)size);
    if (nominal > p->size) {
      char buf[200];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): constant of shape %s has no elements, but with its zero dims counted as 1 "
                          "it describes %llu bytes, more than the %zu-byte file; a constant's dims are bounded by the "
                          "file whether it is empty or not", index, out->name,
                          shape_str(out->shape, out->ndim, buf, sizeof buf), (unsigned long long)nominal, p->size);
    }
  } else {
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): unknown storage kind %u", index,
                        out->name, out->storage);
  }
  return OA_OK;
}

oa_status_t oa_program_instruction(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                   oa_instr_desc_t *out, oa_diag_t *diag) {
  oa_fb_table_t t;
  oa_status_t st;
  if ((st = oa_fb_vec_table(&m->instructions, index, &t, diag))) return st;
  if ((st = oa_fb_u32(&t, OAB_INSTRUCTION_OP, 0, &out->op, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_INSTRUCTION_INPUTS, 4, &out->inputs, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_INSTRUCTION_OUTPUTS, 4, &out->outputs, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_INSTRUCTION_INTS, 8, &out->ints, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_INSTRUCTION_FLOATS, 8, &out->floats, diag))) return st;
  if ((st = oa_fb_u8(&t, OAB_INSTRUCTION_DEVICE, 0, &out->device, diag))) return st;
  if ((st = oa_fb_i32(&t, OAB_INSTRUCTION_DEBUG, -1, &out->debug, diag))) return st;
  if ((st = oa_fb_u8(&t, OAB_INSTRUCTION_KIND, OAB_INSTRUCTION_KIND_OP, &out->kind, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_INSTRUCTION_WAIT_EVENTS, 4, &out->waits, diag))) return st;
  if ((st = oa_fb_i32(&t, OAB_INSTRUCTION_SIGNAL_EVENT, -1, &out->signal, diag))) return st;
  if (out->kind != OAB_INSTRUCTION_KIND_OP && out->kind != OAB_INSTRUCTION_KIND_TRANSFER)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: unknown kind %u", index, out->kind);
  if (out->signal < -1 || (out->signal >= 0 && (uint32_t)out->signal >= m->num_events))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: signal event %d out of range (method has %u)",
                        index, out->signal, m->num_events);
  for (uint32_t w = 0; w < out->waits.count; w++)
    if (oa_fb_vec_u32(&out->waits, w) >= m->num_events)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: wait event %u out of range (method has %u)",
                          index, oa_fb_vec_u32(&out->waits, w), m->num_events);
  if (out->kind == OAB_INSTRUCTION_KIND_TRANSFER && (out->inputs.count != 1 || out->outputs.count != 1))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: a transfer has exactly one input and one output",
                        index);
  if (out->op >= p->operator_count && out->kind == OAB_INSTRUCTION_KIND_OP)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: operator %u out of range (manifest has %u)",
                        index, out->op, p->operator_count);
  if (out->device >= m->devices.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: device slot %u out of range (method has %u)",
                        index, out->device, m->devices.count);
  if (out->debug < -1 || (out->debug >= 0 && (uint32_t)out->debug >= m->debug.count))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: debug entry %d out of range (method has %u)",
                        index, out->debug, m->debug.count);
  if (out->inputs.count > OA_MAX_OP_INPUTS || out->outputs.count > OA_MAX_OP_OUTPUTS)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "instruction %u: %u inputs / %u outputs; at most %d / %d supported",
                        index, out->inputs.count, out->outputs.count, OA_MAX_OP_INPUTS, OA_MAX_OP_OUTPUTS);
  for (uint32_t i = 0; i < out->inputs.count; i++) {
    int32_t v = oa_fb_vec_i32(&out->inputs, i);
    if (v < -1 || (v >= 0 && (uint32_t)v >= m->tensors.count))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: input %u refers to tensor %d (method has %u)",
                          index, i, v, m->tensors.count);
  }
  for (uint32_t i = 0; i < out->outputs.count; i++) {
    int32_t v = oa_fb_vec_i32(&out->outputs, i);
    if (v < 0 || (uint32_t)v >= m->tensors.count)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: output %u refers to tensor %d (method has %u)",
                          index, i, v, m->tensors.count);
  }
  return OA_OK;
}

oa_status_t oa_program_test(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                            oa_test_desc_t *out, oa_diag_t *diag) {
  (void)p;
  oa_fb_table_t t;
  oa_status_t st;
  if ((st = oa_fb_vec_table(&m->tests, index, &t, diag))) return st;
  if ((st = oa_fb_string(&t, OAB_TEST_CASE_NAME, &out->name, diag))) return st;
  if ((st = oa_fb_f64(&t, OAB_TEST_CASE_ATOL, 0.0, &out->atol, diag))) return st;
  if ((st = oa_fb_f64(&t, OAB_TEST_CASE_RTOL, 0.0, &out->rtol, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_TEST_CASE_INPUTS, 4, &out->inputs, diag))) return st;
  if ((st = oa_fb_vector(&t, OAB_TEST_CASE_OUTPUTS, 4, &out->outputs, diag))) return st;
  if (!(out->atol >= 0.0) || !(out->rtol >= 0.0))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u ('%s'): tolerances must be >= 0", index, out->name);
  return OA_OK;
}

oa_status_t oa_program_test_data(const oa_program_t *p, const oa_fb_vec_t *vec, uint32_t index,
                                 oa_data_desc_t *out, oa_diag_t *diag) {
  oa_fb_table_t t;
  oa_fb_vec_t shape;
  oa_status_t st;
  uint8_t dtype;
  uint32_t segment;
  uint64_t offset, nbytes, bytes, nominal;
  int64_t numel;
  if ((st = oa_fb_vec_table(vec, index, &t, diag))) return st;
  if ((st = oa_fb_u8(&t, OAB_TENSOR_DATA_DTYPE, OAB_DTYPE_FLOAT32, &dtype, diag))) return st;
  out->dtype = (int8_t)dtype;
  if ((st = oa_fb_vector(&t, OAB_TENSOR_DATA_SHAPE, 8, &shape, diag))) return st;
  if ((st = read_shape(&shape, out->dtype, &out->ndim, out->shape, &numel, &bytes, &nominal, "test tensor", index,
                       NULL, diag)))
    return st;
  if (nominal > p->size) {
    char buf[200];
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "test tensor %u: shape %s has no elements, but with its zero dims counted as 1 it describes "
                        "%llu bytes, more than the %zu-byte file", index, shape_str(out->shape, out->ndim, buf, sizeof buf),
                        (unsigned long long)nominal, p->size);
  }
  if ((st = oa_fb_u32(&t, OAB_TENSOR_DATA_SEGMENT, 0, &segment, diag))) return st;
  if ((st = oa_fb_u64(&t, OAB_TENSOR_DATA_OFFSET, 0, &offset, diag))) return st;
  if ((st = oa_fb_u64(&t, OAB_TENSOR_DATA_NBYTES, 0, &nbytes, diag))) return st;
  if (nbytes != bytes)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test tensor %u: nbytes %llu does not match shape and dtype (%llu)",
                        index, (unsigned long long)nbytes, (unsigned long long)bytes);
  const uint8_t *data;
  uint64_t size;
  if ((st = oa_program_segment(p, segment, &data, &size, diag))) return st;
  if (offset > size || nbytes > size - offset)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test tensor %u: bytes [%llu, +%llu) run past segment %u",
                        index, (unsigned long long)offset, (unsigned long long)nbytes, segment);
  out->data = data + offset;
  out->nbytes = nbytes;
  return OA_OK;
}

void oa_program_debug(const oa_program_t *p, const oa_method_view_t *m, int32_t index,
                      const char **out_file, uint32_t *out_line, const char **out_code) {
  (void)p;
  oa_fb_table_t t;
  *out_file = "";
  *out_code = "";
  *out_line = 0;
  if (index < 0 || (uint32_t)index >= m->debug.count) return;
  if (oa_fb_vec_table(&m->debug, (uint32_t)index, &t, NULL)) return;
  if (oa_fb_string(&t, OAB_SOURCE_LOCATION_FILE, out_file, NULL)) *out_file = "";
  if (oa_fb_u32(&t, OAB_SOURCE_LOCATION_LINE, 0, out_line, NULL)) *out_line = 0;
  if (oa_fb_string(&t, OAB_SOURCE_LOCATION_CODE, out_code, NULL)) *out_code = "";
}

/* Where a tensor's bytes are, for the aliasing rules: planned tensors of one pool overlap when
 * their byte ranges do; constants and empty tensors never overlap anything written. */
typedef struct span {
  uint64_t offset, nbytes;
  uint32_t pool;
  uint8_t written; /* planned and non-empty */
} span_t;

static int spans_overlap(const span_t *a, const span_t *b) {
  return a->written && b->written && a->pool == b->pool && a->offset < b->offset + b->nbytes &&
         b->offset < a->offset + a->nbytes;
}

static int spans_equal(const span_t *a, const span_t *b) {
  return a->pool == b->pool && a->offset == b->offset && a->nbytes == b->nbytes;
}

static int same_dtype_shape(const oa_tensor_desc_t *a, const oa_tensor_desc_t *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* The aliasing rules of instruction `i`: its outputs are pairwise disjoint, and disjoint from its
 * inputs except where the op runs in place (oa_op_inplace_input): output 0 may be exactly the
 * bytes, dtype and shape of its in-place input (and, for elementwise ops, of inputs identical to
 * that one). Kernels read inputs after writing outputs (index_select re-reads its indices, cat and
 * select memcpy), so any other overlap lets a file feed a kernel bytes it already checked and then
 * changed, or hand memcpy overlapping ranges. */
static oa_status_t verify_aliasing(const oa_program_t *p, const oa_method_view_t *m, uint32_t i,
                                   const oa_instr_desc_t *ins, oa_diag_t *diag) {
  span_t in[OA_MAX_OP_INPUTS], out[OA_MAX_OP_OUTPUTS];
  oa_tensor_desc_t a, b;
  oa_status_t st;
  const uint32_t n_in = ins->inputs.count, n_out = ins->outputs.count;
  const oa_fb_vec_t *vecs[2] = {&ins->inputs, &ins->outputs};
  span_t *spans[2] = {in, out};
  for (int k = 0; k < 2; k++) {
    for (uint32_t j = 0; j < vecs[k]->count; j++) {
      int32_t t = oa_fb_vec_i32(vecs[k], j);
      span_t *s = &spans[k][j];
      memset(s, 0, sizeof *s);
      if (t < 0) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)t, &a, diag))) return st;
      s->offset = a.offset;
      s->nbytes = a.nbytes;
      s->pool = a.pool;
      s->written = a.storage == OAB_STORAGE_PLANNED && a.nbytes > 0;
    }
  }
  const char *op = ins->kind == OAB_INSTRUCTION_KIND_TRANSFER ? "transfer" : oa_program_operator_name(p, ins->op);
  if (!op) op = "?";
  for (uint32_t o = 0; o < n_out; o++) {
    for (uint32_t o2 = o + 1; o2 < n_out; o2++) {
      if (!spans_overlap(&out[o], &out[o2])) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o), &a, diag)) ||
          (st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o2), &b, diag)))
        return st;
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "instruction %u (%s): outputs %u ('%s', bytes [%llu, +%llu) of pool %u) and %u ('%s', bytes "
                          "[%llu, +%llu)) overlap; an instruction's outputs must be disjoint", i, op, o, a.name,
                          (unsigned long long)a.offset, (unsigned long long)a.nbytes, a.pool, o2, b.name,
                          (unsigned long long)b.offset, (unsigned long long)b.nbytes);
    }
  }
  int elementwise = 0;
  int k = ins->kind == OAB_INSTRUCTION_KIND_OP ? oa_op_inplace_input(op, &elementwise) : -1;
  for (uint32_t o = 0; o < n_out; o++) {
    for (uint32_t j = 0; j < n_in; j++) {
      if (!spans_overlap(&out[o], &in[j])) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o), &a, diag)) ||
          (st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->inputs, j), &b, diag)))
        return st;
      int allowed = o == 0 && k >= 0 && (uint32_t)k < n_in && spans_equal(&out[0], &in[j]) &&
                    same_dtype_shape(&a, &b) && (j == (uint32_t)k || (elementwise && spans_equal(&in[k], &in[j])));
      if (allowed) continue;
      char rule[160];
      if (k >= 0)
        oa_format(rule, sizeof rule, "%s runs in place only on input %d: output 0 may be exactly its bytes, dtype "
                  "and shape, and must be disjoint from the other inputs", op, k);
      else
        oa_format(rule, sizeof rule, "%s never runs in place: its outputs must be disjoint from its inputs", op);
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "instruction %u (%s): output %u ('%s', bytes [%llu, +%llu) of pool %u) overlaps input %u "
                          "('%s', bytes [%llu, +%llu)); %s", i, op, o, a.name, (unsigned long long)a.offset,
                          (unsigned long long)a.nbytes, a.pool, j, b.name, (unsigned long long)b.offset,
                          (unsigned long long)b.nbytes, rule);
    }
  }
  return OA_OK;
}

/* Walk one method completely so prepare can trust indices and sizes. */
static oa_status_t verify_method(const oa_program_t *p, uint32_t index, oa_diag_t *diag) {
  oa_method_view_t m;
  oa_status_t st;
  if ((st = oa_program_method_view(p, index, &m, diag))) return st;
  if (m.devices.count == 0 && m.instructions.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s' has instructions but no device slots", m.name);
  for (uint32_t i = 0; i < m.devices.count; i++) {
    const char *kind;
    uint32_t ordinal;
    if ((st = oa_program_device_slot(p, &m, i, &kind, &ordinal, diag))) return st;
  }
  for (uint32_t i = 0; i < m.pools.count; i++) {
    oa_pool_desc_t pool;
    if ((st = oa_program_pool(p, &m, i, &pool, diag))) return st;
  }
  for (uint32_t i = 0; i < m.tensors.count; i++) {
    oa_tensor_desc_t t;
    if ((st = oa_program_tensor(p, &m, i, &t, diag))) return st;
  }
  for (uint32_t i = 0; i < m.instructions.count; i++) {
    oa_instr_desc_t ins;
    if ((st = oa_program_instruction(p, &m, i, &ins, diag))) return st;
    for (uint32_t o = 0; o < ins.outputs.count; o++) {
      oa_tensor_desc_t t;
      if ((st = oa_program_tensor(p, &m, (uint32_t)oa_fb_vec_i32(&ins.outputs, o), &t, diag))) return st;
      if (t.storage == OAB_STORAGE_CONSTANT)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u writes constant tensor '%s'", i, t.name);
    }
    if ((st = verify_aliasing(p, &m, i, &ins, diag))) return st;
  }
  const oa_fb_vec_t *io[2] = {&m.inputs, &m.outputs};
  for (int k = 0; k < 2; k++) {
    for (uint32_t i = 0; i < io[k]->count; i++) {
      uint32_t ti = oa_fb_vec_u32(io[k], i);
      oa_tensor_desc_t t;
      if (ti >= m.tensors.count)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s': %s %u refers to tensor %u (method has %u)",
                            m.name, k ? "output" : "input", i, ti, m.tensors.count);
      if ((st = oa_program_tensor(p, &m, ti, &t, diag))) return st;
      if (k == 0 && t.storage != OAB_STORAGE_PLANNED)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s': input %u ('%s') is not a planned tensor",
                            m.name, i, t.name);
    }
  }
  for (uint32_t i = 0; i < m.tests.count; i++) {
    oa_test_desc_t test;
    if ((st = oa_program_test(p, &m, i, &test, diag))) return st;
    const oa_fb_vec_t *vecs[2] = {&test.inputs, &test.outputs};
    const oa_fb_vec_t *sig[2] = {&m.inputs, &m.outputs};
    for (int k = 0; k < 2; k++) {
      if (vecs[k]->count != sig[k]->count)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u ('%s'): %u %s for a method with %u", i, test.name,
                            vecs[k]->count, k ? "outputs" : "inputs", sig[k]->count);
      for (uint32_t j = 0; j < vecs[k]->count; j++) {
        oa_data_desc_t d;
        oa_tensor_desc_t t;
        if ((st = oa_program_test_data(p, vecs[k], j, &d, diag)))
          return oa_diag_context(diag, st, "test %u ('%s')", i, test.name);
        if ((st = oa_program_tensor(p, &m, oa_fb_vec_u32(sig[k], j), &t, diag))) return st;
        int same = d.dtype == t.dtype && d.ndim == t.ndim;
        for (int32_t dd = 0; same && dd < t.ndim; dd++) same = d.shape[dd] == t.shape[dd];
        if (!same)
          return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u ('%s'): %s %u does not match the method's dtype/shape",
                              i, test.name, k ? "output" : "input", j);
      }
    }
  }
  return OA_OK;
}

oa_status_t oa_program_load(const void *data, size_t size, oa_program_t *out_program, oa_diag_t *diag) {
  oa_diag_clear(diag);
  if (!data || !out_program) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "program data or output is NULL");
  if ((uintptr_t)data % OA_PROGRAM_ALIGNMENT)
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "program buffer at %p is not %d-byte aligned", data,
                        OA_PROGRAM_ALIGNMENT);
  const uint8_t *b = (const uint8_t *)data;
  if (size < HEADER_BYTES)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "file is %zu bytes, too small for an .oab header (%d bytes)",
                        size, HEADER_BYTES);
  if (memcmp(b + 4, OAB_FILE_IDENTIFIER, 4) != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "not an .oab file: bytes 4..8 are not the identifier \"%s\"", OAB_FILE_IDENTIFIER);
  if (memcmp(b + 8, HEADER_MAGIC, 4) != 0)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "bad extended header magic at byte offset 8 (expected \"%s\")",
                        HEADER_MAGIC);
  uint32_t header_size = oa_rd_u32(b + 12);
  uint64_t fb_size = oa_rd_u64(b + 16), seg_base = oa_rd_u64(b + 24), seg_size = oa_rd_u64(b + 32);
  if (header_size < 32)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "extended header size %u at byte offset 12 is below 32", header_size);
  if (fb_size < HEADER_BYTES || fb_size > size)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "flatbuffer size %llu (byte offset 16) does not fit the %zu-byte file (truncated?)",
                        (unsigned long long)fb_size, size);
  if (seg_base < fb_size || seg_base % 64 || seg_base > size || seg_size > size - seg_base)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "segment data [%llu, +%llu) (byte offsets 24, 32) does not fit the %zu-byte file (truncated?)",
                        (unsigned long long)seg_base, (unsigned long long)seg_size, size);
  oa_program_t p;
  memset(&p, 0, sizeof p);
  p.data = b;
  p.size = size;
  p.flatbuffer_size = (size_t)fb_size;
  p.segment_base = (size_t)seg_base;
  p.segment_size = (size_t)seg_size;
  oa_fb_t fb = {b, p.flatbuffer_size};
  oa_fb_table_t root;
  oa_status_t st;
  uint16_t major, minor;
  if ((st = oa_fb_root(&fb, &root, diag))) return st;
  p.root = root.pos;
  if ((st = oa_fb_u16(&root, OAB_PROGRAM_FORMAT_MAJOR, 0, &major, diag))) return st;
  if ((st = oa_fb_u16(&root, OAB_PROGRAM_FORMAT_MINOR, 0, &minor, diag))) return st;
  p.format_major = major;
  p.format_minor = minor;
  if (major == 0) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "file has no format version");
  if (major > OA_FORMAT_MAJOR)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED_VERSION,
                        "file format %u.%u is newer than this runtime reads (%d.x); update the openaccel runtime",
                        major, minor, OA_FORMAT_MAJOR);
  walk_t walk = {p.flatbuffer_size, p.flatbuffer_size};
  if ((st = walk_table(&walk, &root, OAB_TABLE_PROGRAM, diag))) return st;
  oa_fb_vec_t v;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_METHODS, 4, &v, diag))) return st;
  p.method_count = v.count;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_OPERATORS, 4, &v, diag))) return st;
  p.operator_count = v.count;
  for (uint32_t i = 0; i < v.count; i++) {
    oa_fb_table_t op;
    const char *name;
    if ((st = oa_fb_vec_table(&v, i, &op, diag))) return st;
    if ((st = oa_fb_string(&op, OAB_OPERATOR_NAME, &name, diag))) return st;
    if (!*name) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "operator %u has no name", i);
  }
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_SEGMENTS, 4, &v, diag))) return st;
  p.segment_count = v.count;
  for (uint32_t i = 0; i < v.count; i++) {
    const uint8_t *d;
    uint64_t n;
    if ((st = oa_program_segment(&p, i, &d, &n, diag))) return st;
  }
  const char *s;
  if ((st = oa_fb_string(&root, OAB_PROGRAM_PRODUCER, &s, diag))) return st;
  if ((st = oa_fb_string(&root, OAB_PROGRAM_TARGET, &s, diag))) return st;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_REQUIRED_FEATURES, 4, &v, diag))) return st;
  for (uint32_t i = 0; i < v.count; i++)
    if ((st = oa_fb_vec_string(&v, i, &s, diag))) return st;
  for (uint32_t i = 0; i < p.method_count; i++)
    if ((st = verify_method(&p, i, diag))) return oa_diag_context(diag, st, "method %u", i);
  *out_program = p;
  return OA_OK;
}

static const char *root_string(const oa_program_t *p, unsigned slot) {
  oa_fb_t fb = fb_of(p);
  oa_fb_table_t root;
  const char *s = "";
  if (!p || oa_fb_table_at(&fb, p->root, &root, NULL) || oa_fb_string(&root, slot, &s, NULL)) return "";
  return s;
}

const char *oa_program_producer(const oa_program_t *program) { return root_string(program, OAB_PROGRAM_PRODUCER); }
const char *oa_program_target(const oa_program_t *program) { return root_string(program, OAB_PROGRAM_TARGET); }

const char *oa_program_operator_name(const oa_program_t *program, uint32_t index) {
  oa_fb_t fb = fb_of(program);
  oa_fb_table_t root, op;
  oa_fb_vec_t ops;
  const char *s;
  if (oa_fb_table_at(&fb, program->root, &root, NULL)) return NULL;
  if (oa_fb_vector(&root, OAB_PROGRAM_OPERATORS, 4, &ops, NULL) || index >= ops.count) return NULL;
  if (oa_fb_vec_table(&ops, index, &op, NULL) || oa_fb_string(&op, OAB_OPERATOR_NAME, &s, NULL)) return NULL;
  return s;
}

oa_status_t oa_program_find_method(const oa_program_t *program, const char *name, uint32_t *out_index) {
  for (uint32_t i = 0; i < program->method_count; i++) {
    oa_method_view_t m;
    if (oa_program_method_view(program, i, &m, NULL)) continue;
    if (strcmp(m.name, name) == 0) {
      *out_index = i;
      return OA_OK;
    }
  }
  return OA_ERR_NOT_FOUND;
}
