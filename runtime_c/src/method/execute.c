/* Method phase execute: the loop of calls over a prepared method (waits for other devices' events,
 * transfers, one oa_device_execute_op per instruction, event records, optional per-instruction
 * profile), plus the method's inputs and outputs. Nothing here allocates or locks on the CPU path;
 * everything it reads was resolved by prepare.c. Hands bundled_tests.c oa_method_execute. */
#include "method_internal.h"

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
      oa_method_instr_context(method->program, &method->view, i, in->call.op, in->debug, diag, st);
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

const char *oa_method_instruction_kernel(const oa_method_t *method, uint32_t index) {
  if (!method || index >= method->n_instrs) return "";
  const oa_instr_t *in = &method->instrs[index];
  if (in->kind == OAB_INSTRUCTION_KIND_TRANSFER || in->slot >= OA_MAX_DEVICE_SLOTS || !method->slot_is_cpu[in->slot])
    return "";
  return oa_cpu_plan_kernel(&in->plan);
}

uint32_t oa_method_input_count(const oa_method_t *method) { return method ? method->n_inputs : 0; }
uint32_t oa_method_output_count(const oa_method_t *method) { return method ? method->n_outputs : 0; }
uint32_t oa_method_instruction_count(const oa_method_t *method) { return method ? method->n_instrs : 0; }

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
