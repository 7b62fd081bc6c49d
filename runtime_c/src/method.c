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
  oa_stream_t *stream;       /* the device slot's stream (NULL: synchronous CPU) */
  void *scratch;             /* the slot's scratch */
  int32_t debug;
  int32_t signal;            /* event to record when done, or -1 */
  oa_fb_vec_t waits;         /* events to wait for first */
  uint8_t kind;              /* OAB_INSTRUCTION_KIND_* */
  uint8_t slot;
  /* transfers */
  oa_device_t *copy_device;  /* NULL: both sides are host memory (memmove) */
  oa_copy_kind_t copy_kind;
} oa_instr_t;

/* A constant as an accelerator sees it: wrapped (or uploaded) into its memory at prepare. */
typedef struct oa_extra {
  oa_tensor_t tensor;
  oa_device_t *device;
} oa_extra_t;

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
  oa_stream_t *slot_stream[OA_MAX_DEVICE_SLOTS];
  void *slot_scratch[OA_MAX_DEVICE_SLOTS];
  oa_event_t **events;
  oa_device_t **event_device;
  uint32_t n_events;
  struct oa_extra *extra;    /* device views of constants used by accelerator ops */
  uint32_t n_extra;
  uint8_t *pool_base[OA_MAX_POOLS];
  int pool_owned[OA_MAX_POOLS];
  uint8_t *scratch;
  size_t scratch_bytes;
  void *owned_memory; /* set by oa_method_create */
  uint64_t *profile;  /* per-instruction ns accumulators, or NULL */
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
  size_t tensors_off, instrs_off, ptrs_off, io_off, events_off, extra_off, state_bytes;
  uint32_t n_extra;
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
  out->events_off = sz;
  ok &= mul_add_size(&sz, (size_t)m->num_events * 2u, sizeof(void *));
  /* constants read by accelerator ops get a device view each */
  out->n_extra = 0;
  for (uint32_t i = 0; ok && i < m->instructions.count; i++) {
    oa_instr_desc_t ins;
    oa_status_t st = oa_program_instruction(p, m, i, &ins, diag);
    if (st) return st;
    if (ins.kind != OAB_INSTRUCTION_KIND_OP || slot_is_cpu[ins.device]) continue;
    for (uint32_t k = 0; k < ins.inputs.count; k++) {
      int32_t t = oa_fb_vec_i32(&ins.inputs, k);
      oa_tensor_desc_t d;
      if (t < 0) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)t, &d, diag))) return st;
      if (d.storage == OAB_STORAGE_CONSTANT) out->n_extra++;
    }
  }
  sz = ALIGN_UP(sz, 16);
  out->extra_off = sz;
  ok &= mul_add_size(&sz, out->n_extra, sizeof(oa_extra_t));
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
    if (ins.kind != OAB_INSTRUCTION_KIND_OP) continue;
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
  for (uint32_t s = 0; s < method->n_slots; s++)
    if (method->slot_stream[s]) (void)oa_stream_synchronize(method->slot_device[s], method->slot_stream[s]);
  for (uint32_t e = 0; method->events && e < method->n_events; e++) {
    if (method->events[e]) (void)oa_event_destroy(method->event_device[e], method->events[e]);
    method->events[e] = NULL;
  }
  for (uint32_t x = 0; x < method->n_extra; x++) {
    if (method->extra[x].tensor.data) (void)oa_device_unwrap_memory(method->extra[x].device, method->extra[x].tensor.data);
    method->extra[x].tensor.data = NULL;
  }
  method->n_extra = 0;
  for (uint32_t s = 0; s < method->n_slots; s++) {
    if (method->slot_stream[s]) (void)oa_stream_destroy(method->slot_device[s], method->slot_stream[s]);
    method->slot_stream[s] = NULL;
    if (!method->slot_is_cpu[s] && method->slot_scratch[s]) (void)oa_device_free(method->slot_device[s], method->slot_scratch[s]);
    method->slot_scratch[s] = NULL;
  }
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

/* Create event `e` on the device that records it (once). */
static oa_status_t ensure_event(oa_method_t *m, uint32_t i, int32_t e, oa_device_t *dev, oa_diag_t *diag) {
  if (e < 0) return OA_OK;
  if (m->events[e] && m->event_device[e] != dev)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: event %d is recorded by two devices", i, e);
  if (m->events[e]) return OA_OK;
  oa_status_t st = oa_event_create(dev, 0, &m->events[e]);
  if (st) return oa_diag_fail(diag, st, "instruction %u: could not create event %d (%s)", i, e, oa_status_name(st));
  m->event_device[e] = dev;
  return OA_OK;
}

/* Decide who copies a transfer's bytes and in which direction. */
static oa_status_t prepare_transfer(const oa_program_t *p, const oa_method_view_t *v, oa_method_t *m, uint32_t i,
                                    const oa_instr_desc_t *ins, oa_tensor_t *const *tps, oa_instr_t *in) {
  oa_status_t st;
  oa_tensor_desc_t src, dst;
  oa_pool_desc_t sp, dp;
  oa_diag_t *diag = NULL;
  if (!tps[0] || !tps[1]) return OA_ERR_INVALID_PROGRAM;
  if ((st = oa_program_tensor(p, v, (uint32_t)oa_fb_vec_i32(&ins->inputs, 0), &src, diag))) return st;
  if ((st = oa_program_tensor(p, v, (uint32_t)oa_fb_vec_i32(&ins->outputs, 0), &dst, diag))) return st;
  if (src.nbytes != dst.nbytes || src.storage != OAB_STORAGE_PLANNED || dst.storage != OAB_STORAGE_PLANNED)
    return OA_ERR_INVALID_PROGRAM;
  if ((st = oa_program_pool(p, v, src.pool, &sp, diag)) || (st = oa_program_pool(p, v, dst.pool, &dp, diag))) return st;
  int src_cpu = m->slot_is_cpu[sp.device], dst_cpu = m->slot_is_cpu[dp.device];
  (void)i;
  if (src_cpu && dst_cpu) {
    in->copy_device = NULL;
  } else if (src_cpu) {
    in->copy_device = m->slot_device[dp.device];
    in->copy_kind = OA_COPY_HOST_TO_DEVICE;
    in->stream = m->slot_stream[dp.device];
  } else if (dst_cpu) {
    in->copy_device = m->slot_device[sp.device];
    in->copy_kind = OA_COPY_DEVICE_TO_HOST;
    in->stream = m->slot_stream[sp.device];
  } else if (sp.device == dp.device) {
    in->copy_device = m->slot_device[sp.device];
    in->copy_kind = OA_COPY_DEVICE_TO_DEVICE;
    in->stream = m->slot_stream[sp.device];
  } else {
    return OA_ERR_UNSUPPORTED; /* accelerator to accelerator: the exporter stages through the CPU */
  }
  return OA_OK;
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
  m->events = (oa_event_t **)(void *)(base + lay.events_off);
  m->event_device = (oa_device_t **)(void *)(m->events + v->num_events);
  m->extra = (oa_extra_t *)(void *)(base + lay.extra_off);
  /* pools: CPU pools live in the caller's memory, others come from their device */
  for (uint32_t k = 0; k < m->n_pools; k++) {
    oa_pool_desc_t pool;
    if ((st = oa_program_pool(program, v, k, &pool, diag))) goto fail;
    if (lay.pool_off[k] != SIZE_MAX) {
      m->pool_base[k] = arena + lay.pool_off[k];
    } else {
      void *ptr = NULL;
      if ((st = oa_device_allocate(m->slot_device[pool.device], (size_t)pool.size, pool.alignment, &ptr))) {
        st = oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "memory pool %u: device slot %u could not allocate %llu bytes (%s)",
                          k, pool.device, (unsigned long long)pool.size, oa_status_name(st));
        goto fail;
      }
      m->pool_base[k] = (uint8_t *)ptr;
      m->pool_owned[k] = 1;
    }
  }
  /* one in-order stream per accelerator slot; the CPU runs synchronously */
  for (uint32_t sl = 0; sl < m->n_slots; sl++) {
    m->slot_scratch[sl] = sl < m->n_slots && m->slot_is_cpu[sl] ? m->scratch : NULL;
    if (m->slot_is_cpu[sl]) continue;
    if ((st = oa_stream_create(m->slot_device[sl], 0, &m->slot_stream[sl]))) {
      st = oa_diag_fail(diag, st, "device slot %u: could not create a stream (%s)", sl, oa_status_name(st));
      goto fail;
    }
  }
  for (uint32_t t = 0; t < m->n_tensors; t++)
    if ((st = fill_tensor(program, v, t, m->pool_base, &m->tensors[t], diag))) goto fail;
  for (uint32_t i = 0; i < m->n_inputs; i++) m->inputs[i] = &m->tensors[oa_fb_vec_u32(&v->inputs, i)];
  for (uint32_t i = 0; i < m->n_outputs; i++) m->outputs[i] = &m->tensors[oa_fb_vec_u32(&v->outputs, i)];
  /* inputs and outputs must be host memory: the caller writes and reads them directly */
  const oa_fb_vec_t *io[2] = {&v->inputs, &v->outputs};
  for (int k = 0; k < 2; k++) {
    for (uint32_t i = 0; i < io[k]->count; i++) {
      oa_tensor_desc_t d;
      oa_pool_desc_t pool;
      if ((st = oa_program_tensor(program, v, oa_fb_vec_u32(io[k], i), &d, diag))) goto fail;
      if (d.storage != OAB_STORAGE_PLANNED) continue;
      if ((st = oa_program_pool(program, v, d.pool, &pool, diag))) goto fail;
      if (!m->slot_is_cpu[pool.device]) {
        st = oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s %u ('%s') lives in accelerator memory; method inputs and "
                          "outputs must be in a CPU pool", k ? "output" : "input", i, d.name);
        goto fail;
      }
    }
  }
  /* events: created on the device that records them */
  m->n_events = v->num_events;
  for (uint32_t e = 0; e < m->n_events; e++) {
    m->events[e] = NULL;
    m->event_device[e] = NULL;
  }
  size_t slot_scratch_need[OA_MAX_DEVICE_SLOTS] = {0};
  for (uint32_t i = 0; i < m->n_instrs; i++) {
    oa_instr_t *in = &m->instrs[i];
    oa_instr_desc_t ins;
    oa_tensor_t *tps[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
    if ((st = oa_program_instruction(program, v, i, &ins, diag))) goto fail;
    memset(in, 0, sizeof *in);
    in->kind = ins.kind;
    in->slot = ins.device;
    in->device = m->slot_device[ins.device];
    in->stream = m->slot_stream[ins.device];
    in->debug = ins.debug;
    in->signal = ins.signal;
    in->waits = ins.waits;
    uint32_t n = ins.inputs.count + ins.outputs.count;
    for (uint32_t k = 0; k < n; k++) {
      int32_t t = k < ins.inputs.count ? oa_fb_vec_i32(&ins.inputs, k) : oa_fb_vec_i32(&ins.outputs, k - ins.inputs.count);
      tps[k] = t >= 0 ? &m->tensors[t] : NULL;
    }
    oa_tensor_t **in_ptrs = ptrs;
    oa_tensor_t **out_ptrs = ptrs + ins.inputs.count;
    ptrs += n;
    if (ins.kind == OAB_INSTRUCTION_KIND_TRANSFER) {
      if ((st = prepare_transfer(program, v, m, i, &ins, tps, in))) goto fail;
      in->call.index = i;
      in->call.op = "transfer";
      in_ptrs[0] = tps[0];
      out_ptrs[0] = tps[1];
      in->call.inputs = in_ptrs;
      in->call.n_inputs = 1;
      in->call.outputs = out_ptrs;
      in->call.n_outputs = 1;
      if (in->copy_device) in->device = in->copy_device;
      if ((st = ensure_event(m, i, ins.signal, in->device, diag))) goto fail;
      continue;
    }
    if (!m->slot_is_cpu[ins.device]) {
      /* an accelerator sees its own memory: constants get a wrapped (or uploaded) view */
      for (uint32_t k = 0; k < ins.inputs.count; k++) {
        int32_t t = oa_fb_vec_i32(&ins.inputs, k);
        oa_tensor_desc_t d;
        if (t < 0) continue;
        if ((st = oa_program_tensor(program, v, (uint32_t)t, &d, diag))) goto fail;
        if (d.storage != OAB_STORAGE_CONSTANT) continue;
        oa_extra_t *x = &m->extra[m->n_extra];
        x->tensor = m->tensors[t];
        x->device = in->device;
        x->tensor.data = NULL;
        m->n_extra++;
        if ((st = oa_device_wrap_memory(in->device, m->tensors[t].data, m->tensors[t].nbytes, &x->tensor.data))) {
          st = oa_diag_fail(diag, st, "instruction %u: device slot %u could not take constant '%s' (%zu bytes): %s", i,
                            ins.device, d.name, m->tensors[t].nbytes, oa_status_name(st));
          goto fail;
        }
        tps[k] = &x->tensor;
      }
    }
    if ((st = make_call(program, v, i, &ins, tps, in_ptrs, out_ptrs, &in->call, diag))) goto fail;
    if ((st = oa_device_prepare_op(in->device, &in->call, &in->plan, diag))) {
      instr_context(program, v, i, in->call.op, ins.debug, diag, st);
      goto fail;
    }
    if (!m->slot_is_cpu[ins.device] && in->plan.scratch_bytes > slot_scratch_need[ins.device])
      slot_scratch_need[ins.device] = in->plan.scratch_bytes;
    if ((st = ensure_event(m, i, ins.signal, in->device, diag))) goto fail;
  }
  for (uint32_t e = 0; e < m->n_events; e++) {
    if (!m->events[e]) {
      st = oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "event %u is waited for but never recorded", e);
      goto fail;
    }
  }
  for (uint32_t sl = 0; sl < m->n_slots; sl++) {
    if (m->slot_is_cpu[sl] || !slot_scratch_need[sl]) continue;
    if ((st = oa_device_allocate(m->slot_device[sl], slot_scratch_need[sl], OA_MEMORY_ALIGNMENT, &m->slot_scratch[sl]))) {
      st = oa_diag_fail(diag, st, "device slot %u could not allocate %zu bytes of scratch", sl, slot_scratch_need[sl]);
      goto fail;
    }
  }
  for (uint32_t i = 0; i < m->n_instrs; i++) m->instrs[i].scratch = m->slot_scratch[m->instrs[i].slot];
  *out_method = m;
  return OA_OK;
fail:
  oa_method_release(m);
  return st;
}

/* Before instruction `in` starts: make its device wait for the events it depends on. */
static oa_status_t wait_events(oa_method_t *m, const oa_instr_t *in) {
  for (uint32_t w = 0; w < in->waits.count; w++) {
    uint32_t e = oa_fb_vec_u32(&in->waits, w);
    oa_device_t *owner = m->event_device[e];
    oa_status_t st;
    if (in->stream && owner == in->device)
      st = oa_stream_wait_event(in->device, in->stream, m->events[e]); /* same device: queue the wait */
    else
      st = oa_event_synchronize(owner, m->events[e], OA_TIMEOUT_INFINITE); /* host waits for the producer */
    if (st) return st;
  }
  return OA_OK;
}

static oa_status_t run_transfer(const oa_instr_t *in) {
  const oa_tensor_t *src = in->call.inputs[0];
  oa_tensor_t *dst = in->call.outputs[0];
  if (!in->copy_device) {
    if (src->nbytes) memmove(dst->data, src->data, src->nbytes);
    return OA_OK;
  }
  return oa_device_copy(in->copy_device, in->stream, dst->data, src->data, src->nbytes, in->copy_kind);
}

oa_status_t oa_method_execute(oa_method_t *method, oa_diag_t *diag) {
  if (!method) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "method is NULL");
  oa_status_t st = OA_OK;
  uint64_t *profile = method->profile;
  uint64_t t_prev = profile ? oa_platform_now_ns() : 0;
  for (uint32_t i = 0; i < method->n_instrs && !st; i++) {
    oa_instr_t *in = &method->instrs[i];
    if (in->waits.count && (st = wait_events(method, in))) {
      st = oa_diag_fail(diag, st, "instruction %u: waiting for another device failed (%s)", i, oa_status_name(st));
      break;
    }
    if (in->kind == OAB_INSTRUCTION_KIND_TRANSFER) {
      if ((st = run_transfer(in)))
        oa_diag_fail(diag, st, "instruction %u: transfer of '%s' (%zu bytes) failed (%s)", i, in->call.inputs[0]->name,
                     in->call.inputs[0]->nbytes, oa_status_name(st));
    } else if ((st = oa_device_execute_op(in->device, in->stream, &in->call, &in->plan, in->scratch, diag))) {
      instr_context(method->program, &method->view, i, in->call.op, in->debug, diag, st);
    }
    if (!st && in->signal >= 0) {
      if ((st = oa_event_record(in->device, method->events[in->signal], in->stream)))
        oa_diag_fail(diag, st, "instruction %u: recording event %d failed", i, in->signal);
    }
    if (profile) {
      uint64_t t = oa_platform_now_ns();
      profile[i] += t - t_prev;
      t_prev = t;
    }
  }
  /* outputs are complete (or the first failure is known) when every stream has drained */
  for (uint32_t sl = 0; sl < method->n_slots; sl++) {
    if (!method->slot_stream[sl]) continue;
    oa_status_t sst = oa_stream_synchronize(method->slot_device[sl], method->slot_stream[sl]);
    if (sst && !st) st = oa_diag_fail(diag, sst, "device slot %u reported a failure (%s)", sl, oa_status_name(sst));
  }
  return st;
}

void oa_method_set_profile(oa_method_t *method, uint64_t *ns_per_instruction) {
  if (method) method->profile = ns_per_instruction;
}

const char *oa_method_instruction_op(const oa_method_t *method, uint32_t index) {
  if (!method || index >= method->n_instrs || !method->instrs[index].call.op) return "";
  return method->instrs[index].call.op;
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
