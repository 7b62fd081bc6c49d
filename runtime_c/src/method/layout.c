/* Method phase layout: where everything lives in the caller's one buffer. oa_method_layout computes
 * the sizes and offsets (state: the method, its tensors, instructions, argument pointers, events,
 * device views of constants and the zero points files do not store; arena: the CPU pools of the memory plan) from the file and the
 * bound slots, without memory; oa_method_place and oa_method_place_tensors then point the state
 * into the buffer, obtain the pools and fill every tensor descriptor. Hands prepare.c tensors
 * whose data pointers are final. */
#include "method_internal.h"

oa_status_t oa_method_layout(const oa_program_t *p, const oa_method_view_t *m, const int *slot_is_cpu,
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
  /* zero points the file does not store (all zero, format 1.2): one zero-filled array as long as the
   * longest, shared by those tensors' quant.zero_point (the device ABI promises `count` values) */
  out->n_zeros = 0;
  for (uint32_t t = 0; ok && t < m->tensors.count; t++) {
    oa_tensor_desc_t d;
    oa_status_t st = oa_program_tensor(p, m, t, &d, diag);
    if (st) return st;
    if (d.quant.scale && !d.quant.zero_point && d.quant.count > out->n_zeros) out->n_zeros = d.quant.count;
  }
  sz = ALIGN_UP(sz, 16);
  out->zeros_off = sz;
  ok &= mul_add_size(&sz, out->n_zeros, sizeof(int64_t));
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

oa_status_t oa_method_fill_tensor(const oa_program_t *p, const oa_method_view_t *m, uint32_t index,
                                  uint8_t *const *pool_base, const int64_t *zeros, oa_tensor_t *out,
                                  oa_diag_t *diag) {
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
  out->quant = d.quant;
  if (d.quant.scale && !d.quant.zero_point) out->quant.zero_point = zeros; /* at least count zeros */
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

oa_status_t oa_method_place(oa_method_t *m, const layout_t *lay, uint8_t *base, oa_diag_t *diag) {
  const oa_method_view_t *v = &m->view;
  oa_status_t st;
  m->n_tensors = v->tensors.count;
  m->n_instrs = v->instructions.count;
  m->n_inputs = v->inputs.count;
  m->n_outputs = v->outputs.count;
  m->n_tests = v->tests.count;
  m->n_slots = v->devices.count;
  m->n_pools = v->pools.count;
  m->tensors = (oa_tensor_t *)(void *)(base + lay->tensors_off);
  m->instrs = (oa_instr_t *)(void *)(base + lay->instrs_off);
  m->inputs = (oa_tensor_t **)(void *)(base + lay->io_off);
  m->outputs = m->inputs + m->n_inputs;
  m->events = (oa_event_t **)(void *)(base + lay->events_off);
  m->event_device = (oa_device_t **)(void *)(m->events + v->num_events);
  m->extra = (oa_extra_t *)(void *)(base + lay->extra_off);
  int64_t *zeros = (int64_t *)(void *)(base + lay->zeros_off);
  for (uint32_t k = 0; k < lay->n_zeros; k++) zeros[k] = 0;
  m->zeros = zeros;
  /* pools: CPU pools live in the caller's memory, others come from their device */
  uint8_t *arena = base + lay->state_bytes;
  for (uint32_t k = 0; k < m->n_pools; k++) {
    oa_pool_desc_t pool;
    if ((st = oa_program_pool(m->program, v, k, &pool, diag))) return st;
    if (lay->pool_off[k] != SIZE_MAX) {
      m->pool_base[k] = arena + lay->pool_off[k];
    } else {
      void *ptr = NULL;
      if ((st = oa_device_allocate(m->slot_device[pool.device], (size_t)pool.size, pool.alignment, &ptr)))
        return oa_diag_fail(diag, OA_ERR_OUT_OF_MEMORY, "memory pool %u: device slot %u could not allocate %llu bytes (%s)",
                            k, pool.device, (unsigned long long)pool.size, oa_status_name(st));
      m->pool_base[k] = (uint8_t *)ptr;
      m->pool_owned[k] = 1;
    }
  }
  return OA_OK;
}

oa_status_t oa_method_place_tensors(oa_method_t *m, oa_diag_t *diag) {
  const oa_program_t *program = m->program;
  const oa_method_view_t *v = &m->view;
  oa_status_t st;
  for (uint32_t t = 0; t < m->n_tensors; t++)
    if ((st = oa_method_fill_tensor(program, v, t, m->pool_base, m->zeros, &m->tensors[t], diag))) return st;
  for (uint32_t i = 0; i < m->n_inputs; i++) m->inputs[i] = &m->tensors[oa_fb_vec_u32(&v->inputs, i)];
  for (uint32_t i = 0; i < m->n_outputs; i++) m->outputs[i] = &m->tensors[oa_fb_vec_u32(&v->outputs, i)];
  /* inputs and outputs must be host memory: the caller writes and reads them directly */
  const oa_fb_vec_t *io[2] = {&v->inputs, &v->outputs};
  for (int k = 0; k < 2; k++) {
    for (uint32_t i = 0; i < io[k]->count; i++) {
      oa_tensor_desc_t d;
      oa_pool_desc_t pool;
      if ((st = oa_program_tensor(program, v, oa_fb_vec_u32(io[k], i), &d, diag))) return st;
      if (d.storage != OAB_STORAGE_PLANNED) continue;
      if ((st = oa_program_pool(program, v, d.pool, &pool, diag))) return st;
      if (!m->slot_is_cpu[pool.device])
        return oa_diag_fail(diag, OA_ERR_UNSUPPORTED, "%s %u ('%s') lives in accelerator memory; method inputs and "
                            "outputs must be in a CPU pool", k ? "output" : "input", i, d.name);
    }
  }
  return OA_OK;
}
