/* Preparing and executing methods: bind device slots, lay out state + pools + scratch in the
 * caller's memory, resolve every instruction to a kernel once, then run a loop of calls. */
#include <string.h>

#include "oab_schema.h"
#include "openaccel/method.h"
#include "openaccel/openaccel.h"
#include "openaccel/platform.h"
#include "program_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the executor reads integer and float arguments in place and needs a little-endian CPU"
#endif

typedef struct oa_instr {
  oa_op_call_t call;
  oa_op_plan_t plan;
  oa_device_t *device;
  int32_t debug;
} oa_instr_t;

struct oa_method {
  const oa_program_t *program;
  oa_method_view_t view;
  uint32_t n_tensors, n_instrs, n_inputs, n_outputs, n_tests, n_slots, n_pools;
  oa_tensor_t *tensors;
  oa_instr_t *instrs;
  oa_tensor_t **inputs;
  oa_tensor_t **outputs;
  oa_device_t *slot_device[OA_MAX_DEVICE_SLOTS];
  int slot_is_cpu[OA_MAX_DEVICE_SLOTS];
  uint8_t *pool_base[OA_MAX_POOLS];
  int pool_owned[OA_MAX_POOLS];
  uint8_t *scratch;
  size_t scratch_bytes;
  void *owned_memory; /* set by oa_method_create */
};

#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~(size_t)((a)-1))

static int add_size(size_t *acc, size_t n) {
  if (*acc > SIZE_MAX - n) return 0;
  *acc += n;
  return 1;
}

static int mul_add_size(size_t *acc, size_t count, size_t elem) {
  if (elem && count > SIZE_MAX / elem) return 0;
  return add_size(acc, count * elem);
}

typedef struct layout {
  size_t tensors_off, instrs_off, ptrs_off, io_off, state_bytes;
  size_t pool_off[OA_MAX_POOLS];
  size_t arena_bytes;
} layout_t;

/* Describe where instruction `i` came from, for error messages. */
static void instr_context(const oa_program_t *p, const oa_method_view_t *m, uint32_t i, const char *op,
                          int32_t debug, oa_diag_t *diag, oa_status_t st) {
  const char *file, *code;
  uint32_t line;
  oa_program_debug(p, m, debug, &file, &line, &code);
  if (*file)
    oa_diag_context(diag, st, "instruction %u (%s, from %s:%u `%s`)", i, op, file, line, code);
  else
    oa_diag_context(diag, st, "instruction %u (%s)", i, op);
}

/* Bind each device slot of the file to a device of the config, by kind name and ordinal. */
static oa_status_t bind_devices(const oa_method_view_t *m, const oa_program_t *p, const oa_method_config_t *cfg,
                                oa_device_t **out_devs, int *out_is_cpu, oa_diag_t *diag) {
  for (uint32_t s = 0; s < m->devices.count; s++) {
    const char *kind;
    uint32_t ordinal, seen = 0;
    oa_status_t st = oa_program_device_slot(p, m, s, &kind, &ordinal, diag);
    if (st) return st;
    out_devs[s] = NULL;
    char available[160];
    size_t n = 0;
    available[0] = '\0';
    for (uint32_t d = 0; cfg && d < cfg->n_devices; d++) {
      oa_device_properties_t props;
      if (!cfg->devices[d] || oa_device_get_properties(cfg->devices[d], &props)) continue;
      n += oa_format(available + n, sizeof available - n, n ? ", %s" : "%s", props.kind_name);
      if (strcmp(props.kind_name, kind) == 0 && seen++ == ordinal) {
        out_devs[s] = cfg->devices[d];
        out_is_cpu[s] = props.kind == OA_DEVICE_KIND_CPU;
        break;
      }
    }
    if (!out_devs[s])
      return oa_diag_fail(diag, OA_ERR_NOT_FOUND,
                          "the file places ops on device '%s' #%u, but no such device was given (available: %s)",
                          kind, ordinal, n ? available : "none");
  }
  return OA_OK;
}

static oa_status_t compute_layout(const oa_program_t *p, const oa_method_view_t *m, const int *slot_is_cpu,
                                  layout_t *out, oa_diag_t *diag) {
  size_t sz = ALIGN_UP(sizeof(struct oa_method), 16);
  int ok = 1;
  out->tensors_off = sz;
  ok &= mul_add_size(&sz, m->tensors.count, sizeof(oa_tensor_t));
  sz = ALIGN_UP(sz, 16);
  out->instrs_off = sz;
  ok &= mul_add_size(&sz, m->instructions.count, sizeof(oa_instr_t));
  out->ptrs_off = sz;
  for (uint32_t i = 0; ok && i < m->instructions.count; i++) {
    oa_instr_desc_t ins;
    oa_status_t st = oa_program_instruction(p, m, i, &ins, diag);
    if (st) return st;
    ok &= mul_add_size(&sz, (size_t)ins.inputs.count + ins.outputs.count, sizeof(oa_tensor_t *));
  }
  out->io_off = sz;
  ok &= mul_add_size(&sz, (size_t)m->inputs.count + m->outputs.count, sizeof(oa_tensor_t *));
  out->state_bytes = ALIGN_UP(sz, OA_MEMORY_ALIGNMENT);
  size_t arena = 0;
  for (uint32_t k = 0; ok && k < m->pools.count; k++) {
    oa_pool_desc_t pool;
    oa_status_t st = oa_program_pool(p, m, k, &pool, diag);
    if (st) return st;
    out->pool_off[k] = SIZE_MAX;
    if (!slot_is_cpu[pool.device]) continue;
    arena = ALIGN_UP(arena, pool.alignment > OA_MEMORY_ALIGNMENT ? pool.alignment : OA_MEMORY_ALIGNMENT);
    out->pool_off[k] = arena;
    ok &= add_size(&arena, (size_t)pool.size);
  }
  out->arena_bytes = ALIGN_UP(arena, OA_MEMORY_ALIGNMENT);
  if (!ok || out->state_bytes < sz)
    return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "method '%s' needs more memory than this platform can address",
                        m->name);
  return OA_OK;
}

/* Fill a tensor descriptor; `pool_base` may be NULL (metadata only, data stays NULL). */
static oa_status_t fill_tensor(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                               uint8_t *const *pool_base, oa_tensor_t *out, oa_diag_t *diag) {
  oa_tensor_desc_t d;
  oa_status_t st = oa_program_tensor(p, m, index, &d, diag);
  if (st) return st;
  if (!d.contiguous)
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "tensor %u ('%s') uses a non-default dim order", index, d.name);
  memset(out, 0, sizeof *out);
  memcpy(out->shape, d.shape, sizeof out->shape);
  out->ndim = d.ndim;
  out->dtype = d.dtype;
  out->numel = d.numel;
  out->nbytes = (size_t)d.nbytes;
  out->name = d.name;
  if (d.storage == OAB_STORAGE_CONSTANT) {
    const uint8_t *seg;
    uint64_t seg_size;
    if ((st = oa_program_segment(p, d.segment, &seg, &seg_size, diag))) return st;
    out->data = (void *)(uintptr_t)(seg + d.offset); /* read-only: outputs never point here */
  } else if (pool_base && pool_base[d.pool]) {
    out->data = pool_base[d.pool] + d.offset;
  }
  return OA_OK;
}

/* Build the op call of instruction `i` over caller-provided tensor storage. */
static oa_status_t make_call(const oa_program_t *p, const oa_method_view_t *m, uint32_t i, oa_instr_desc_t *ins,
                             oa_tensor_t *const *tensor_ptrs, oa_tensor_t **in_ptrs, oa_tensor_t **out_ptrs,
                             oa_op_call_t *call, oa_diag_t *diag) {
  oa_status_t st = oa_program_instruction(p, m, i, ins, diag);
  if (st) return st;
  if ((ins->ints.count && ins->ints.pos % 8) || (ins->floats.count && ins->floats.pos % 8))
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: argument vectors are not 8-byte aligned", i);
  memset(call, 0, sizeof *call);
  call->op = oa_program_operator_name(p, ins->op);
  if (!call->op) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: bad operator %u", i, ins->op);
  call->index = i;
  for (uint32_t k = 0; k < ins->inputs.count; k++) {
    int32_t t = oa_fb_vec_i32(&ins->inputs, k);
    in_ptrs[k] = t < 0 ? NULL : tensor_ptrs[k];
  }
  for (uint32_t k = 0; k < ins->outputs.count; k++) out_ptrs[k] = tensor_ptrs[ins->inputs.count + k];
  call->inputs = in_ptrs;
  call->n_inputs = ins->inputs.count;
  call->outputs = out_ptrs;
  call->n_outputs = ins->outputs.count;
  call->ints = ins->ints.count ? (const int64_t *)(const void *)(ins->ints.fb.buf + ins->ints.pos) : NULL;
  call->n_ints = ins->ints.count;
  call->floats = ins->floats.count ? (const double *)(const void *)(ins->floats.fb.buf + ins->floats.pos) : NULL;
  call->n_floats = ins->floats.count;
  return OA_OK;
}

oa_status_t oa_method_requirements(const oa_program_t *program, uint32_t method_index,
                                   const oa_method_config_t *config, oa_memory_requirements_t *out_requirements,
                                   oa_diag_t *diag) {
  oa_method_view_t m;
  oa_device_t *devs[OA_MAX_DEVICE_SLOTS];
  int is_cpu[OA_MAX_DEVICE_SLOTS] = {0};
  layout_t lay;
  oa_status_t st;
  oa_diag_clear(diag);
  if (!program || !out_requirements) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL argument");
  if ((st = oa_program_method_view(program, method_index, &m, diag))) return st;
  if ((st = bind_devices(&m, program, config, devs, is_cpu, diag))) return st;
  if ((st = compute_layout(program, &m, is_cpu, &lay, diag))) return st;
  /* dry-run every instruction's prepare on metadata-only tensors to learn the scratch needs */
  oa_tensor_t tensors[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
  oa_tensor_t *ptrs[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
  oa_tensor_t *in_ptrs[OA_MAX_OP_INPUTS], *out_ptrs[OA_MAX_OP_OUTPUTS];
  size_t scratch = 0;
  for (uint32_t i = 0; i < m.instructions.count; i++) {
    oa_instr_desc_t ins;
    oa_op_call_t call;
    oa_op_plan_t plan;
    if ((st = oa_program_instruction(program, &m, i, &ins, diag))) return st;
    uint32_t n = ins.inputs.count + ins.outputs.count;
    for (uint32_t k = 0; k < n; k++) {
      int32_t t = k < ins.inputs.count ? oa_fb_vec_i32(&ins.inputs, k) : oa_fb_vec_i32(&ins.outputs, k - ins.inputs.count);
      ptrs[k] = &tensors[k];
      if (t >= 0 && (st = fill_tensor(program, &m, (uint32_t)t, NULL, &tensors[k], diag))) return st;
    }
    if ((st = make_call(program, &m, i, &ins, ptrs, in_ptrs, out_ptrs, &call, diag))) return st;
    if ((st = oa_device_prepare_op(devs[ins.device], &call, &plan, diag))) {
      instr_context(program, &m, i, call.op, ins.debug, diag, st);
      return st;
    }
    if (is_cpu[ins.device] && plan.scratch_bytes > scratch) scratch = plan.scratch_bytes;
  }
  scratch = ALIGN_UP(scratch, OA_MEMORY_ALIGNMENT);
  out_requirements->state_bytes = lay.state_bytes;
  out_requirements->arena_bytes = lay.arena_bytes;
  out_requirements->scratch_bytes = scratch;
  size_t total = lay.state_bytes;
  if (!add_size(&total, lay.arena_bytes) || !add_size(&total, scratch))
    return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "method needs more memory than this platform can address");
  out_requirements->total_bytes = total;
  return OA_OK;
}

void oa_method_release(oa_method_t *method) {
  if (!method) return;
  for (uint32_t k = 0; k < method->n_pools; k++) {
    if (method->pool_owned[k] && method->pool_base[k]) {
      oa_pool_desc_t pool;
      if (!oa_program_pool(method->program, &method->view, k, &pool, NULL)) {
        oa_device_t *dev = method->slot_device[pool.device];
        if (dev && dev->vtable->free) dev->vtable->free(dev, method->pool_base[k]);
      }
      method->pool_base[k] = NULL;
      method->pool_owned[k] = 0;
    }
  }
}

oa_status_t oa_method_prepare(const oa_program_t *program, uint32_t method_index, const oa_method_config_t *config,
                              void *memory, size_t memory_size, oa_method_t **out_method, oa_diag_t *diag) {
  oa_memory_requirements_t req;
  oa_status_t st;
  if (!memory || !out_method) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL memory or output");
  if ((uintptr_t)memory % OA_MEMORY_ALIGNMENT)
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "method memory at %p is not %d-byte aligned", memory,
                        OA_MEMORY_ALIGNMENT);
  if ((st = oa_method_requirements(program, method_index, config, &req, diag))) return st;
  if (memory_size < req.total_bytes)
    return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY,
                        "method memory is %zu bytes; this method needs %zu (state %zu + arena %zu + scratch %zu)",
                        memory_size, req.total_bytes, req.state_bytes, req.arena_bytes, req.scratch_bytes);
  uint8_t *base = (uint8_t *)memory;
  oa_method_t *m = (oa_method_t *)memory;
  memset(m, 0, sizeof *m);
  m->program = program;
  if ((st = oa_program_method_view(program, method_index, &m->view, diag))) return st;
  const oa_method_view_t *v = &m->view;
  if ((st = bind_devices(v, program, config, m->slot_device, m->slot_is_cpu, diag))) return st;
  layout_t lay;
  if ((st = compute_layout(program, v, m->slot_is_cpu, &lay, diag))) return st;
  m->n_tensors = v->tensors.count;
  m->n_instrs = v->instructions.count;
  m->n_inputs = v->inputs.count;
  m->n_outputs = v->outputs.count;
  m->n_tests = v->tests.count;
  m->n_slots = v->devices.count;
  m->n_pools = v->pools.count;
  m->tensors = (oa_tensor_t *)(void *)(base + lay.tensors_off);
  m->instrs = (oa_instr_t *)(void *)(base + lay.instrs_off);
  oa_tensor_t **ptrs = (oa_tensor_t **)(void *)(base + lay.ptrs_off);
  m->inputs = (oa_tensor_t **)(void *)(base + lay.io_off);
  m->outputs = m->inputs + m->n_inputs;
  uint8_t *arena = base + lay.state_bytes;
  m->scratch = arena + req.arena_bytes;
  m->scratch_bytes = req.scratch_bytes;
  /* pools: CPU pools live in the caller's memory, others come from their device */
  for (uint32_t k = 0; k < m->n_pools; k++) {
    oa_pool_desc_t pool;
    if ((st = oa_program_pool(program, v, k, &pool, diag))) goto fail;
    if (lay.pool_off[k] != SIZE_MAX) {
      m->pool_base[k] = arena + lay.pool_off[k];
    } else {
      oa_device_t *dev = m->slot_device[pool.device];
      void *ptr = NULL;
      if (!dev->vtable->allocate || (st = dev->vtable->allocate(dev, (size_t)pool.size, pool.alignment, &ptr))) {
        st = oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "memory pool %u: device slot %u could not allocate %llu bytes", k,
                          pool.device, (unsigned long long)pool.size);
        goto fail;
      }
      m->pool_base[k] = (uint8_t *)ptr;
      m->pool_owned[k] = 1;
    }
  }
  for (uint32_t t = 0; t < m->n_tensors; t++)
    if ((st = fill_tensor(program, v, t, m->pool_base, &m->tensors[t], diag))) goto fail;
  for (uint32_t i = 0; i < m->n_inputs; i++) m->inputs[i] = &m->tensors[oa_fb_vec_u32(&v->inputs, i)];
  for (uint32_t i = 0; i < m->n_outputs; i++) m->outputs[i] = &m->tensors[oa_fb_vec_u32(&v->outputs, i)];
  for (uint32_t i = 0; i < m->n_instrs; i++) {
    oa_instr_t *in = &m->instrs[i];
    oa_instr_desc_t ins;
    oa_tensor_t *tps[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
    if ((st = oa_program_instruction(program, v, i, &ins, diag))) goto fail;
    uint32_t n = ins.inputs.count + ins.outputs.count;
    for (uint32_t k = 0; k < n; k++) {
      int32_t t = k < ins.inputs.count ? oa_fb_vec_i32(&ins.inputs, k) : oa_fb_vec_i32(&ins.outputs, k - ins.inputs.count);
      tps[k] = t >= 0 ? &m->tensors[t] : NULL;
    }
    oa_tensor_t **in_ptrs = ptrs;
    oa_tensor_t **out_ptrs = ptrs + ins.inputs.count;
    ptrs += n;
    if ((st = make_call(program, v, i, &ins, tps, in_ptrs, out_ptrs, &in->call, diag))) goto fail;
    in->device = m->slot_device[ins.device];
    in->debug = ins.debug;
    if ((st = oa_device_prepare_op(in->device, &in->call, &in->plan, diag))) {
      instr_context(program, v, i, in->call.op, ins.debug, diag, st);
      goto fail;
    }
  }
  *out_method = m;
  return OA_OK;
fail:
  oa_method_release(m);
  return st;
}

oa_status_t oa_method_execute(oa_method_t *method, oa_diag_t *diag) {
  if (!method) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "method is NULL");
  for (uint32_t i = 0; i < method->n_instrs; i++) {
    oa_instr_t *in = &method->instrs[i];
    oa_status_t st = oa_device_execute_op(in->device, NULL, &in->call, &in->plan, method->scratch, diag);
    if (st) {
      instr_context(method->program, &method->view, i, in->call.op, in->debug, diag, st);
      return st;
    }
  }
  return OA_OK;
}

uint32_t oa_method_input_count(const oa_method_t *method) { return method ? method->n_inputs : 0; }
uint32_t oa_method_output_count(const oa_method_t *method) { return method ? method->n_outputs : 0; }
uint32_t oa_method_instruction_count(const oa_method_t *method) { return method ? method->n_instrs : 0; }
uint32_t oa_method_test_count(const oa_method_t *method) { return method ? method->n_tests : 0; }

oa_status_t oa_method_input(oa_method_t *method, uint32_t index, oa_tensor_t **out_tensor) {
  if (!method || !out_tensor || index >= method->n_inputs) return OA_ERR_INVALID_ARGUMENT;
  *out_tensor = method->inputs[index];
  return OA_OK;
}

oa_status_t oa_method_output(const oa_method_t *method, uint32_t index, const oa_tensor_t **out_tensor) {
  if (!method || !out_tensor || index >= method->n_outputs) return OA_ERR_INVALID_ARGUMENT;
  *out_tensor = method->outputs[index];
  return OA_OK;
}

static void shape_text(const int64_t *shape, int32_t ndim, char *buf, size_t size) {
  size_t n = oa_format(buf, size, "[");
  for (int32_t d = 0; d < ndim && n + 1 < size; d++) n += oa_format(buf + n, size - n, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (n + 1 < size) oa_format(buf + n, size - n, "]");
}

oa_status_t oa_method_set_input(oa_method_t *method, uint32_t index, const oa_tensor_t *src, oa_diag_t *diag) {
  if (!method || !src) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL method or source tensor");
  if (index >= method->n_inputs)
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "input index %u out of range: the method takes %u inputs", index,
                        method->n_inputs);
  oa_tensor_t *dst = method->inputs[index];
  int same = src->ndim == dst->ndim;
  for (int32_t d = 0; same && d < dst->ndim; d++) same = src->shape[d] == dst->shape[d];
  if (src->dtype != dst->dtype || !same) {
    char want[128], got[128];
    shape_text(dst->shape, dst->ndim, want, sizeof want);
    shape_text(src->shape, src->ndim, got, sizeof got);
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "input %u ('%s'): expected %s %s, received %s %s", index,
                        dst->name, oa_dtype_name(dst->dtype), want, oa_dtype_name(src->dtype), got);
  }
  if (dst->nbytes && !src->data) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "input %u: data is NULL", index);
  if (dst->nbytes) memmove(dst->data, src->data, dst->nbytes);
  return OA_OK;
}

/* Compare one output with its expected bytes; accumulates into `r`. */
static void compare(const oa_tensor_t *got, const uint8_t *want, uint32_t output, oa_test_result_t *r) {
  int floating = got->dtype == OA_DTYPE_FLOAT32 || got->dtype == OA_DTYPE_FLOAT64;
  for (int64_t i = 0; i < got->numel; i++) {
    double a, b;
    if (got->dtype == OA_DTYPE_FLOAT32) {
      float fa, fb;
      memcpy(&fa, (const uint8_t *)got->data + i * 4, 4);
      memcpy(&fb, want + i * 4, 4);
      a = fa;
      b = fb;
    } else if (got->dtype == OA_DTYPE_FLOAT64) {
      memcpy(&a, (const uint8_t *)got->data + i * 8, 8);
      memcpy(&b, want + i * 8, 8);
    } else {
      size_t es = oa_dtype_size(got->dtype);
      int64_t ia = 0, ib = 0;
      if (got->dtype == OA_DTYPE_BOOL || got->dtype == OA_DTYPE_UINT8) {
        ia = ((const uint8_t *)got->data)[i];
        ib = want[i];
      } else if (es == 1) {
        ia = ((const int8_t *)got->data)[i];
        ib = (int8_t)want[i];
      } else if (es == 2) {
        int16_t x, y;
        memcpy(&x, (const uint8_t *)got->data + i * 2, 2);
        memcpy(&y, want + i * 2, 2);
        ia = x;
        ib = y;
      } else if (es == 4) {
        int32_t x, y;
        memcpy(&x, (const uint8_t *)got->data + i * 4, 4);
        memcpy(&y, want + i * 4, 4);
        ia = x;
        ib = y;
      } else {
        memcpy(&ia, (const uint8_t *)got->data + i * 8, 8);
        memcpy(&ib, want + i * 8, 8);
      }
      a = (double)ia;
      b = (double)ib;
      if (ia != ib) {
        if (r->first_mismatch < 0) r->first_mismatch = i;
        r->mismatches++;
        double d = a > b ? a - b : b - a;
        if (d > r->max_abs_error) {
          r->max_abs_error = d;
          r->worst_output = output;
        }
      }
      continue;
    }
    (void)floating;
    int a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) {
      if (!(a_nan && b_nan)) {
        if (r->first_mismatch < 0) r->first_mismatch = i;
        r->mismatches++;
        r->max_abs_error = 1.0 / 0.0;
        r->worst_output = output;
      }
      continue;
    }
    if (a == b) continue; /* covers equal infinities */
    double d = a > b ? a - b : b - a;
    double mag = b < 0 ? -b : b;
    if (d > r->max_abs_error) {
      r->max_abs_error = d;
      r->worst_output = output;
    }
    if (mag > 0 && d / mag > r->max_rel_error) r->max_rel_error = d / mag;
    if (!(d <= r->atol + r->rtol * mag)) {
      if (r->first_mismatch < 0) r->first_mismatch = i;
      r->mismatches++;
    }
  }
}

oa_status_t oa_method_run_test(oa_method_t *method, uint32_t index, oa_test_result_t *out_result, oa_diag_t *diag) {
  oa_test_desc_t t;
  oa_status_t st;
  if (!method || !out_result) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL argument");
  if (index >= method->n_tests)
    return oa_diag_fail(diag, OA_ERR_NOT_FOUND, "test %u out of range (file has %u)", index, method->n_tests);
  if ((st = oa_program_test(method->program, &method->view, index, &t, diag))) return st;
  for (uint32_t i = 0; i < method->n_inputs; i++) {
    oa_data_desc_t d;
    if ((st = oa_program_test_data(method->program, &t.inputs, i, &d, diag))) return st;
    if (d.nbytes != method->inputs[i]->nbytes)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u input %u has %llu bytes, expected %zu", index, i,
                          (unsigned long long)d.nbytes, method->inputs[i]->nbytes);
    if (d.nbytes) memcpy(method->inputs[i]->data, d.data, (size_t)d.nbytes);
  }
  oa_test_result_t r;
  memset(&r, 0, sizeof r);
  r.name = t.name;
  r.atol = t.atol;
  r.rtol = t.rtol;
  r.first_mismatch = -1;
  uint64_t t0 = oa_platform_now_ns();
  if ((st = oa_method_execute(method, diag))) return st;
  r.elapsed_ns = oa_platform_now_ns() - t0;
  for (uint32_t o = 0; o < method->n_outputs; o++) {
    oa_data_desc_t d;
    if ((st = oa_program_test_data(method->program, &t.outputs, o, &d, diag))) return st;
    if (d.nbytes != method->outputs[o]->nbytes)
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u output %u has %llu bytes, expected %zu", index, o,
                          (unsigned long long)d.nbytes, method->outputs[o]->nbytes);
    int64_t before = r.mismatches;
    compare(method->outputs[o], d.data, o, &r);
    if (r.mismatches > before && before == 0) r.worst_output = o;
  }
  r.passed = r.mismatches == 0;
  *out_result = r;
  return OA_OK;
}

/* ---- convenience API (hosted builds) ------------------------------------------------------ */

oa_status_t oa_method_create(const oa_program_t *program, uint32_t method_index, const oa_method_config_t *config,
                             oa_method_t **out_method, oa_diag_t *diag) {
  oa_memory_requirements_t req;
  oa_status_t st = oa_method_requirements(program, method_index, config, &req, diag);
  if (st) return st;
  void *mem = oa_platform_alloc(req.total_bytes, OA_MEMORY_ALIGNMENT);
  if (!mem) return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "could not allocate %zu bytes for the method", req.total_bytes);
  oa_method_t *m;
  if ((st = oa_method_prepare(program, method_index, config, mem, req.total_bytes, &m, diag))) {
    oa_platform_free(mem);
    return st;
  }
  m->owned_memory = mem;
  *out_method = m;
  return OA_OK;
}

void oa_method_destroy(oa_method_t *method) {
  if (!method) return;
  void *mem = method->owned_memory;
  oa_method_release(method);
  oa_platform_free(mem);
}

const char *oa_version(void) { return OA_VERSION_STRING; }
