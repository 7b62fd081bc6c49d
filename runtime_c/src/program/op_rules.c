/* Which ops may run in place, and on which input: the opset's `inplace` (sdk/openaccel/opset.py,
 * the memory planner's source of truth; tests/test_bad_input.py checks the two agree). The
 * loader refuses any instruction whose outputs overlap its inputs except as these rules allow. */
#include <string.h>

#include "program_internal.h"

typedef struct inplace_rule {
  const char *op;
  int8_t input;      /* the input output 0 may share its bytes with */
  int8_t elementwise; /* every element is read before its own is written: inputs identical to that one may too */
} inplace_rule_t;

static const inplace_rule_t k_inplace[] = {
    /* elementwise, unary */
    {"neg", 0, 1}, {"abs", 0, 1}, {"exp", 0, 1}, {"log", 0, 1}, {"sqrt", 0, 1}, {"rsqrt", 0, 1},
    {"sigmoid", 0, 1}, {"tanh", 0, 1}, {"relu", 0, 1}, {"silu", 0, 1}, {"hardswish", 0, 1},
    {"hardsigmoid", 0, 1}, {"sin", 0, 1}, {"cos", 0, 1}, {"erf", 0, 1}, {"floor", 0, 1}, {"ceil", 0, 1},
    {"round", 0, 1}, {"sign", 0, 1}, {"reciprocal", 0, 1}, {"log1p", 0, 1}, {"expm1", 0, 1}, {"gelu", 0, 1},
    {"leaky_relu", 0, 1}, {"elu", 0, 1}, {"hardtanh", 0, 1}, {"clamp", 0, 1}, {"bitwise_not", 0, 1},
    /* elementwise, binary (the other operand may broadcast; the in-place one never does) */
    {"add", 0, 1}, {"sub", 0, 1}, {"mul", 0, 1}, {"div", 0, 1}, {"pow", 0, 1}, {"minimum", 0, 1},
    {"maximum", 0, 1}, {"remainder", 0, 1}, {"fmod", 0, 1}, {"bitwise_and", 0, 1}, {"bitwise_or", 0, 1},
    {"bitwise_xor", 0, 1}, {"atan2", 0, 1}, {"copysign", 0, 1}, {"hypot", 0, 1}, {"nextafter", 0, 1},
    /* math (one input) */
    {"acos", 0, 1}, {"asin", 0, 1}, {"atan", 0, 1}, {"tan", 0, 1}, {"sinh", 0, 1}, {"cosh", 0, 1}, {"asinh", 0, 1},
    {"acosh", 0, 1}, {"atanh", 0, 1}, {"log2", 0, 1}, {"log10", 0, 1}, {"exp2", 0, 1}, {"erfc", 0, 1},
    {"erfinv", 0, 1}, {"erfcx", 0, 1}, {"ndtri", 0, 1}, {"lgamma", 0, 1}, {"digamma", 0, 1}, {"i0", 0, 1},
    {"i0e", 0, 1}, {"i1", 0, 1}, {"i1e", 0, 1}, {"polygamma", 0, 1},
    /* the fused residual addend: each element is read before its own output is written, but the
     * convolution's input rows are read after earlier outputs are, so it must not be shared */
    {"conv2d_winograd", 3, 0},
    /* scatter: out = self with some elements replaced; the other inputs are read after earlier
     * elements are written, so none of them may share the bytes */
    {"scatter", 0, 0}, {"index_put", 0, 0}, {"slice_scatter", 0, 0}, {"masked_scatter", 0, 0},
};

int oa_op_inplace_input(const char *op, int *out_elementwise) {
  *out_elementwise = 0;
  for (size_t i = 0; op && i < sizeof k_inplace / sizeof k_inplace[0]; i++) {
    if (strcmp(k_inplace[i].op, op) == 0) {
      *out_elementwise = k_inplace[i].elementwise;
      return k_inplace[i].input;
    }
  }
  return -1;
}

/* Ops whose inputs mean something else since a format minor version: a file older than that is
 * refused (its integers would run under the new rule and give other outputs, silently). */
typedef struct format_rule {
  const char *op;
  uint32_t minor;
  const char *change;
} format_rule_t;

static const format_rule_t k_format[] = {
    {"conv2d_q8", 3, "the bias is now in output steps (float32), added after the multiply; it was in accumulator steps"},
    {"linear_q8", 3, "the bias is now in output steps (float32), added after the multiply; it was in accumulator steps"},
};

uint32_t oa_op_format_minor(const char *op) {
  for (size_t i = 0; op && i < sizeof k_format / sizeof k_format[0]; i++)
    if (strcmp(k_format[i].op, op) == 0) return k_format[i].minor;
  return 0;
}

const char *oa_op_format_change(const char *op) {
  for (size_t i = 0; op && i < sizeof k_format / sizeof k_format[0]; i++)
    if (strcmp(k_format[i].op, op) == 0) return k_format[i].change;
  return "";
}
