/* Method phase bundled tests: a file's test vectors (inputs, expected outputs, tolerances) run on a
 * prepared method: write the inputs, execute (execute.c), compare every output. The end of the
 * line: it hands nothing on. */
#include "method_internal.h"

uint32_t oa_method_test_count(const oa_method_t *method) { return method ? method->n_tests : 0; }

/* Compare one output with its expected bytes; accumulates into `r`. */
static void compare(const oa_tensor_t *got, const uint8_t *want, uint32_t output, oa_test_result_t *r) {
  /* complex64: its real and imaginary parts compared as float32 values (first_mismatch counts those) */
  const int complex64 = got->dtype == OA_DTYPE_COMPLEX64;
  const int64_t n = complex64 ? 2 * got->numel : got->numel;
  for (int64_t i = 0; i < n; i++) {
    double a, b;
    if (got->dtype == OA_DTYPE_FLOAT32 || complex64) {
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
  /* first_mismatch indexes the first output with a mismatch: compare() moves worst_output to any
   * later output with a larger error, so the output of the first mismatch is pinned here */
  uint32_t mismatch_output = UINT32_MAX;
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
    if (r.mismatches > before && mismatch_output == UINT32_MAX) mismatch_output = o;
  }
  if (mismatch_output != UINT32_MAX) r.worst_output = mismatch_output;
  r.passed = r.mismatches == 0;
  *out_result = r;
  return OA_OK;
}
