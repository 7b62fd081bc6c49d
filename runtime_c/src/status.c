/* Status names, diagnostics and a small dependency-free formatter (the core has no stdio). */
#include "openaccel/status.h"

#include <stdint.h>
#include <string.h>

const char *oa_status_name(oa_status_t status) {
  switch (status) {
    case OA_OK: return "OK";
    case OA_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case OA_ERR_INVALID_PROGRAM: return "INVALID_PROGRAM";
    case OA_ERR_UNSUPPORTED_VERSION: return "UNSUPPORTED_VERSION";
    case OA_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case OA_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case OA_ERR_NOT_FOUND: return "NOT_FOUND";
    case OA_ERR_NOT_READY: return "NOT_READY";
    case OA_ERR_TIMEOUT: return "TIMEOUT";
    case OA_ERR_DEVICE: return "DEVICE";
    case OA_ERR_IO: return "IO";
    case OA_ERR_INTERNAL: return "INTERNAL";
    case OA_ERR_CHECK_FAILED: return "CHECK_FAILED";
  }
  return "UNKNOWN";
}

void oa_diag_clear(oa_diag_t *diag) {
  if (!diag) return;
  diag->status = OA_OK;
  diag->message[0] = '\0';
}

typedef struct sink {
  char *buf;
  size_t size;
  size_t len;
} sink_t;

static void put_char(sink_t *s, char c) {
  if (s->size && s->len + 1 < s->size) s->buf[s->len] = c;
  s->len++;
}

static void put_str(sink_t *s, const char *str) {
  if (!str) str = "(null)";
  while (*str) put_char(s, *str++);
}

static void put_unsigned(sink_t *s, unsigned long long v, unsigned base) {
  char tmp[24];
  int n = 0;
  do {
    unsigned d = (unsigned)(v % base);
    tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    v /= base;
  } while (v && n < (int)sizeof tmp);
  while (n) put_char(s, tmp[--n]);
}

static void put_signed(sink_t *s, long long v) {
  if (v < 0) {
    put_char(s, '-');
    put_unsigned(s, 0ULL - (unsigned long long)v, 10);
  } else {
    put_unsigned(s, (unsigned long long)v, 10);
  }
}

/* %g-like output with `prec` significant digits; enough for error reports. */
static void put_double(sink_t *s, double v, int prec) {
  if (v != v) { put_str(s, "nan"); return; }
  if (v < 0 || (v == 0 && 1.0 / v < 0)) { put_char(s, '-'); v = -v; }
  if (v > 1.7976931348623157e308) { put_str(s, "inf"); return; }
  if (v == 0) { put_char(s, '0'); return; }
  if (prec <= 0) prec = 6;
  if (prec > 17) prec = 17;
  int exp10 = 0;
  double m = v;
  while (m >= 10.0) { m /= 10.0; exp10++; }
  while (m < 1.0) { m *= 10.0; exp10--; }
  /* round the mantissa to prec digits */
  double scale = 1.0;
  for (int i = 1; i < prec; i++) scale *= 10.0;
  unsigned long long digits = (unsigned long long)(m * scale + 0.5);
  unsigned long long limit = (unsigned long long)(scale * 10.0);
  if (digits >= limit) { digits /= 10; exp10++; }
  char dig[20];
  int nd = 0;
  for (int i = 0; i < prec; i++) {
    dig[prec - 1 - i] = (char)('0' + digits % 10);
    digits /= 10;
  }
  nd = prec;
  while (nd > 1 && dig[nd - 1] == '0') nd--; /* strip trailing zeros like %g */
  if (exp10 < -4 || exp10 >= prec) {
    put_char(s, dig[0]);
    if (nd > 1) {
      put_char(s, '.');
      for (int i = 1; i < nd; i++) put_char(s, dig[i]);
    }
    put_char(s, 'e');
    put_char(s, exp10 < 0 ? '-' : '+');
    int e = exp10 < 0 ? -exp10 : exp10;
    if (e < 10) put_char(s, '0');
    put_unsigned(s, (unsigned long long)e, 10);
  } else if (exp10 >= 0) {
    for (int i = 0; i <= exp10; i++) put_char(s, i < nd ? dig[i] : '0');
    if (nd > exp10 + 1) {
      put_char(s, '.');
      for (int i = exp10 + 1; i < nd; i++) put_char(s, dig[i]);
    }
  } else {
    put_str(s, "0.");
    for (int i = 0; i < -exp10 - 1; i++) put_char(s, '0');
    for (int i = 0; i < nd; i++) put_char(s, dig[i]);
  }
}

size_t oa_vformat(char *buf, size_t size, const char *fmt, va_list ap) {
  sink_t s = {buf, size, 0};
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') { put_char(&s, *p); continue; }
    p++;
    int prec = -1;
    while (*p >= '0' && *p <= '9') p++; /* width: ignored */
    if (*p == '.') {
      prec = 0;
      p++;
      while (*p >= '0' && *p <= '9') prec = prec * 10 + (*p++ - '0');
    }
    int longs = 0, size_t_mod = 0;
    while (*p == 'l') { longs++; p++; }
    if (*p == 'z') { size_t_mod = 1; p++; }
    switch (*p) {
      case 's': put_str(&s, va_arg(ap, const char *)); break;
      case 'c': put_char(&s, (char)va_arg(ap, int)); break;
      case 'd':
      case 'i':
        if (size_t_mod) put_signed(&s, (long long)va_arg(ap, ptrdiff_t));
        else if (longs >= 2) put_signed(&s, va_arg(ap, long long));
        else if (longs == 1) put_signed(&s, va_arg(ap, long));
        else put_signed(&s, va_arg(ap, int));
        break;
      case 'u':
      case 'x':
        {
          unsigned base = *p == 'x' ? 16u : 10u;
          unsigned long long v;
          if (size_t_mod) v = va_arg(ap, size_t);
          else if (longs >= 2) v = va_arg(ap, unsigned long long);
          else if (longs == 1) v = va_arg(ap, unsigned long);
          else v = va_arg(ap, unsigned int);
          put_unsigned(&s, v, base);
        }
        break;
      case 'p':
        put_str(&s, "0x");
        put_unsigned(&s, (unsigned long long)(uintptr_t)va_arg(ap, void *), 16);
        break;
      case 'g':
      case 'f':
      case 'e':
        put_double(&s, va_arg(ap, double), prec < 0 ? 6 : prec);
        break;
      case '%': put_char(&s, '%'); break;
      case '\0': p--; break;
      default: put_char(&s, '%'); put_char(&s, *p); break;
    }
  }
  if (size) buf[s.len < size ? s.len : size - 1] = '\0';
  return s.len < size ? s.len : (size ? size - 1 : 0);
}

size_t oa_format(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = oa_vformat(buf, size, fmt, ap);
  va_end(ap);
  return n;
}

#ifdef OA_NO_MESSAGES
oa_status_t oa_diag_fail(oa_diag_t *diag, oa_status_t status, const char *fmt, ...) {
  (void)fmt;
  if (diag) diag->status = status;
  return status;
}
oa_status_t oa_diag_context(oa_diag_t *diag, oa_status_t status, const char *fmt, ...) {
  (void)fmt;
  if (diag) diag->status = status;
  return status;
}
#else
/* Write "new: old" into the diag, where `old` is what it already held. */
static void prepend(oa_diag_t *diag, const char *fmt, va_list ap) {
  char prefix[OA_DIAG_MESSAGE_BYTES];
  size_t n = oa_vformat(prefix, sizeof prefix, fmt, ap);
  size_t old = strlen(diag->message);
  if (old == 0) {
    memcpy(diag->message, prefix, n + 1);
    return;
  }
  size_t sep = 2;
  if (n + sep >= OA_DIAG_MESSAGE_BYTES) return; /* no room: keep the inner, more precise text */
  size_t keep = old;
  if (n + sep + keep >= OA_DIAG_MESSAGE_BYTES) keep = OA_DIAG_MESSAGE_BYTES - 1 - n - sep;
  memmove(diag->message + n + sep, diag->message, keep);
  diag->message[n + sep + keep] = '\0';
  memcpy(diag->message, prefix, n);
  diag->message[n] = ':';
  diag->message[n + 1] = ' ';
}

oa_status_t oa_diag_fail(oa_diag_t *diag, oa_status_t status, const char *fmt, ...) {
  if (!diag) return status;
  diag->message[0] = '\0';
  va_list ap;
  va_start(ap, fmt);
  prepend(diag, fmt, ap);
  va_end(ap);
  diag->status = status;
  return status;
}

oa_status_t oa_diag_context(oa_diag_t *diag, oa_status_t status, const char *fmt, ...) {
  if (!diag) return status;
  va_list ap;
  va_start(ap, fmt);
  prepend(diag, fmt, ap);
  va_end(ap);
  if (diag->status == OA_OK) diag->status = status;
  return status;
}
#endif
