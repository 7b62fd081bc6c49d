/* Program phase 2, verify: the whole file, once, at load. The tree walk bounds the work by the
 * file size (every table and vector stored once); then every operator, segment, string, and every
 * method: device slots, pools, tensors, instructions (with the aliasing rules of op_rules.c) and
 * bundled tests, each read through the checking accessors of view.c. Hands load.c a program whose
 * counts are filled in and whose every index and size the method phases may rely on. */
#include <string.h>

#include "oab_schema.h"
#include "openaccel/program.h"
#include "program_internal.h"

/* ---- the tree walk: every table and vector reachable from the root, each counted where it is
 * referenced. A file that stores every table once (as a flatbuffer writer does) adds up to at most
 * its own size; one whose offsets point at the same table from many places (a methods vector of N
 * offsets to one Method whose tensors vector holds N offsets to one Tensor: 8N bytes, N^2 visits)
 * runs out of budget, so loading is linear in the file size whatever the offsets say. */
typedef struct walk_field {
  uint8_t table, slot, kind, elem;
  int8_t target;
} walk_field_t;
#define OA_WALK_ENTRY(T, S, K, E, TG) {T, S, K, E, TG},
static const walk_field_t k_walk_fields[] = {OAB_WALK_FIELDS(OA_WALK_ENTRY)};
static const char *const k_table_names[OAB_TABLE_COUNT] = {OAB_TABLE_NAMES};

typedef struct walk {
  size_t budget; /* bytes of tables and vectors the rest of the walk may still reach */
  size_t fb_size;
} walk_t;

/* Take `bytes` (a table at `at`, or with slot >= 0 the vector in that field) from the budget. */
static oa_status_t charge(walk_t *w, size_t bytes, size_t at, unsigned table, int slot, oa_diag_t *diag) {
  if (bytes <= w->budget) {
    w->budget -= bytes;
    return OA_OK;
  }
  char what[96];
  if (slot < 0) oa_format(what, sizeof what, "a %s table", k_table_names[table]);
  else oa_format(what, sizeof what, "the vector in field %d of a %s table", slot, k_table_names[table]);
  return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                      "malformed flatbuffer at byte offset %zu (%s): the tables and vectors reachable from the root "
                      "add up to more than the flatbuffer's %zu bytes, so some are referenced from more than one "
                      "place; every table and vector must be stored once, where it is used",
                      at, what, w->fb_size);
}

static oa_status_t walk_table(walk_t *w, const oa_fb_table_t *t, unsigned type, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = charge(w, t->tbl_size, t->pos, type, -1, diag))) return st;
  for (size_t f = 0; f < sizeof k_walk_fields / sizeof k_walk_fields[0]; f++) {
    const walk_field_t *wf = &k_walk_fields[f];
    if (wf->table != type) continue;
    const char *s;
    oa_fb_vec_t v;
    oa_fb_table_t sub;
    bool present;
    switch (wf->kind) {
      case OAB_WALK_STRING:
        if ((st = oa_fb_string(t, wf->slot, &s, diag))) return st;
        break;
      case OAB_WALK_TABLE:
        if ((st = oa_fb_subtable(t, wf->slot, &sub, &present, diag))) return st;
        if (present && (st = walk_table(w, &sub, (unsigned)wf->target, diag))) return st;
        break;
      default: /* vectors: charged before their elements are visited */
        if ((st = oa_fb_vector(t, wf->slot, wf->elem, &v, diag))) return st;
        if (!v.count) break;
        if ((st = charge(w, 4u + (size_t)v.count * wf->elem, v.pos - 4, type, wf->slot, diag))) return st;
        for (uint32_t i = 0; i < v.count && wf->kind == OAB_WALK_STRINGS; i++)
          if ((st = oa_fb_vec_string(&v, i, &s, diag))) return st;
        for (uint32_t i = 0; i < v.count && wf->kind == OAB_WALK_TABLES; i++) {
          if ((st = oa_fb_vec_table(&v, i, &sub, diag))) return st;
          if ((st = walk_table(w, &sub, (unsigned)wf->target, diag))) return st;
        }
        break;
    }
  }
  return OA_OK;
}

/* Where a tensor's bytes are, for the aliasing rules: planned tensors of one pool overlap when
 * their byte ranges do; constants and empty tensors never overlap anything written. */
typedef struct span {
  uint64_t offset, nbytes;
  uint32_t pool;
  uint8_t written; /* planned and non-empty */
} span_t;

static int spans_overlap(const span_t *a, const span_t *b) {
  return a->written && b->written && a->pool == b->pool && a->offset < b->offset + b->nbytes &&
         b->offset < a->offset + a->nbytes;
}

static int spans_equal(const span_t *a, const span_t *b) {
  return a->pool == b->pool && a->offset == b->offset && a->nbytes == b->nbytes;
}

static int same_dtype_shape(const oa_tensor_desc_t *a, const oa_tensor_desc_t *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* The aliasing rules of instruction `i`: its outputs are pairwise disjoint, and disjoint from its
 * inputs except where the op runs in place (oa_op_inplace_input): output 0 may be exactly the
 * bytes, dtype and shape of its in-place input (and, for elementwise ops, of inputs identical to
 * that one). Kernels read inputs after writing outputs (index_select re-reads its indices, cat and
 * select memcpy), so any other overlap lets a file feed a kernel bytes it already checked and then
 * changed, or hand memcpy overlapping ranges. */
static oa_status_t verify_aliasing(const oa_program_t *p, const oa_method_view_t *m, uint32_t i,
                                   const oa_instr_desc_t *ins, oa_diag_t *diag) {
  span_t in[OA_MAX_OP_INPUTS], out[OA_MAX_OP_OUTPUTS];
  oa_tensor_desc_t a, b;
  oa_status_t st;
  const uint32_t n_in = ins->inputs.count, n_out = ins->outputs.count;
  const oa_fb_vec_t *vecs[2] = {&ins->inputs, &ins->outputs};
  span_t *spans[2] = {in, out};
  for (int k = 0; k < 2; k++) {
    for (uint32_t j = 0; j < vecs[k]->count; j++) {
      int32_t t = oa_fb_vec_i32(vecs[k], j);
      span_t *s = &spans[k][j];
      memset(s, 0, sizeof *s);
      if (t < 0) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)t, &a, diag))) return st;
      s->offset = a.offset;
      s->nbytes = a.nbytes;
      s->pool = a.pool;
      s->written = a.storage == OAB_STORAGE_PLANNED && a.nbytes > 0;
    }
  }
  const char *op = ins->kind == OAB_INSTRUCTION_KIND_TRANSFER ? "transfer" : oa_program_operator_name(p, ins->op);
  if (!op) op = "?";
  for (uint32_t o = 0; o < n_out; o++) {
    for (uint32_t o2 = o + 1; o2 < n_out; o2++) {
      if (!spans_overlap(&out[o], &out[o2])) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o), &a, diag)) ||
          (st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o2), &b, diag)))
        return st;
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "instruction %u (%s): outputs %u ('%s', bytes [%llu, +%llu) of pool %u) and %u ('%s', bytes "
                          "[%llu, +%llu)) overlap; an instruction's outputs must be disjoint", i, op, o, a.name,
                          (unsigned long long)a.offset, (unsigned long long)a.nbytes, a.pool, o2, b.name,
                          (unsigned long long)b.offset, (unsigned long long)b.nbytes);
    }
  }
  int elementwise = 0;
  int k = ins->kind == OAB_INSTRUCTION_KIND_OP ? oa_op_inplace_input(op, &elementwise) : -1;
  for (uint32_t o = 0; o < n_out; o++) {
    for (uint32_t j = 0; j < n_in; j++) {
      if (!spans_overlap(&out[o], &in[j])) continue;
      if ((st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->outputs, o), &a, diag)) ||
          (st = oa_program_tensor(p, m, (uint32_t)oa_fb_vec_i32(&ins->inputs, j), &b, diag)))
        return st;
      int allowed = o == 0 && k >= 0 && (uint32_t)k < n_in && spans_equal(&out[0], &in[j]) &&
                    same_dtype_shape(&a, &b) && (j == (uint32_t)k || (elementwise && spans_equal(&in[k], &in[j])));
      if (allowed) continue;
      char rule[160];
      if (k >= 0)
        oa_format(rule, sizeof rule, "%s runs in place only on input %d: output 0 may be exactly its bytes, dtype "
                  "and shape, and must be disjoint from the other inputs", op, k);
      else
        oa_format(rule, sizeof rule, "%s never runs in place: its outputs must be disjoint from its inputs", op);
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                          "instruction %u (%s): output %u ('%s', bytes [%llu, +%llu) of pool %u) overlaps input %u "
                          "('%s', bytes [%llu, +%llu)); %s", i, op, o, a.name, (unsigned long long)a.offset,
                          (unsigned long long)a.nbytes, a.pool, j, b.name, (unsigned long long)b.offset,
                          (unsigned long long)b.nbytes, rule);
    }
  }
  return OA_OK;
}

/* Walk one method completely so prepare can trust indices and sizes. */
static oa_status_t verify_method(const oa_program_t *p, uint32_t index, oa_diag_t *diag) {
  oa_method_view_t m;
  oa_status_t st;
  if ((st = oa_program_method_view(p, index, &m, diag))) return st;
  if (m.devices.count == 0 && m.instructions.count)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s' has instructions but no device slots", m.name);
  for (uint32_t i = 0; i < m.devices.count; i++) {
    const char *kind;
    uint32_t ordinal;
    if ((st = oa_program_device_slot(p, &m, i, &kind, &ordinal, diag))) return st;
  }
  for (uint32_t i = 0; i < m.pools.count; i++) {
    oa_pool_desc_t pool;
    if ((st = oa_program_pool(p, &m, i, &pool, diag))) return st;
  }
  for (uint32_t i = 0; i < m.tensors.count; i++) {
    oa_tensor_desc_t t;
    if ((st = oa_program_tensor(p, &m, i, &t, diag))) return st;
  }
  for (uint32_t i = 0; i < m.instructions.count; i++) {
    oa_instr_desc_t ins;
    if ((st = oa_program_instruction(p, &m, i, &ins, diag))) return st;
    for (uint32_t o = 0; o < ins.outputs.count; o++) {
      oa_tensor_desc_t t;
      if ((st = oa_program_tensor(p, &m, (uint32_t)oa_fb_vec_i32(&ins.outputs, o), &t, diag))) return st;
      if (t.storage == OAB_STORAGE_CONSTANT)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "instruction %u writes constant tensor '%s'", i, t.name);
    }
    if ((st = verify_aliasing(p, &m, i, &ins, diag))) return st;
  }
  const oa_fb_vec_t *io[2] = {&m.inputs, &m.outputs};
  for (int k = 0; k < 2; k++) {
    for (uint32_t i = 0; i < io[k]->count; i++) {
      uint32_t ti = oa_fb_vec_u32(io[k], i);
      oa_tensor_desc_t t;
      if (ti >= m.tensors.count)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s': %s %u refers to tensor %u (method has %u)",
                            m.name, k ? "output" : "input", i, ti, m.tensors.count);
      if ((st = oa_program_tensor(p, &m, ti, &t, diag))) return st;
      if (k == 0 && t.storage != OAB_STORAGE_PLANNED)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "method '%s': input %u ('%s') is not a planned tensor",
                            m.name, i, t.name);
    }
  }
  for (uint32_t i = 0; i < m.tests.count; i++) {
    oa_test_desc_t test;
    if ((st = oa_program_test(p, &m, i, &test, diag))) return st;
    const oa_fb_vec_t *vecs[2] = {&test.inputs, &test.outputs};
    const oa_fb_vec_t *sig[2] = {&m.inputs, &m.outputs};
    for (int k = 0; k < 2; k++) {
      if (vecs[k]->count != sig[k]->count)
        return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u ('%s'): %u %s for a method with %u", i, test.name,
                            vecs[k]->count, k ? "outputs" : "inputs", sig[k]->count);
      for (uint32_t j = 0; j < vecs[k]->count; j++) {
        oa_data_desc_t d;
        oa_tensor_desc_t t;
        if ((st = oa_program_test_data(p, vecs[k], j, &d, diag)))
          return oa_diag_context(diag, st, "test %u ('%s')", i, test.name);
        if ((st = oa_program_tensor(p, &m, oa_fb_vec_u32(sig[k], j), &t, diag))) return st;
        int same = d.dtype == t.dtype && d.ndim == t.ndim;
        for (int32_t dd = 0; same && dd < t.ndim; dd++) same = d.shape[dd] == t.shape[dd];
        if (!same)
          return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "test %u ('%s'): %s %u does not match the method's dtype/shape",
                              i, test.name, k ? "output" : "input", j);
      }
    }
  }
  return OA_OK;
}

oa_status_t oa_program_verify(oa_program_t *program, const oa_fb_table_t *root, oa_diag_t *diag) {
  oa_program_t p = *program;
  oa_status_t st;
  walk_t walk = {p.flatbuffer_size, p.flatbuffer_size};
  if ((st = walk_table(&walk, root, OAB_TABLE_PROGRAM, diag))) return st;
  oa_fb_vec_t v;
  if ((st = oa_fb_vector(root, OAB_PROGRAM_METHODS, 4, &v, diag))) return st;
  p.method_count = v.count;
  if ((st = oa_fb_vector(root, OAB_PROGRAM_OPERATORS, 4, &v, diag))) return st;
  p.operator_count = v.count;
  for (uint32_t i = 0; i < v.count; i++) {
    oa_fb_table_t op;
    const char *name;
    if ((st = oa_fb_vec_table(&v, i, &op, diag))) return st;
    if ((st = oa_fb_string(&op, OAB_OPERATOR_NAME, &name, diag))) return st;
    if (!*name) return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "operator %u has no name", i);
    const uint32_t since = oa_op_format_minor(name);
    if (p.format_major == 1 && p.format_minor < since)
      return oa_diag_fail(diag, OA_ERR_UNSUPPORTED_VERSION,
                          "operator %u (%s): its meaning changed in file format 1.%u and this file is format %u.%u "
                          "(%s); export the model again with this openaccel", i, name, since, p.format_major,
                          p.format_minor, oa_op_format_change(name));
  }
  if ((st = oa_fb_vector(root, OAB_PROGRAM_SEGMENTS, 4, &v, diag))) return st;
  p.segment_count = v.count;
  for (uint32_t i = 0; i < v.count; i++) {
    const uint8_t *d;
    uint64_t n;
    if ((st = oa_program_segment(&p, i, &d, &n, diag))) return st;
  }
  const char *s;
  if ((st = oa_fb_string(root, OAB_PROGRAM_PRODUCER, &s, diag))) return st;
  if ((st = oa_fb_string(root, OAB_PROGRAM_TARGET, &s, diag))) return st;
  if ((st = oa_fb_vector(root, OAB_PROGRAM_REQUIRED_FEATURES, 4, &v, diag))) return st;
  for (uint32_t i = 0; i < v.count; i++)
    if ((st = oa_fb_vec_string(&v, i, &s, diag))) return st;
  for (uint32_t i = 0; i < p.method_count; i++)
    if ((st = verify_method(&p, i, diag))) return oa_diag_context(diag, st, "method %u", i);
  *program = p;
  return OA_OK;
}
