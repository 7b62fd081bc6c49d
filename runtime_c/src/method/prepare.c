/* Method phase prepare: one instruction at a time, its kernel on its device (oa_device_prepare_op:
 * the plan and the scratch it needs), who copies a transfer's bytes, the events it records; and the
 * three entry points that run the phases in order (view -> bind -> layout -> place -> prepare each
 * instruction -> scratch):
 *
 *   oa_method_requirements  without memory: the instructions are prepared over metadata-only tensors
 *                           (a dry run) to learn the scratch; nothing is kept (there is nowhere to
 *                           keep it: sizing the memory is what the call is for).
 *   oa_method_prepare       with the caller's memory: bind, layout and every instruction's prepare
 *                           run once, and the plans are kept in the method for execute. Scratch is
 *                           the largest CPU plan's, known once the last instruction is prepared, so
 *                           the buffer is checked against state + arena before anything is written
 *                           and against the total at the end.
 *   oa_method_create        requirements, then prepare in a buffer of that size: the public API
 *                           sizes the buffer before it exists, so the instructions are prepared
 *                           twice (the dry run, then the one prepare keeps); bind and layout are
 *                           cheap walks of the verified tables.
 *
 * Hands execute.c a method whose every instruction holds its call, plan, stream, scratch, waits and
 * signal. */
#include "method_internal.h"

/* Describe where instruction `i` came from, for error messages. */
void oa_method_instr_context(const oa_program_t *p, const oa_method_view_t *m, uint32_t i, const char *op,
                             int32_t debug, oa_diag_t *diag, oa_status_t st) {
  const char *file, *code;
  uint32_t line;
  oa_program_debug(p, m, debug, &file, &line, &code);
  if (*file)
    oa_diag_context(diag, st, "instruction %u (%s, from %s:%u `%s`)", i, op, file, line, code);
  else
    oa_diag_context(diag, st, "instruction %u (%s)", i, op);
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

/* The tensors of instruction `ins` (inputs, then outputs) as metadata-only descriptors in `tensors`
 * (constants point at their segment, planned tensors have no data), for the dry run. */
static oa_status_t dry_tensors(const oa_program_t *p, const oa_method_view_t *m, const oa_instr_desc_t *ins,
                               const int64_t *zeros, oa_tensor_t *tensors, oa_tensor_t **ptrs, oa_diag_t *diag) {
  uint32_t n = ins->inputs.count + ins->outputs.count;
  for (uint32_t k = 0; k < n; k++) {
    int32_t t = k < ins->inputs.count ? oa_fb_vec_i32(&ins->inputs, k) : oa_fb_vec_i32(&ins->outputs, k - ins->inputs.count);
    ptrs[k] = &tensors[k];
    oa_status_t st;
    if (t >= 0 && (st = oa_method_fill_tensor(p, m, (uint32_t)t, NULL, zeros, &tensors[k], diag))) return st;
  }
  return OA_OK;
}

/* Zero points for the dry run's tensors whose file stores none (oa_tensor_t.quant promises `count`
 * values): up to this many from a constant; more (a wide per-channel layer) from a temporary block. */
#define DRY_ZEROS 256
static const int64_t k_dry_zeros[DRY_ZEROS];

static oa_status_t requirements(const oa_program_t *program, const oa_method_view_t *mv, oa_device_t *const *devs,
                                const int *is_cpu, const layout_t *lay, const int64_t *zeros,
                                oa_memory_requirements_t *out_requirements, oa_diag_t *diag);

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
  if ((st = oa_method_bind(program, &m, config, devs, is_cpu, diag))) return st;
  if ((st = oa_method_layout(program, &m, is_cpu, &lay, diag))) return st;
  if (lay.n_zeros <= DRY_ZEROS) return requirements(program, &m, devs, is_cpu, &lay, k_dry_zeros, out_requirements, diag);
  int64_t *zeros = (int64_t *)oa_platform_alloc((size_t)lay.n_zeros * sizeof(int64_t), 64);
  if (!zeros)
    return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "could not allocate %zu bytes of zero points for the dry run",
                        (size_t)lay.n_zeros * sizeof(int64_t));
  memset(zeros, 0, (size_t)lay.n_zeros * sizeof(int64_t));
  st = requirements(program, &m, devs, is_cpu, &lay, zeros, out_requirements, diag);
  oa_platform_free(zeros);
  return st;
}

static oa_status_t requirements(const oa_program_t *program, const oa_method_view_t *mv, oa_device_t *const *devs,
                                const int *is_cpu, const layout_t *lay, const int64_t *zeros,
                                oa_memory_requirements_t *out_requirements, oa_diag_t *diag) {
  oa_status_t st;
  /* dry-run every instruction's prepare on metadata-only tensors to learn the scratch needs */
  oa_tensor_t tensors[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
  oa_tensor_t *ptrs[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
  oa_tensor_t *in_ptrs[OA_MAX_OP_INPUTS], *out_ptrs[OA_MAX_OP_OUTPUTS];
  size_t scratch = 0;
  for (uint32_t i = 0; i < mv->instructions.count; i++) {
    oa_instr_desc_t ins;
    oa_op_call_t call;
    oa_op_plan_t plan;
    if ((st = oa_program_instruction(program, mv, i, &ins, diag))) return st;
    if (ins.kind != OAB_INSTRUCTION_KIND_OP) continue;
    if ((st = dry_tensors(program, mv, &ins, zeros, tensors, ptrs, diag))) return st;
    if ((st = make_call(program, mv, i, &ins, ptrs, in_ptrs, out_ptrs, &call, diag))) return st;
    if ((st = oa_device_prepare_op(devs[ins.device], &call, &plan, diag))) {
      oa_method_instr_context(program, mv, i, call.op, ins.debug, diag, st);
      return st;
    }
    if (is_cpu[ins.device] && plan.scratch_bytes > scratch) scratch = plan.scratch_bytes;
  }
  scratch = ALIGN_UP(scratch, OA_MEMORY_ALIGNMENT);
  out_requirements->state_bytes = lay->state_bytes;
  out_requirements->arena_bytes = lay->arena_bytes;
  out_requirements->scratch_bytes = scratch;
  size_t total = lay->state_bytes;
  if (!add_size(&total, lay->arena_bytes) || !add_size(&total, scratch))
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
                                    const oa_instr_desc_t *ins, oa_tensor_t *const *tps, oa_instr_t *in,
                                    oa_diag_t *diag) {
  oa_status_t st;
  oa_tensor_desc_t src, dst;
  oa_pool_desc_t sp, dp;
  if (!tps[0] || !tps[1]) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u: a transfer without a source tensor", i);
  if ((st = oa_program_tensor(p, v, (uint32_t)oa_fb_vec_i32(&ins->inputs, 0), &src, diag))) return st;
  if ((st = oa_program_tensor(p, v, (uint32_t)oa_fb_vec_i32(&ins->outputs, 0), &dst, diag))) return st;
  if (src.nbytes != dst.nbytes || src.storage != OAB_STORAGE_PLANNED || dst.storage != OAB_STORAGE_PLANNED)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "instruction %u: a transfer copies between two planned tensors of one size ('%s', %llu bytes "
                        "-> '%s', %llu bytes)", i, src.name, (unsigned long long)src.nbytes, dst.name,
                        (unsigned long long)dst.nbytes);
  if ((st = oa_program_pool(p, v, src.pool, &sp, diag)) || (st = oa_program_pool(p, v, dst.pool, &dp, diag))) return st;
  int src_cpu = m->slot_is_cpu[sp.device], dst_cpu = m->slot_is_cpu[dp.device];
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
    /* accelerator to accelerator: the exporter stages through the CPU */
    return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "instruction %u: transfer between two accelerators (device slots %u "
                        "and %u); stage it through the CPU", i, sp.device, dp.device);
  }
  return OA_OK;
}

/* Prepare instruction `i` of `m` (whose tensors are placed): its call over the method's tensors
 * (accelerator ops see device views of constants), the kernel plan, the transfer direction, the
 * event it records. Takes its argument pointers from *cursor and advances it. */
static oa_status_t prepare_instruction(oa_method_t *m, uint32_t i, oa_tensor_t ***cursor, oa_diag_t *diag) {
  const oa_program_t *program = m->program;
  const oa_method_view_t *v = &m->view;
  oa_instr_t *in = &m->instrs[i];
  oa_instr_desc_t ins;
  oa_tensor_t *tps[OA_MAX_OP_INPUTS + OA_MAX_OP_OUTPUTS];
  oa_status_t st;
  if ((st = oa_program_instruction(program, v, i, &ins, diag))) return st;
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
  oa_tensor_t **in_ptrs = *cursor;
  oa_tensor_t **out_ptrs = *cursor + ins.inputs.count;
  *cursor += n;
  if (ins.kind == OAB_INSTRUCTION_KIND_TRANSFER) {
    if ((st = prepare_transfer(program, v, m, i, &ins, tps, in, diag))) return st;
    in->call.index = i;
    in->call.op = "transfer";
    in_ptrs[0] = tps[0];
    out_ptrs[0] = tps[1];
    in->call.inputs = in_ptrs;
    in->call.n_inputs = 1;
    in->call.outputs = out_ptrs;
    in->call.n_outputs = 1;
    if (in->copy_device) in->device = in->copy_device;
    return ensure_event(m, i, ins.signal, in->device, diag);
  }
  if (!m->slot_is_cpu[ins.device]) {
    /* an accelerator sees its own memory: constants get a wrapped (or uploaded) view */
    for (uint32_t k = 0; k < ins.inputs.count; k++) {
      int32_t t = oa_fb_vec_i32(&ins.inputs, k);
      oa_tensor_desc_t d;
      if (t < 0) continue;
      if ((st = oa_program_tensor(program, v, (uint32_t)t, &d, diag))) return st;
      if (d.storage != OAB_STORAGE_CONSTANT) continue;
      oa_extra_t *x = &m->extra[m->n_extra];
      x->tensor = m->tensors[t];
      x->device = in->device;
      x->tensor.data = NULL;
      m->n_extra++;
      if ((st = oa_device_wrap_memory(in->device, m->tensors[t].data, m->tensors[t].nbytes, &x->tensor.data)))
        return oa_diag_fail(diag, st, "instruction %u: device slot %u could not take constant '%s' (%zu bytes): %s", i,
                            ins.device, d.name, m->tensors[t].nbytes, oa_status_name(st));
      tps[k] = &x->tensor;
    }
  }
  if ((st = make_call(program, v, i, &ins, tps, in_ptrs, out_ptrs, &in->call, diag))) return st;
  if ((st = oa_device_prepare_op(in->device, &in->call, &in->plan, diag))) {
    oa_method_instr_context(program, v, i, in->call.op, ins.debug, diag, st);
    return st;
  }
  return ensure_event(m, i, ins.signal, in->device, diag);
}

/* The caller's buffer is smaller than the method needs: the message gives the three sizes. Only
 * state + arena are known before anything is written, so on this error path the requirements are
 * computed (a dry run) to name the scratch as well. */
static oa_status_t memory_too_small(const oa_program_t *program, uint32_t method_index,
                                    const oa_method_config_t *config, size_t memory_size, oa_diag_t *diag) {
  oa_memory_requirements_t req;
  oa_status_t st = oa_method_requirements(program, method_index, config, &req, diag);
  if (st) return st;
  return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY,
                      "method memory is %zu bytes; this method needs %zu (state %zu + arena %zu + scratch %zu)",
                      memory_size, req.total_bytes, req.state_bytes, req.arena_bytes, req.scratch_bytes);
}

oa_status_t oa_method_prepare(const oa_program_t *program, uint32_t method_index, const oa_method_config_t *config,
                              void *memory, size_t memory_size, oa_method_t **out_method, oa_diag_t *diag) {
  oa_status_t st;
  if (!memory || !out_method) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL memory or output");
  if ((uintptr_t)memory % OA_MEMORY_ALIGNMENT)
    return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "method memory at %p is not %d-byte aligned", memory,
                        OA_MEMORY_ALIGNMENT);
  oa_diag_clear(diag);
  if (!program) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL argument");
  /* view, bind and layout once, on the stack: nothing is written to the caller's memory before it
   * is known to hold state + arena */
  oa_method_view_t view;
  oa_device_t *devs[OA_MAX_DEVICE_SLOTS];
  int is_cpu[OA_MAX_DEVICE_SLOTS] = {0};
  layout_t lay;
  if ((st = oa_program_method_view(program, method_index, &view, diag))) return st;
  if ((st = oa_method_bind(program, &view, config, devs, is_cpu, diag))) return st;
  if ((st = oa_method_layout(program, &view, is_cpu, &lay, diag))) return st;
  size_t fixed = lay.state_bytes;
  if (!add_size(&fixed, lay.arena_bytes))
    return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "method needs more memory than this platform can address");
  if (memory_size < fixed) return memory_too_small(program, method_index, config, memory_size, diag);
  uint8_t *base = (uint8_t *)memory;
  oa_method_t *m = (oa_method_t *)memory;
  memset(m, 0, sizeof *m);
  m->program = program;
  m->view = view;
  memcpy(m->slot_device, devs, sizeof devs);
  memcpy(m->slot_is_cpu, is_cpu, sizeof is_cpu);
  if ((st = oa_method_place(m, &lay, base, diag))) goto fail;
  if ((st = oa_method_open_streams(m, diag))) goto fail;
  if ((st = oa_method_place_tensors(m, diag))) goto fail;
  /* events: created on the device that records them */
  m->n_events = view.num_events;
  for (uint32_t e = 0; e < m->n_events; e++) {
    m->events[e] = NULL;
    m->event_device[e] = NULL;
  }
  /* every instruction's prepare runs once; its plan is the one execute uses, and the scratch is
   * sized from these plans (CPU slots share the caller's scratch, accelerators allocate theirs) */
  oa_tensor_t **cursor = (oa_tensor_t **)(void *)(base + lay.ptrs_off);
  size_t cpu_scratch = 0, slot_scratch_need[OA_MAX_DEVICE_SLOTS] = {0};
  for (uint32_t i = 0; i < m->n_instrs; i++) {
    if ((st = prepare_instruction(m, i, &cursor, diag))) goto fail;
    const oa_instr_t *in = &m->instrs[i];
    if (in->kind != OAB_INSTRUCTION_KIND_OP) continue;
    size_t *need = m->slot_is_cpu[in->slot] ? &cpu_scratch : &slot_scratch_need[in->slot];
    if (in->plan.scratch_bytes > *need) *need = in->plan.scratch_bytes;
  }
  for (uint32_t e = 0; e < m->n_events; e++) {
    if (!m->events[e]) {
      st = oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "event %u is waited for but never recorded", e);
      goto fail;
    }
  }
  m->scratch_bytes = ALIGN_UP(cpu_scratch, OA_MEMORY_ALIGNMENT);
  size_t total = fixed;
  if (!add_size(&total, m->scratch_bytes) || memory_size < total) {
    st = oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY,
                      "method memory is %zu bytes; this method needs %zu (state %zu + arena %zu + scratch %zu)",
                      memory_size, total, lay.state_bytes, lay.arena_bytes, m->scratch_bytes);
    goto fail;
  }
  m->scratch = base + fixed;
  for (uint32_t sl = 0; sl < m->n_slots; sl++) {
    if (m->slot_is_cpu[sl]) {
      m->slot_scratch[sl] = m->scratch;
      continue;
    }
    if (!slot_scratch_need[sl]) continue;
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
