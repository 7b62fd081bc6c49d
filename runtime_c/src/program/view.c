/* Program phase 3, view: the accessors over a loaded program's tables (segments, methods, pools,
 * device slots, tensors, instructions, bundled tests, debug entries, the op manifest). Each checks
 * every field it reads (bounds, sizes, indices), so verify.c can call them once over the whole file
 * and the method phases (src/method/) can call them again without trusting the file. Nothing here
 * allocates. Hands the method phases typed descriptors (program_internal.h). */
#include <math.h>
#include <string.h>

#include "oab_schema.h"
#include "openaccel/program.h"
#include "program_internal.h"

#define OA_MAX_ELEMENTS ((uint64_t)1 << 50) /* per dim, per tensor, and of a tensor's non-zero dims */

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

/* Tensor.quant of tensor `index` (already read: name, dtype, shape), checked value by value. Devices
 * get pointers into the file (oa_tensor_t.quant), so the vectors must be aligned to their element
 * size (flatbuffers writers align them) and the host little-endian, as the file is. An empty
 * zero_point (format 1.2) means every zero point is 0: the descriptor's zero_point is NULL then. */
static oa_status_t read_quant(const oa_fb_table_t *t, uint32_t index, oa_tensor_desc_t *out, oa_diag_t *diag) {
  oa_fb_table_t q;
  oa_fb_vec_t scale, zp;
  bool has = false;
  int32_t axis;
  oa_status_t st;
  memset(&out->quant, 0, sizeof out->quant);
  out->quant.axis = -1;
  if ((st = oa_fb_subtable(t, OAB_TENSOR_QUANT, &q, &has, diag)) || !has) return st;
  if ((st = oa_fb_vector(&q, OAB_QUANT_PARAMS_SCALE, 4, &scale, diag))) return st;
  if ((st = oa_fb_vector(&q, OAB_QUANT_PARAMS_ZERO_POINT, 8, &zp, diag))) return st;
  if ((st = oa_fb_i32(&q, OAB_QUANT_PARAMS_AXIS, -1, &axis, diag))) return st;
  const char *dt = oa_dtype_name(out->dtype);
  if (out->dtype != OA_DTYPE_INT8 && out->dtype != OA_DTYPE_UINT8)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "tensor %u ('%s'): quant: quantization parameters on a %s tensor (int8 and uint8 only)", index,
                        out->name, dt);
  if (axis < -1 || axis >= out->ndim)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "tensor %u ('%s'): quant.axis = %d: expected -1 (per tensor) or a dim of its %d", index,
                        out->name, (int)axis, (int)out->ndim);
  int64_t want = axis < 0 ? 1 : out->shape[axis];
  const oa_fb_vec_t *vecs[2] = {&scale, &zp};
  static const char *const field_names[2] = {"scale", "zero_point"};
  for (int k = 0; k < 2; k++) {
    if (k == 1 && zp.count == 0) break; /* format 1.2: an empty zero_point means every zero point is 0 */
    if ((int64_t)vecs[k]->count != want) {
      char buf[200];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): quant.%s has %u values, expected %lld (%s%d of shape %s)", index,
                          out->name, field_names[k], vecs[k]->count, (long long)want,
                          axis < 0 ? "one per tensor: axis " : "dim ", (int)axis,
                          shape_str(out->shape, out->ndim, buf, sizeof buf));
    }
    if ((uintptr_t)(vecs[k]->fb.buf + vecs[k]->pos) % vecs[k]->elem_size)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "tensor %u ('%s'): quant.%s is not %u-byte aligned in the file",
                          index, out->name, field_names[k], vecs[k]->elem_size);
  }
  const uint16_t one = 1;
  if (*(const uint8_t *)&one != 1)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "tensor %u ('%s'): quant: quantization parameters need a "
                        "little-endian host", index, out->name);
  for (uint32_t i = 0; i < scale.count; i++) {
    float s = oa_fb_vec_f32(&scale, i);
    if (!(s > 0.0f) || !isfinite(s))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): quant.scale[%u] = %g: expected a finite number > 0", index, out->name, i,
                          (double)s);
  }
  int64_t lo = out->dtype == OA_DTYPE_INT8 ? -128 : 0, hi = out->dtype == OA_DTYPE_INT8 ? 127 : 255;
  for (uint32_t i = 0; i < zp.count; i++) {
    int64_t z = oa_fb_vec_i64(&zp, i);
    if (z < lo || z > hi)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "tensor %u ('%s'): quant.zero_point[%u] = %lld: expected %lld to %lld (%s)", index, out->name,
                          i, (long long)z, (long long)lo, (long long)hi, dt);
  }
  out->quant.scale = (const float *)(const void *)(scale.fb.buf + scale.pos);
  /* NULL: all zero, not stored; the method points it at zeros of its own (oa_method_fill_tensor) */
  out->quant.zero_point = zp.count ? (const int64_t *)(const void *)(zp.fb.buf + zp.pos) : NULL;
  out->quant.axis = axis;
  out->quant.count = scale.count;
  return OA_OK;
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
  if ((st = read_quant(&t, index, out, diag))) return st;
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
