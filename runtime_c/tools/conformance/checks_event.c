/* Checks: event.record_query, event.host_wait_timeout, event.elapsed, event.cross_stream_wait,
 * event.sticky_failure, device.synchronize. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- events ---------------------------------------------------------------------------------------------- */

int check_event_record_query(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *e = NULL, *never = NULL;
  oa_status_t q;
  void *d = NULL;
  uint8_t *h = NULL;
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  TRY(new_event(s, 0, &never), "event_create");
  if ((q = oa_event_query(s->dev, e))) FAIL("query of a never-recorded event: expected OK (complete), received %s", sn(q));
  if ((q = oa_event_synchronize(s->dev, e, 0))) FAIL("synchronize(never-recorded event, 0 ns): expected OK, received %s", sn(q));
  if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
    FAIL("synchronize(never-recorded event): expected OK, received %s", sn(q));
  const size_t n = 1 << 20;
  h = (uint8_t *)host_alloc(s, n);
  if (!h) FAIL("out of host memory");
  memset(h, 7, n);
  TRY(dev_alloc(s, n, 0, &d), "allocate");
  for (int round = 0; round < 3; round++) {
    oa_stream_t *where = round == 1 ? NULL : st;
    TRY(h2d(s, where, d, h, n), "copy host to device");
    TRY(oa_event_record(s->dev, e, where), "event_record");
    q = oa_event_query(s->dev, e);
    if (q && q != OA_ERR_NOT_READY) FAIL("query of a recorded event: expected OK or NOT_READY, received %s", sn(q));
    if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
      FAIL("synchronize(recorded event%s): expected OK, received %s", round == 1 ? ", default stream" : "", sn(q));
    if ((q = oa_event_query(s->dev, e))) FAIL("query after synchronize: expected OK, received %s", sn(q));
  }
  if ((q = oa_stream_wait_event(s->dev, st, never))) FAIL("stream_wait_event(never-recorded event): received %s", sn(q));
  TRY(h2d(s, st, d, h, 64), "copy host to device");
  if ((q = sync_stream(s, st))) FAIL("a stream waiting for a never-recorded event: synchronize gave %s", sn(q));
  set_detail(s, "never-recorded = complete (query, synchronize, stream wait); recorded on a new and the default stream "
             "and re-recorded: NOT_READY/OK, then OK after synchronize");
done:
  release_all(s);
  return rc;
}

/* Queue `count` device-to-device copies of `n` bytes between two buffers. */
static oa_status_t busy_work(suite_t *s, oa_stream_t *st, void *a, void *b, size_t n, int count) {
  for (int i = 0; i < count; i++) {
    oa_status_t e = d2d(s, st, (i & 1) ? a : b, (i & 1) ? b : a, n);
    if (e) return e;
  }
  return OA_OK;
}

static size_t busy_size(const suite_t *s) {
  size_t n = (size_t)8 << 20;
  if (s->props.memory_total && s->props.memory_total / 8 < n) n = (size_t)(s->props.memory_total / 8) & ~(size_t)4095;
  return n ? n : 4096;
}

int check_event_host_wait_timeout(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *e = NULL;
  void *a = NULL, *b = NULL;
  if (!(s->props.flags & OA_DEVICE_FLAG_ASYNC)) SKIP("synchronous device: work is complete when it is issued");
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  size_t n = busy_size(s);
  TRY(dev_alloc(s, n, 0, &a), "allocate");
  TRY(dev_alloc(s, n, 0, &b), "allocate");
  int count = 16;
  for (int attempt = 1; attempt <= 3; attempt++, count *= 4) {
    TRY(busy_work(s, st, a, b, n, count), "copy device to device");
    TRY(oa_event_record(s->dev, e, st), "event_record");
    uint64_t t0 = oa_platform_now_ns();
    oa_status_t q = oa_event_synchronize(s->dev, e, 1000000);
    double waited = (double)(oa_platform_now_ns() - t0) / 1e6;
    if (q == OA_ERR_TIMEOUT) {
      oa_status_t sq = oa_stream_query(s->dev, st), eq = oa_event_query(s->dev, e);
      if (sq && sq != OA_ERR_NOT_READY) FAIL("stream_query while busy: expected OK or NOT_READY, received %s", sn(sq));
      if (eq && eq != OA_ERR_NOT_READY) FAIL("event_query while busy: expected OK or NOT_READY, received %s", sn(eq));
      if (waited < 0.5 || waited > 1000.0)
        FAIL("a 1 ms wait returned TIMEOUT after %.3f ms", waited);
      if ((q = oa_event_synchronize(s->dev, e, OA_TIMEOUT_INFINITE)))
        FAIL("synchronize after the time-out: expected OK, received %s", sn(q));
      if ((q = oa_event_query(s->dev, e))) FAIL("query after synchronize: expected OK, received %s", sn(q));
      set_detail(s, "1 ms wait on %d queued copies of %zu bytes returned TIMEOUT after %.2f ms (attempt %d); the "
                 "infinite wait then OK", count, n, waited, attempt);
      goto done;
    }
    if (q) FAIL("synchronize(event, 1 ms): expected TIMEOUT or OK, received %s", sn(q));
    TRY(sync_stream(s, st), "stream_synchronize");
  }
  FAIL("a 1 ms wait never timed out, even with %d queued copies of %zu bytes", count / 4, n);
done:
  release_all(s);
  return rc;
}

int check_event_elapsed(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  oa_event_t *t0 = NULL, *t1 = NULL, *plain = NULL, *unrec = NULL;
  void *a = NULL, *b = NULL;
  float ms = -1.0f;
  oa_status_t q;
  if (!(s->props.flags & OA_DEVICE_FLAG_TIMING)) SKIP("the device does not claim TIMING");
  TRY(new_stream(s, &st), "stream_create");
  TRY(new_event(s, OA_EVENT_TIMING, &t0), "event_create(TIMING)");
  TRY(new_event(s, OA_EVENT_TIMING, &t1), "event_create(TIMING)");
  TRY(new_event(s, 0, &plain), "event_create");
  TRY(new_event(s, OA_EVENT_TIMING, &unrec), "event_create(TIMING)");
  size_t n = busy_size(s) / 4;
  TRY(dev_alloc(s, n, 0, &a), "allocate");
  TRY(dev_alloc(s, n, 0, &b), "allocate");
  uint64_t h0 = oa_platform_now_ns();
  TRY(oa_event_record(s->dev, t0, st), "event_record");
  TRY(busy_work(s, st, a, b, n, 8), "copy device to device");
  TRY(oa_event_record(s->dev, t1, st), "event_record");
  TRY(oa_event_record(s->dev, plain, st), "event_record");
  TRY(oa_event_synchronize(s->dev, t1, OA_TIMEOUT_INFINITE), "event_synchronize");
  TRY(oa_event_synchronize(s->dev, plain, OA_TIMEOUT_INFINITE), "event_synchronize");
  double host_ms = (double)(oa_platform_now_ns() - h0) / 1e6;
  if ((q = oa_event_elapsed_ms(s->dev, t0, t1, &ms))) FAIL("elapsed_ms(start, end): expected OK, received %s", sn(q));
  if (!(ms >= 0.0f) || !isfinite(ms) || (double)ms > host_ms + 50.0)
    FAIL("elapsed_ms = %g for work the host saw take %.3f ms", (double)ms, host_ms);
  float junk = 0.0f;
  if (!(q = oa_event_elapsed_ms(s->dev, t0, plain, &junk)))
    FAIL("elapsed_ms with an event created without OA_EVENT_TIMING succeeded (%g ms)", (double)junk);
  oa_status_t q2 = oa_event_elapsed_ms(s->dev, t0, unrec, &junk);
  if (!q2) FAIL("elapsed_ms with a never-recorded end event succeeded (%g ms)", (double)junk);
  set_detail(s, "elapsed %.3f ms for 8 copies of %zu bytes (host saw %.3f ms); without the timing flag: %s; "
             "never recorded: %s", (double)ms, n, host_ms, sn(q), sn(q2));
done:
  release_all(s);
  return rc;
}

int check_event_cross_stream_wait(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *sa = NULL, *sb = NULL;
  oa_event_t *e = NULL, *never = NULL;
  void *x = NULL, *y = NULL, *b1 = NULL, *b2 = NULL, *p1 = NULL, *p2 = NULL;
  rng_t r = rng_for(s, "event.cross_stream_wait");
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  if (!HAS(s, stream_create)) SKIP("the device cannot create streams");
  TRY(new_stream(s, &sa), "stream_create");
  TRY(new_stream(s, &sb), "stream_create");
  TRY(new_event(s, 0, &e), "event_create");
  TRY(new_event(s, 0, &never), "event_create");
  const size_t n = 256 * 1024;
  uint8_t *v0 = (uint8_t *)host_alloc(s, n), *v1 = (uint8_t *)host_alloc(s, n), *out = (uint8_t *)host_alloc(s, n);
  if (!v0 || !v1 || !out) FAIL("out of host memory");
  fill_bytes(&r, v0, n);
  fill_bytes(&r, v1, n);
  size_t busy = busy_size(s);
  TRY(dev_alloc(s, n, 0, &x), "allocate");
  TRY(dev_alloc(s, n, 0, &y), "allocate");
  TRY(dev_alloc(s, busy, 0, &b1), "allocate");
  TRY(dev_alloc(s, busy, 0, &b2), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p1), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p2), "allocate");
  for (int round = 0; round < 2; round++) {
    TRY(h2d(s, sa, x, v0, n), "copy host to device");
    TRY(sync_stream(s, sa), "stream_synchronize");
    /* stream A: keep busy, then write x, then record e (an independent copy in between) */
    TRY(busy_work(s, sa, b1, b2, busy, round ? 16 : 4), "copy device to device");
    TRY(h2d(s, sa, x, v1, n), "copy host to device");
    TRY(d2d(s, sa, p1, p2, 4096), "copy device to device");
    TRY(oa_event_record(s->dev, e, sa), "event_record");
    /* stream B: wait for e, then read x */
    TRY(oa_stream_wait_event(s->dev, sb, e), "stream_wait_event");
    TRY(d2d(s, sb, p2, p1, 4096), "copy device to device");
    TRY(d2d(s, sb, y, x, n), "copy device to device");
    TRY(sync_stream(s, sb), "stream_synchronize(B)");
    TRY(d2h(s, sb, out, y, n), "copy device to host");
    TRY(sync_stream(s, sb), "stream_synchronize(B)");
    if (memcmp(out, v1, n))
      FAIL("stream B read x before stream A's write that precedes the event it waited for (%s)",
           memcmp(out, v0, n) ? "mixed data" : "old data");
    TRY(sync_stream(s, sa), "stream_synchronize(A)");
  }
  oa_status_t q;
  if ((q = oa_stream_wait_event(s->dev, sb, never))) FAIL("stream_wait_event(never-recorded event): received %s", sn(q));
  if ((q = sync_stream(s, sb))) FAIL("a stream waiting for a never-recorded event: synchronize gave %s", sn(q));
  set_detail(s, "stream B waiting for an event recorded on a busy stream A read A's data (%zu bytes, 2 rounds); a wait "
             "for a never-recorded event does not block", n);
done:
  release_all(s);
  return rc;
}

/* A small valid float32 call the device claims (relu, else add, else linear). */
static int simple_failing_call(suite_t *s, oa_tensor_t *ts, oa_tensor_t **ptrs, oa_op_call_t *call, void *buf) {
  static const double one = 1.0;
  for (int i = 0; i < 3; i++) f32_tensor(&ts[i], buf, 16, "t");
  memset(call, 0, sizeof *call);
  for (int i = 0; i < 3; i++) ptrs[i] = &ts[i];
  call->inputs = ptrs;
  call->outputs = ptrs + 2;
  call->n_outputs = 1;
  if (claims_f32(s, "relu")) {
    call->op = "relu";
    call->n_inputs = 1;
    call->outputs = ptrs + 1;
  } else if (claims_f32(s, "add")) {
    call->op = "add";
    call->n_inputs = 2;
    call->floats = &one;
    call->n_floats = 1;
  } else {
    return 0;
  }
  return 1;
}

/* After a failure on `bad`: the stream, an event recorded on it, and a stream waiting for that
 * event all report a failure. */
static int verify_poisoned(suite_t *s, oa_stream_t *bad, const char *how, void *p1, void *p2, char *note, size_t note_n) {
  int rc = R_PASS;
  oa_stream_t *other = NULL;
  oa_event_t *e = NULL, *e2 = NULL, *e3 = NULL;
  oa_status_t q, qs, qe, qw;
  if ((qs = oa_stream_synchronize(s->dev, bad)) == OA_OK) FAIL("%s: stream_synchronize afterwards returned OK", how);
  if (qs == OA_ERR_NOT_READY || qs == OA_ERR_TIMEOUT) FAIL("%s: stream_synchronize returned %s", how, sn(qs));
  TRY(new_event(s, 0, &e), "event_create");
  TRY(oa_event_record(s->dev, e, bad), "event_record");
  qe = oa_event_synchronize(s->dev, e, (uint64_t)30 * 1000000000u);
  if (qe == OA_OK) FAIL("%s: an event recorded on the stream afterwards reports OK (the failure was forgotten)", how);
  if (qe == OA_ERR_TIMEOUT) FAIL("%s: an event recorded afterwards never completed", how);
  if ((q = oa_event_query(s->dev, e)) != qe) FAIL("%s: event_query %s != event_synchronize %s", how, sn(q), sn(qe));
  /* a later valid copy does not clear it */
  (void)d2d(s, bad, p1, p2, 64);
  TRY(new_event(s, 0, &e3), "event_create");
  TRY(oa_event_record(s->dev, e3, bad), "event_record");
  if (oa_event_synchronize(s->dev, e3, (uint64_t)30 * 1000000000u) == OA_OK)
    FAIL("%s: an event recorded after further work reports OK (the failure is not sticky)", how);
  /* another stream waiting for the event fails too */
  TRY(new_stream(s, &other), "stream_create");
  TRY(new_event(s, 0, &e2), "event_create");
  TRY(oa_stream_wait_event(s->dev, other, e), "stream_wait_event");
  (void)d2d(s, other, p2, p1, 64); /* may already report the failure */
  TRY(oa_event_record(s->dev, e2, other), "event_record");
  qw = oa_event_synchronize(s->dev, e2, (uint64_t)30 * 1000000000u);
  if (qw == OA_OK) FAIL("%s: a stream waiting for the failed event reports OK", how);
  if ((q = oa_stream_synchronize(s->dev, other)) == OA_OK) FAIL("%s: the waiting stream synchronizes OK", how);
  snprintf(note, note_n, "%s: stream %s, event %s, waiting stream %s", how, sn(qs), sn(qe), sn(qw));
done:
  return rc;
}

int check_event_sticky_failure(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *st = NULL;
  void *buf = NULL, *p1 = NULL, *p2 = NULL;
  char note1[256] = "", note2[256] = "";
  if (!(s->props.flags & OA_DEVICE_FLAG_EVENTS)) SKIP("the device does not claim EVENTS");
  if (!HAS(s, stream_create)) SKIP("the device cannot create streams (failing the default stream would poison it)");
  TRY(dev_alloc(s, 4096, 0, &buf), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p1), "allocate");
  TRY(dev_alloc(s, 4096, 0, &p2), "allocate");
  int variants = 0;
  /* 1: execute_op with a plan the device never prepared (a zeroed plan) */
  oa_tensor_t ts[3];
  oa_tensor_t *ptrs[3];
  oa_op_call_t call;
  if (simple_failing_call(s, ts, ptrs, &call, buf)) {
    oa_op_plan_t zero;
    oa_diag_t diag;
    memset(&zero, 0, sizeof zero);
    oa_diag_clear(&diag);
    TRY(new_stream(s, &st), "stream_create");
    oa_status_t q = oa_device_execute_op(s->dev, st, &call, &zero, NULL, &diag);
    char how[160];
    snprintf(how, sizeof how, "unprepared %s (execute returned %s)", call.op, sn(q));
    if ((rc = verify_poisoned(s, st, how, p1, p2, note1, sizeof note1)) != R_PASS) goto done;
    variants++;
  }
  /* 2: a copy from an address the device never handed out (devices whose memory the host cannot
   * address must range-check it) */
  if (!(s->props.flags & OA_DEVICE_FLAG_HOST_VISIBLE)) {
    uint64_t total = s->props.memory_total ? s->props.memory_total : ((uint64_t)1 << 32);
    void *bogus = (void *)((uintptr_t)p2 + (uintptr_t)(total * 2 + 4096));
    oa_stream_t *st2 = NULL;
    TRY(new_stream(s, &st2), "stream_create");
    oa_status_t q = d2d(s, st2, p1, bogus, 64);
    char how[160];
    snprintf(how, sizeof how, "copy from an address never handed out (copy returned %s)", sn(q));
    if ((rc = verify_poisoned(s, st2, how, p1, p2, note2, sizeof note2)) != R_PASS) goto done;
    variants++;
  }
  if (!variants) SKIP("no way to provoke a failure: the device claims neither relu nor add and its memory is host-visible");
  set_detail(s, "%s%s%s", note1, note1[0] && note2[0] ? "; " : "", note2);
done:
  release_all(s);
  return rc;
}

int check_device_synchronize(suite_t *s) {
  int rc = R_PASS;
  oa_stream_t *sa = NULL, *sb = NULL;
  oa_event_t *ea = NULL, *eb = NULL;
  void *d[3] = {NULL, NULL, NULL};
  rng_t r = rng_for(s, "device.synchronize");
  oa_status_t q;
  if (!HAS(s, synchronize)) {
    if (s->props.flags & OA_DEVICE_FLAG_ASYNC) FAIL("an ASYNC device without a synchronize slot");
    SKIP("the device has no synchronize slot");
  }
  const size_t n = 1 << 20;
  uint8_t *h[3], *out = (uint8_t *)host_alloc(s, n);
  for (int i = 0; i < 3; i++) {
    h[i] = (uint8_t *)host_alloc(s, n);
    if (!h[i]) FAIL("out of host memory");
    fill_bytes(&r, h[i], n);
    TRY(dev_alloc(s, n, 0, &d[i]), "allocate");
  }
  if (!out) FAIL("out of host memory");
  TRY(new_stream(s, &sa), "stream_create");
  TRY(new_stream(s, &sb), "stream_create");
  int events = (s->props.flags & OA_DEVICE_FLAG_EVENTS) != 0;
  if (events) {
    TRY(new_event(s, 0, &ea), "event_create");
    TRY(new_event(s, 0, &eb), "event_create");
  }
  oa_stream_t *where[3] = {sa, sb, NULL};
  for (int i = 0; i < 3; i++) TRY(h2d(s, where[i], d[i], h[i], n), "copy host to device");
  if (events) {
    TRY(oa_event_record(s->dev, ea, sa), "event_record");
    TRY(oa_event_record(s->dev, eb, sb), "event_record");
  }
  if ((q = oa_device_synchronize(s->dev))) FAIL("synchronize: expected OK, received %s", sn(q));
  if (HAS(s, stream_query)) {
    for (int i = 0; i < 3; i++)
      if ((q = oa_stream_query(s->dev, where[i]))) FAIL("stream_query after synchronize: expected OK, received %s", sn(q));
  }
  if (events) {
    if ((q = oa_event_query(s->dev, ea)) || (q = oa_event_query(s->dev, eb)))
      FAIL("event_query after synchronize: expected OK, received %s", sn(q));
  }
  for (int i = 0; i < 3; i++) {
    TRY(d2h(s, where[i], out, d[i], n), "copy device to host");
    TRY(sync_stream(s, where[i]), "stream_synchronize");
    if (memcmp(out, h[i], n)) FAIL("data copied on stream %d was not complete after synchronize", i);
  }
  set_detail(s, "after synchronize, work queued on two new streams and the default stream is complete%s",
             events ? " (streams and events query OK)" : "");
done:
  release_all(s);
  return rc;
}

