/* Memory requirements, caller-provided memory, device binding, inputs and bundled tests. */
#include "check.h"
#include "fixtures.h"
#include "openaccel/device_abi.h"

/* The CPU device with prepare_op counted: prepare must prepare each instruction once (its plans are
 * the ones execute uses and the scratch is sized from them), requirements once too. */
static unsigned g_prepares;
static oa_status_t (*g_cpu_prepare)(oa_device_t *, const oa_op_call_t *, oa_op_plan_t *, oa_diag_t *);
static oa_status_t counting_prepare(oa_device_t *dev, const oa_op_call_t *call, oa_op_plan_t *out_plan,
                                    oa_diag_t *diag) {
  g_prepares++;
  return g_cpu_prepare(dev, call, out_plan, diag);
}

int main(void) {
  char buf[1200];
  const char *path = fixture_path("mlp.oab", buf, sizeof buf);
  if (!path) {
    fprintf(stderr, "fixture mlp.oab not found in '%s'\n", fixture_dir());
    return 2;
  }
  fixture_t fx;
  CHECK(fixture_read(path, &fx) == 0);
  oa_diag_t diag;
  oa_program_t p;
  CHECK(oa_program_load(fx.data, fx.size, &p, &diag) == OA_OK);
  uint32_t mi = 99;
  CHECK(oa_program_find_method(&p, "forward", &mi) == OA_OK && mi == 0);
  CHECK(oa_program_find_method(&p, "nope", &mi) == OA_ERR_NOT_FOUND);
  CHECK(strstr(oa_program_producer(&p), "openaccel") != NULL);

  oa_cpu_device_t cpu_storage;
  oa_device_t *cpu;
  CHECK(oa_cpu_device_init(&cpu_storage, NULL, &cpu) == OA_OK);
  static oa_device_vtable_t counted;
  counted = *cpu->vtable;
  g_cpu_prepare = counted.prepare_op;
  counted.prepare_op = counting_prepare;
  cpu->vtable = &counted;
  oa_method_config_t cfg = {&cpu, 1};
  oa_memory_requirements_t req;
  g_prepares = 0;
  CHECK(oa_method_requirements(&p, 0, &cfg, &req, &diag) == OA_OK);
  const unsigned n_ops = g_prepares;
  CHECK(n_ops == 3); /* linear, relu, linear */
  CHECK(req.total_bytes == req.state_bytes + req.arena_bytes + req.scratch_bytes);
  CHECK(req.arena_bytes > 0);

  /* no devices: the message names the missing device kind */
  oa_method_config_t none = {NULL, 0};
  CHECK(oa_method_requirements(&p, 0, &none, &req, &diag) == OA_ERR_NOT_FOUND);
  CHECK_STR_CONTAINS(diag.message, "'cpu'");

  /* one static-style buffer: too small, misaligned, then exact */
  uint8_t *mem = (uint8_t *)oa_platform_alloc(req.total_bytes + 64, 64);
  oa_method_t *m = NULL;
  CHECK(oa_method_prepare(&p, 0, &cfg, mem, req.total_bytes - 1, &m, &diag) == OA_ERR_OUT_OF_MEMORY);
  CHECK_STR_CONTAINS(diag.message, "needs");
  CHECK(oa_method_prepare(&p, 0, &cfg, mem + 8, req.total_bytes, &m, &diag) == OA_ERR_INVALID_ARGUMENT);
  g_prepares = 0;
  CHECK(oa_method_prepare(&p, 0, &cfg, mem, req.total_bytes, &m, &diag) == OA_OK);
  CHECK(g_prepares == n_ops);
  CHECK(oa_method_input_count(m) == 1 && oa_method_output_count(m) == 1);
  CHECK(oa_method_test_count(m) == 1);

  oa_test_result_t r;
  CHECK(oa_method_run_test(m, 0, &r, &diag) == OA_OK);
  CHECK(r.passed == 1);
  CHECK(oa_method_run_test(m, 5, &r, &diag) == OA_ERR_NOT_FOUND);

  /* outputs are deterministic across runs */
  const oa_tensor_t *out;
  CHECK(oa_method_output(m, 0, &out) == OA_OK);
  float first[16];
  size_t nb = out->nbytes < sizeof first ? out->nbytes : sizeof first;
  memcpy(first, out->data, nb);
  CHECK(oa_method_execute(m, &diag) == OA_OK);
  CHECK(memcmp(first, out->data, nb) == 0);

  /* wrong inputs: dtype, shape, index */
  oa_tensor_t *in;
  CHECK(oa_method_input(m, 0, &in) == OA_OK);
  oa_tensor_t bad = *in;
  bad.dtype = OA_DTYPE_INT32;
  CHECK(oa_method_set_input(m, 0, &bad, &diag) == OA_ERR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(diag.message, "expected float32");
  CHECK_STR_CONTAINS(diag.message, "received int32");
  bad = *in;
  bad.shape[bad.ndim - 1] += 1;
  CHECK(oa_method_set_input(m, 0, &bad, &diag) == OA_ERR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(diag.message, "expected");
  CHECK(oa_method_set_input(m, 3, in, &diag) == OA_ERR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(diag.message, "takes 1 inputs");
  CHECK(oa_method_set_input(m, 0, in, &diag) == OA_OK);

  oa_method_release(m);
  oa_platform_free(mem);

  /* the convenience API */
  g_prepares = 0;
  CHECK(oa_method_create(&p, 0, &cfg, &m, &diag) == OA_OK);
  CHECK(g_prepares == 2 * n_ops); /* the requirements' dry run sizes the buffer, then prepare */
  CHECK(oa_method_execute(m, &diag) == OA_OK);
  oa_method_destroy(m);
  oa_method_destroy(NULL);
  fixture_free(&fx);
  TEST_MAIN_END();
}
