/* Method phase bind: each device slot of the file to a device of the caller's config (by kind name
 * and ordinal), and, once the method has memory, one in-order stream per accelerator slot. Hands
 * layout.c the slots' devices and which of them are the CPU (CPU pools live in the caller's
 * memory; the others come from their device). */
#include "method_internal.h"

oa_status_t oa_method_bind(const oa_program_t *p, const oa_method_view_t *m, const oa_method_config_t *cfg,
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
    /* the kernels chosen at export may need CPU features (Program.required_features) */
    if (out_is_cpu[s] && (st = oa_cpu_check_required_features(p, out_devs[s], diag))) return st;
  }
  return OA_OK;
}

oa_status_t oa_method_open_streams(oa_method_t *m, oa_diag_t *diag) {
  for (uint32_t sl = 0; sl < m->n_slots; sl++) {
    if (m->slot_is_cpu[sl]) continue;
    oa_status_t st = oa_stream_create(m->slot_device[sl], 0, &m->slot_stream[sl]);
    if (st) return oa_diag_fail(diag, st, "device slot %u: could not create a stream (%s)", sl, oa_status_name(st));
  }
  return OA_OK;
}
