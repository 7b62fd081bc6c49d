/* Check: stream.ordering, the one check that depends on a stream running its commands in order. */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- streams ------------------------------------------------------------------------------------------- */

enum { ORD_NB = 4, ORD_BUF = 64 * 1024, ORD_STEPS = 256, ORD_PATS = 8, ORD_SNAPS = 64 };
enum { ORDB_NF = 1024, ORDB_STEPS = 96 }; /* ORDB_STEPS <= ORD_STEPS: phase B reuses the step array */

typedef struct ord_step {
  int kind; /* 0 H2D, 1 D2D, 2 D2H, 3 relu, 4 add */
  int a, b, c, p;
  size_t off_a, off_b, len;
} ord_step_t;

int check_stream_ordering(suite_t *s) {
  int rc = R_PASS;
  rng_t r = rng_for(s, "stream.ordering");
  oa_stream_t *st = NULL;
  void *buf[ORD_NB];
  uint8_t *pats = NULL, *model = NULL, *snaps = NULL, *msnaps = NULL, *out = NULL;
  ord_step_t *steps = NULL;
  int n_snap = 0;
  TRY(new_stream(s, &st), "stream_create");
  pats = (uint8_t *)host_alloc(s, (size_t)ORD_PATS * ORD_BUF);
  model = (uint8_t *)host_alloc(s, (size_t)ORD_NB * ORD_BUF);
  snaps = (uint8_t *)host_alloc(s, (size_t)ORD_SNAPS * ORD_BUF);
  msnaps = (uint8_t *)host_alloc(s, (size_t)ORD_SNAPS * ORD_BUF);
  out = (uint8_t *)host_alloc(s, ORD_BUF);
  steps = (ord_step_t *)host_alloc(s, sizeof(ord_step_t) * ORD_STEPS);
  if (!pats || !model || !snaps || !msnaps || !out || !steps) FAIL("out of host memory");
  fill_bytes(&r, pats, (size_t)ORD_PATS * ORD_BUF);
  for (int i = 0; i < ORD_NB; i++) TRY(dev_alloc(s, ORD_BUF, 0, &buf[i]), "allocate");
  /* phase A: a random chain of copies on one stream, no synchronization, against a host model */
  for (int i = 0; i < ORD_NB; i++) {
    memcpy(model + (size_t)i * ORD_BUF, pats + (size_t)i * ORD_BUF, ORD_BUF);
    TRY(h2d(s, st, buf[i], pats + (size_t)i * ORD_BUF, ORD_BUF), "copy host to device");
  }
  for (int k = 0; k < ORD_STEPS; k++) {
    ord_step_t *q = &steps[k];
    uint32_t pick = rng_below(&r, 10);
    q->a = (int)rng_below(&r, ORD_NB);
    q->b = (q->a + 1 + (int)rng_below(&r, ORD_NB - 1)) % ORD_NB;
    q->p = (int)rng_below(&r, ORD_PATS);
    q->len = 1 + rng_below(&r, ORD_BUF);
    q->off_a = rng_below(&r, (uint32_t)(ORD_BUF - q->len + 1));
    q->off_b = rng_below(&r, (uint32_t)(ORD_BUF - q->len + 1));
    q->kind = pick < 3 ? 0 : pick < 7 ? 1 : (n_snap < ORD_SNAPS ? 2 : 1);
    uint8_t *ma = model + (size_t)q->a * ORD_BUF, *mb = model + (size_t)q->b * ORD_BUF;
    oa_status_t e;
    if (q->kind == 0) { /* buf[a][off_a..] <- pattern p [off_b..] */
      memcpy(ma + q->off_a, pats + (size_t)q->p * ORD_BUF + q->off_b, q->len);
      e = h2d(s, st, dptr_add(buf[q->a], q->off_a), pats + (size_t)q->p * ORD_BUF + q->off_b, q->len);
    } else if (q->kind == 1) { /* buf[b][off_b..] <- buf[a][off_a..] */
      memmove(mb + q->off_b, ma + q->off_a, q->len);
      e = d2d(s, st, dptr_add(buf[q->b], q->off_b), dptr_add(buf[q->a], q->off_a), q->len);
    } else { /* snapshot of buf[a] */
      memcpy(msnaps + (size_t)n_snap * ORD_BUF, ma, ORD_BUF);
      e = d2h(s, st, snaps + (size_t)n_snap * ORD_BUF, buf[q->a], ORD_BUF);
      q->c = n_snap++;
    }
    if (e) FAIL("phase A step %d: copy failed: %s", k, sn(e));
  }
  TRY(sync_stream(s, st), "stream_synchronize after phase A");
  if (HAS(s, stream_query)) {
    oa_status_t q = oa_stream_query(s->dev, st);
    if (q) FAIL("stream_query after stream_synchronize: expected OK, received %s", sn(q));
  }
  for (int k = 0; k < ORD_STEPS; k++) {
    if (steps[k].kind != 2) continue;
    int c = steps[k].c;
    if (memcmp(snaps + (size_t)c * ORD_BUF, msnaps + (size_t)c * ORD_BUF, ORD_BUF)) {
      size_t at = 0;
      while (snaps[(size_t)c * ORD_BUF + at] == msnaps[(size_t)c * ORD_BUF + at]) at++;
      FAIL("phase A: the device-to-host copy of step %d (of %d queued commands) read data from a different point of "
           "the stream (first wrong byte %zu): commands ran out of order", k, ORD_STEPS, at);
    }
  }
  for (int i = 0; i < ORD_NB; i++) {
    TRY(d2h(s, st, out, buf[i], ORD_BUF), "copy device to host");
    TRY(sync_stream(s, st), "stream_synchronize");
    if (memcmp(out, model + (size_t)i * ORD_BUF, ORD_BUF)) FAIL("phase A: buffer %d ends with the wrong bytes", i);
  }
  /* phase B: copies and ops, queued at once vs one at a time with a synchronize after each */
  int relu = claims_f32(s, "relu"), add = claims_f32(s, "add");
  char phase_b[128] = "phase B skipped (the device claims neither relu nor add for float32)";
  if (relu || add) {
    float *fp = (float *)(void *)pats; /* ORD_PATS * ORD_BUF bytes of random floats */
    for (size_t i = 0; i < (size_t)ORD_PATS * ORD_BUF / sizeof(float); i++) fp[i] = rng_float(&r) * 4.0f;
    int n_b = 0;
    for (int k = 0; k < ORDB_STEPS; k++) {
      ord_step_t *q = &steps[k];
      uint32_t pick = rng_below(&r, 10);
      q->a = (int)rng_below(&r, ORD_NB);
      q->b = (q->a + 1 + (int)rng_below(&r, ORD_NB - 1)) % ORD_NB;
      q->c = q->b;
      while (q->c == q->a || q->c == q->b) q->c = (int)rng_below(&r, ORD_NB);
      q->p = (int)rng_below(&r, (uint32_t)((size_t)ORD_PATS * ORD_BUF / (ORDB_NF * sizeof(float))));
      q->kind = pick < 2 ? 0 : pick < 4 ? 1 : pick < 6 ? 2 : (pick < 8 ? (relu ? 3 : 4) : (add ? 4 : 3));
      if (q->kind == 2 && n_b >= ORD_SNAPS) q->kind = 1;
      if (q->kind == 2) n_b++;
    }
    uint8_t *snap_run[2] = {snaps, msnaps};
    uint8_t *final_run[2] = {model, model + (size_t)2 * ORD_BUF};
    const size_t nbytes = ORDB_NF * sizeof(float);
    /* one call per step, alive until the stream has drained: a device may keep the pointers (the
     * executor's calls live as long as the method) */
    typedef struct step_call {
      oa_tensor_t ts[3];
      oa_tensor_t *ptrs[3];
      oa_op_call_t call;
      oa_op_plan_t plan;
    } step_call_t;
    step_call_t *calls = (step_call_t *)host_alloc(s, sizeof(step_call_t) * ORDB_STEPS);
    if (!calls) FAIL("out of host memory");
    static const double alpha = -0.5;
    for (int run = 0; run < 2; run++) { /* run 0: synchronize after every step; run 1: queue everything */
      int snap = 0;
      for (int i = 0; i < ORD_NB; i++) TRY(h2d(s, st, buf[i], fp + (size_t)i * ORDB_NF, nbytes), "copy host to device");
      TRY(sync_stream(s, st), "stream_synchronize");
      for (int k = 0; k < ORDB_STEPS; k++) {
        const ord_step_t *q = &steps[k];
        oa_status_t e = OA_OK;
        if (q->kind == 0) {
          e = h2d(s, st, buf[q->a], fp + (size_t)q->p * ORDB_NF, nbytes);
        } else if (q->kind == 1) {
          e = d2d(s, st, buf[q->b], buf[q->a], nbytes);
        } else if (q->kind == 2) {
          e = d2h(s, st, snap_run[run] + (size_t)snap++ * nbytes, buf[q->a], nbytes);
        } else if (q->kind == 3) {
          step_call_t *sc = &calls[k];
          f32_tensor(&sc->ts[0], buf[q->a], ORDB_NF, "x");
          f32_tensor(&sc->ts[1], buf[q->b], ORDB_NF, "y");
          if ((e = prep_simple(s, "relu", sc->ts, 1, &sc->call, sc->ptrs, &sc->plan, NULL, 0)))
            FAIL("prepare relu: %s", sn(e));
          e = oa_device_execute_op(s->dev, st, &sc->call, &sc->plan, NULL, NULL);
        } else {
          step_call_t *sc = &calls[k];
          f32_tensor(&sc->ts[0], buf[q->a], ORDB_NF, "a");
          f32_tensor(&sc->ts[1], buf[q->b], ORDB_NF, "b");
          f32_tensor(&sc->ts[2], buf[q->c], ORDB_NF, "y");
          if ((e = prep_simple(s, "add", sc->ts, 2, &sc->call, sc->ptrs, &sc->plan, &alpha, 1)))
            FAIL("prepare add: %s", sn(e));
          e = oa_device_execute_op(s->dev, st, &sc->call, &sc->plan, NULL, NULL);
        }
        if (e) FAIL("phase B step %d failed: %s", k, sn(e));
        if (run == 0) TRY(sync_stream(s, st), "stream_synchronize");
      }
      TRY(sync_stream(s, st), "stream_synchronize");
      for (int i = 0; i < ORD_NB; i++)
        TRY(d2h(s, st, final_run[run] + (size_t)i * nbytes, buf[i], nbytes), "copy device to host");
      TRY(sync_stream(s, st), "stream_synchronize");
    }
    if (memcmp(snaps, msnaps, (size_t)n_b * nbytes)) {
      size_t at = 0;
      while (snaps[at] == msnaps[at]) at++;
      FAIL("phase B: %d queued copies and ops gave different results from the same commands run one at a time "
           "(snapshot %zu differs): commands ran out of order", ORDB_STEPS, at / nbytes);
    }
    if (memcmp(final_run[0], final_run[1], (size_t)ORD_NB * nbytes))
      FAIL("phase B: buffers end differently when %d copies and ops are queued at once: commands ran out of order",
           ORDB_STEPS);
    snprintf(phase_b, sizeof phase_b, "phase B: %d copies and%s%s queued at once = one at a time", ORDB_STEPS,
             relu ? " relu" : "", add ? (relu ? "/add" : " add") : "");
  }
  set_detail(s, "phase A: %d queued copies (%d read-backs) match a host model; %s", ORD_STEPS, n_snap, phase_b);
done:
  release_all(s);
  return rc;
}

