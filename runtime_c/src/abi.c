/* Struct sizes for language bindings (the Python ctypes binding checks its mirrors with them), and
 * the runtime's version string. */
#include <string.h>

#include "openaccel/openaccel.h"

size_t oa_abi_sizeof(const char *type_name) {
  static const struct { const char *name; size_t size; } kSizes[] = {
      {"oa_program_t", sizeof(oa_program_t)},
      {"oa_tensor_t", sizeof(oa_tensor_t)},
      {"oa_diag_t", sizeof(oa_diag_t)},
      {"oa_cpu_device_t", sizeof(oa_cpu_device_t)},
      {"oa_cpu_options_t", sizeof(oa_cpu_options_t)},
      {"oa_method_config_t", sizeof(oa_method_config_t)},
      {"oa_memory_requirements_t", sizeof(oa_memory_requirements_t)},
      {"oa_test_result_t", sizeof(oa_test_result_t)},
      {"oa_device_properties_t", sizeof(oa_device_properties_t)},
      {"oa_memory_stats_t", sizeof(oa_memory_stats_t)},
      {"oa_registry_t", sizeof(oa_registry_t)},
  };
  if (!type_name) return 0;
  for (size_t i = 0; i < sizeof kSizes / sizeof kSizes[0]; i++)
    if (strcmp(kSizes[i].name, type_name) == 0) return kSizes[i].size;
  return 0;
}

const char *oa_version(void) { return OA_VERSION_STRING; }
