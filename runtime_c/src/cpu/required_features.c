/* The CPU features a program requires (Program.required_features, written by the exporter from
 * the target's cpu_features) against those of the CPU device that will run it. */
#include <string.h>

#include "../fb.h"
#include "../oab_schema.h"
#include "openaccel/cpu.h"

/* Every name a file may require: the CPU device's query keys for its feature flags. Keep in step
 * with sdk/openaccel/targets.py (KNOWN_CPU_FEATURES) and cpu_query_i64 in device_cpu.c. */
static const char *const known_features[] = {
    "neon",     "fp16",     "dotprod",                                             /* Arm */
    "sse4_1",   "avx",      "avx2",     "fma",         "f16c",     "avx512f",      /* x86 */
    "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
    "v",                                                                            /* RISC-V */
    "i8mm",                                                                         /* Arm, later */
};
#define N_KNOWN (sizeof known_features / sizeof known_features[0])

const char *oa_cpu_feature_name(uint32_t index) { return index < N_KNOWN ? known_features[index] : NULL; }

static int is_known(const char *name) {
  for (size_t i = 0; i < N_KNOWN; i++)
    if (strcmp(name, known_features[i]) == 0) return 1;
  return 0;
}

static int device_has(oa_device_t *device, const char *name) {
  int64_t v = 0;
  return oa_device_query_i64(device, "cpu", name, &v) == OA_OK && v != 0;
}

oa_status_t oa_cpu_check_required_features(const oa_program_t *program, oa_device_t *device, oa_diag_t *diag) {
  if (!program || !device) return oa_diag_fail(diag, OA_ERR_INVALID_ARGUMENT, "NULL program or CPU device");
  oa_fb_t fb = {program->data, program->flatbuffer_size};
  oa_fb_table_t root;
  oa_fb_vec_t req;
  oa_status_t st;
  if ((st = oa_fb_table_at(&fb, program->root, &root, diag))) return st;
  if ((st = oa_fb_vector(&root, OAB_PROGRAM_REQUIRED_FEATURES, 4, &req, diag))) return st;
  int missing = 0;
  for (uint32_t i = 0; i < req.count; i++) {
    const char *name;
    if ((st = oa_fb_vec_string(&req, i, &name, diag))) return st;
    if (!is_known(name))
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "Program.required_features[%u] is '%s', not a CPU feature this runtime knows "
                          "(a newer exporter, or a corrupted file)", i, name);
    if (!device_has(device, name)) missing = 1;
  }
  if (!missing) return OA_OK;
  /* "this file needs CPU features avx512f, avx512bw (exported for target x86_64-avx512); this CPU
   * (x86_64) has avx2, fma; it lacks avx512f, avx512bw" */
  char need[256], lack[256], have[256];
  size_t n = 0, l = 0, h = 0;
  need[0] = lack[0] = have[0] = '\0';
  for (uint32_t i = 0; i < req.count; i++) {
    const char *name = "";
    (void)oa_fb_vec_string(&req, i, &name, NULL); /* verified above */
    if (n < sizeof need) n += oa_format(need + n, sizeof need - n, n ? ", %s" : "%s", name);
    if (!device_has(device, name) && l < sizeof lack)
      l += oa_format(lack + l, sizeof lack - l, l ? ", %s" : "%s", name);
  }
  for (size_t i = 0; i < N_KNOWN; i++)
    if (device_has(device, known_features[i]) && h < sizeof have)
      h += oa_format(have + h, sizeof have - h, h ? ", %s" : "%s", known_features[i]);
  int64_t arch = 0;
  if (oa_device_query_i64(device, "cpu", "arch", &arch)) arch = OA_CPU_ARCH_OTHER;
  const char *target = "";
  if (oa_fb_string(&root, OAB_PROGRAM_TARGET, &target, NULL) || !target[0]) target = "unknown";
  return oa_diag_fail(diag, OA_ERR_UNSUPPORTED,
                      "this file needs CPU features %s (exported for target %s); this CPU (%s) has %s; "
                      "it lacks %s. Run it on a CPU that has them, or export it again for a target without them",
                      need, target, oa_cpu_arch_name((oa_cpu_arch_t)arch), h ? have : "no optional features",
                      lack);
}
