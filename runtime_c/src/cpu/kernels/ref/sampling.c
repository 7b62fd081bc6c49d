/* Reference spatial sampling: grid_sampler_2d and grid_sampler_3d (float32), F.grid_sample.
 *
 * PyTorch runs the 2-D op with its vectorized CPU kernel (GridSamplerKernel.cpp) and the 3-D op
 * with scalar code (GridSampler.cpp, GridSampler.h); the two round differently, so each is
 * followed here in its own float arithmetic, one IEEE operation per statement:
 *
 * 2-D, per spatial dim of size S:
 *   unnormalize: align_corners (g + 1) * ((S - 1) / 2), else (g + 1) * (S / 2) - 0.5;
 *   border: clip to [0, S - 1] with NaN -> 0 (max(v, 0) returns 0 for NaN);
 *   reflection: reflect |v - low| by the span 2 * (S - 1) (low 0) or 2 * S (low -0.5): extra =
 *     |v - low| - trunc(|v - low| / twice_span) * twice_span, min(extra, twice_span - extra) + low
 *     (0 when align_corners and S <= 1), then clip;
 *   bilinear: floor, weights nw = (1 - dy) (1 - dx), ne, sw, se; a tap outside the input reads 0
 *     and out = v_nw * nw + v_ne * ne + v_sw * sw + v_se * se;
 *   nearest: round half to even;
 *   bicubic: floor of the unnormalized coordinate, cubic convolution coefficients (A = -0.75) of
 *     the fraction, each of the 4 x 4 taps padded on its own (clip / reflect) and truncated to an
 *     index; the 4 taps of each row combined, then the rows.
 *   Float -> index conversions follow the x86 kernel: out of int32 range or NaN reads as outside.
 * 3-D, per dim: ((g + 1) / 2) * (S - 1) or ((g + 1) * S - 1) / 2; border clip NaN -> S - 1
 *   (std::min(S - 1, std::max(v, 0))); reflection by fmod about 0 / -0.5 with the span S - 1 / S
 *   (a flip count outside int range counts as even, as x86 converts it to INT_MIN);
 *   trilinear: the 8 corner weights as products of distances, corners outside the input skipped,
 *   out = sum in tnw, tne, tsw, tse, bnw, bne, bsw, bse order; nearest: round half to even. A
 *   non-finite or out-of-int-range coordinate reads as outside. */
#include <math.h>
#include <stdint.h>

#include "kernels/kernel.h"

enum { MODE_BILINEAR, MODE_NEAREST, MODE_BICUBIC };
enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECTION };

/* plan->params layout */
enum { P_N, P_C, P_D, P_H, P_W, P_OD, P_OH, P_OW, P_MODE, P_PAD, P_ALIGN };

static int64_t iarg(const oa_op_call_t *call, uint32_t i) { return i < call->n_ints ? call->ints[i] : 0; }

_Static_assert(OA_ARG_GRID_SAMPLER_3D_INTERPOLATION_MODE == OA_ARG_GRID_SAMPLER_2D_INTERPOLATION_MODE &&
                   OA_ARG_GRID_SAMPLER_3D_PADDING_MODE == OA_ARG_GRID_SAMPLER_2D_PADDING_MODE &&
                   OA_ARG_GRID_SAMPLER_3D_ALIGN_CORNERS == OA_ARG_GRID_SAMPLER_2D_ALIGN_CORNERS,
               "grid_sampler_2d and grid_sampler_3d no longer share their argument layout in opset.py");

/* spatial = 2 or 3: input [N, C, *S], grid [N, *O, spatial], output [N, C, *O] */
static oa_status_t grid_prepare(const oa_op_call_t *call, oa_op_plan_t *plan, int32_t spatial, oa_diag_t *diag) {
  oa_status_t st;
  if ((st = oa_check_arity(call, 2, 2, 1, 3, 0, diag))) return st;
  if ((st = oa_check_present(call, 0, "input 0 (input)", diag)) ||
      (st = oa_check_present(call, 1, "input 1 (grid)", diag)))
    return st;
  const oa_tensor_t *x = call->inputs[0], *g = call->inputs[1], *y = call->outputs[0];
  if ((st = oa_check_dtype(call, x, OA_DT_F32, "input 0 (input)", diag)) ||
      (st = oa_check_same_dtype(call, g, x, "input 1 (grid)", diag)) ||
      (st = oa_check_same_dtype(call, y, x, "output 0", diag)))
    return st;
  if ((st = oa_check_ndim(call, x, spatial + 2, spatial + 2, "input 0 (input)", diag)) ||
      (st = oa_check_ndim(call, g, spatial + 2, spatial + 2, "input 1 (grid)", diag)))
    return st;
  int64_t want[5];
  want[0] = x->shape[0];
  for (int32_t d = 1; d <= spatial; d++) want[d] = g->shape[d];
  want[spatial + 1] = spatial;
  if ((st = oa_check_shape(call, g, want, spatial + 2, "input 1 (grid)", diag))) return st;
  for (int32_t d = 2; d < spatial + 2; d++)
    if (x->shape[d] < 1) {
      char s[128];
      return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "input 0 (input) ('%s'): spatial dims of %s must be non-empty",
                          x->name, oa_shape_str(x, s, sizeof s));
    }
  want[1] = x->shape[1];
  for (int32_t d = 1; d <= spatial; d++) want[d + 1] = g->shape[d];
  if ((st = oa_check_shape(call, y, want, spatial + 2, "output 0", diag))) return st;
  int64_t mode = iarg(call, OA_ARG_GRID_SAMPLER_2D_INTERPOLATION_MODE);
  int64_t pad = iarg(call, OA_ARG_GRID_SAMPLER_2D_PADDING_MODE);
  int64_t align = iarg(call, OA_ARG_GRID_SAMPLER_2D_ALIGN_CORNERS);
  int64_t max_mode = spatial == 2 ? MODE_BICUBIC : MODE_NEAREST;
  if (mode < 0 || mode > max_mode)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument interpolation_mode = %lld is out of range (expected 0 to %lld: bilinear, nearest%s)",
                        (long long)mode, (long long)max_mode, spatial == 2 ? ", bicubic" : "");
  if (pad < 0 || pad > PAD_REFLECTION)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM,
                        "argument padding_mode = %lld is out of range (expected 0 to 2: zeros, border, reflection)",
                        (long long)pad);
  if (align != 0 && align != 1)
    return oa_diag_fail(diag, OA_ERR_INVALID_PROGRAM, "argument align_corners = %lld is out of range (expected 0 or 1)",
                        (long long)align);
  int64_t *p = plan->params;
  p[P_N] = x->shape[0];
  p[P_C] = x->shape[1];
  p[P_D] = spatial == 3 ? x->shape[2] : 1;
  p[P_H] = x->shape[spatial];
  p[P_W] = x->shape[spatial + 1];
  p[P_OD] = spatial == 3 ? g->shape[1] : 1;
  p[P_OH] = g->shape[spatial - 1];
  p[P_OW] = g->shape[spatial];
  p[P_MODE] = mode;
  p[P_PAD] = pad;
  p[P_ALIGN] = align;
  return OA_OK;
}

/* ---- grid_sampler_2d (the vectorized kernel's arithmetic) --------------------------------------- */

typedef struct {
  int64_t size;
  float max_val, scaling, low, twice_span;
  int align, pad, empty;
} loc2d_t;

static loc2d_t loc2d(int64_t size, int align, int pad) {
  loc2d_t l;
  l.size = size;
  l.align = align;
  l.pad = pad;
  l.max_val = (float)(size - 1);
  if (align) {
    l.scaling = (float)(size - 1) / 2.0f;
    l.low = 0.0f;
    l.twice_span = (float)(size - 1) * 2.0f;
    l.empty = size <= 1;
  } else {
    l.scaling = (float)size / 2.0f;
    l.low = -0.5f;
    l.twice_span = (float)size * 2.0f;
    l.empty = size <= 0;
  }
  return l;
}

static float unnormalize2d(const loc2d_t *l, float g) {
  float t = g + 1.0f;
  t = t * l->scaling;
  if (!l->align) t = t - 0.5f;
  return t;
}

/* min(max_val, max(v, 0)) with x86 max/min operand order: NaN -> 0 */
static float clip2d(const loc2d_t *l, float v) {
  float r = v > 0.0f ? v : 0.0f;
  return r < l->max_val ? r : l->max_val;
}

static float reflect2d(const loc2d_t *l, float v) {
  if (l->align && l->empty) return 0.0f;
  float a = fabsf(v - l->low);
  float flips = truncf(a / l->twice_span);
  float prod = flips * l->twice_span;
  float extra = a - prod;
  float other = l->twice_span - extra;
  float m = (extra != extra || other != other) ? NAN : (extra < other ? extra : other);
  return m + l->low;
}

/* padding applied to an unnormalized coordinate (compute_coordinates) */
static float pad2d(const loc2d_t *l, float v) {
  if (l->pad == PAD_BORDER) return clip2d(l, v);
  if (l->pad == PAD_REFLECTION) return clip2d(l, reflect2d(l, v));
  return v;
}

/* convert_to_int_of_same_size: truncation; NaN and values outside int32 give INT32_MIN (x86) */
static int64_t to_index(float f) {
  if (f >= -2147483648.0f && f < 2147483648.0f) return (int64_t)(int32_t)f;
  return INT32_MIN;
}

/* input[iy][ix] of a plane, or 0 outside it */
static float tap2d(const float *plane, int64_t h, int64_t w, int64_t iy, int64_t ix) {
  return (iy >= 0 && iy < h && ix >= 0 && ix < w) ? plane[iy * w + ix] : 0.0f;
}

/* ((A x - 5 A) x + 8 A) x - 4 A and ((A + 2) x - (A + 3)) x x + 1, one rounding per operation */
static float cubic_far(float x, float a) {
  float t = a * x;
  t = t - 5.0f * a;
  t = t * x;
  t = t + 8.0f * a;
  t = t * x;
  return t - 4.0f * a;
}
static float cubic_near(float x, float a) {
  float t = (a + 2.0f) * x;
  t = t - (a + 3.0f);
  t = t * x;
  t = t * x;
  return t + 1.0f;
}

static void cubic_coefficients(float c[4], float t) {
  const float A = -0.75f;
  c[0] = cubic_far(t + 1.0f, A);
  c[1] = cubic_near(t, A);
  c[2] = cubic_near(1.0f - t, A);
  c[3] = cubic_far(2.0f - t, A);
}

oa_status_t oa_ref_grid_sampler_2d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                           oa_diag_t *diag) {
  (void)env;
  return grid_prepare(call, plan, 2, diag);
}

oa_status_t oa_ref_grid_sampler_2d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                       const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_n = p[P_N], c_n = p[P_C], h = p[P_H], w = p[P_W], oh_n = p[P_OH], ow_n = p[P_OW];
  const int mode = (int)p[P_MODE], pad = (int)p[P_PAD], align = (int)p[P_ALIGN];
  const loc2d_t lw = loc2d(w, align, pad), lh = loc2d(h, align, pad);
  const float *x = (const float *)call->inputs[0]->data, *grid = (const float *)call->inputs[1]->data;
  float *y = (float *)call->outputs[0]->data;
  const int64_t plane = h * w, oplane = oh_n * ow_n;
  for (int64_t n = 0; n < n_n; n++) {
    for (int64_t o = 0; o < oplane; o++) {
      float gx = grid[(n * oplane + o) * 2], gy = grid[(n * oplane + o) * 2 + 1];
      const float *xn = x + n * c_n * plane;
      float *yn = y + n * c_n * oplane + o;
      if (mode == MODE_BICUBIC) {
        float ux = unnormalize2d(&lw, gx), uy = unnormalize2d(&lh, gy);
        float fx = floorf(ux), fy = floorf(uy);
        float cx[4], cy[4];
        cubic_coefficients(cx, ux - fx);
        cubic_coefficients(cy, uy - fy);
        int64_t ix[4], iy[4];
        for (int k = 0; k < 4; k++) {
          ix[k] = to_index(pad2d(&lw, fx + (float)(k - 1)));
          iy[k] = to_index(pad2d(&lh, fy + (float)(k - 1)));
        }
        for (int64_t c = 0; c < c_n; c++) {
          const float *xp = xn + c * plane;
          float rows[4];
          for (int r = 0; r < 4; r++) {
            float t0 = cx[0] * tap2d(xp, h, w, iy[r], ix[0]), t1 = cx[1] * tap2d(xp, h, w, iy[r], ix[1]);
            float t2 = cx[2] * tap2d(xp, h, w, iy[r], ix[2]), t3 = cx[3] * tap2d(xp, h, w, iy[r], ix[3]);
            float s = t0 + t1;
            s = s + t2;
            rows[r] = s + t3;
          }
          float r0 = cy[0] * rows[0], r1 = cy[1] * rows[1], r2 = cy[2] * rows[2], r3 = cy[3] * rows[3];
          float s = r0 + r1;
          s = s + r2;
          yn[c * oplane] = s + r3;
        }
        continue;
      }
      float ux = pad2d(&lw, unnormalize2d(&lw, gx)), uy = pad2d(&lh, unnormalize2d(&lh, gy));
      if (mode == MODE_NEAREST) {
        int64_t ix = to_index(nearbyintf(ux)), iy = to_index(nearbyintf(uy));
        for (int64_t c = 0; c < c_n; c++) yn[c * oplane] = tap2d(xn + c * plane, h, w, iy, ix);
        continue;
      }
      float fx = floorf(ux), fy = floorf(uy);
      float dw = ux - fx, de = 1.0f - dw, dn = uy - fy, ds = 1.0f - dn;
      float nw = ds * de, ne = ds * dw, sw = dn * de, se = dn * dw;
      int64_t ixw = to_index(fx), iyn = to_index(fy), ixe = ixw + 1, iys = iyn + 1;
      for (int64_t c = 0; c < c_n; c++) {
        const float *xp = xn + c * plane;
        float a = tap2d(xp, h, w, iyn, ixw) * nw, b = tap2d(xp, h, w, iyn, ixe) * ne;
        float d = tap2d(xp, h, w, iys, ixw) * sw, e = tap2d(xp, h, w, iys, ixe) * se;
        float s = a + b;
        s = s + d;
        yn[c * oplane] = s + e;
      }
    }
  }
  return OA_OK;
}

/* ---- grid_sampler_3d (the scalar kernel's arithmetic) --------------------------------------- */

static float reflect3d(float v, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.0f;
  float mn = (float)twice_low / 2.0f, span = (float)(twice_high - twice_low) / 2.0f;
  float a = fabsf(v - mn);
  float extra = fmodf(a, span);
  float q = floorf(a / span);
  /* (int)q: outside int range (or NaN) x86 gives INT_MIN, an even count */
  int64_t flips = (q >= -2147483648.0f && q < 2147483648.0f) ? (int64_t)q : 0;
  if (flips % 2 == 0) return extra + mn;
  float t = span - extra;
  return t + mn;
}

/* std::min((float)(size - 1), std::max(v, 0.f)): NaN -> size - 1 */
static float clip3d(float v, int64_t size) {
  float lo = v < 0.0f ? 0.0f : v;
  float hi = (float)(size - 1);
  return lo < hi ? lo : hi;
}

static float source_index3d(float g, int64_t size, int pad, int align) {
  float v;
  if (align) {
    v = g + 1.0f;
    v = v / 2.0f;
    v = v * (float)(size - 1);
  } else {
    v = g + 1.0f;
    v = v * (float)size;
    v = v - 1.0f;
    v = v / 2.0f;
  }
  if (pad == PAD_BORDER) {
    v = clip3d(v, size);
  } else if (pad == PAD_REFLECTION) {
    v = align ? reflect3d(v, 0, 2 * (size - 1)) : reflect3d(v, -1, 2 * size - 1);
    v = clip3d(v, size);
  }
  return v;
}

/* floor / round to an index; non-finite or out of int range -> far outside (-100, as PyTorch's
 * safe_downgrade_to_int_range) */
static int64_t index3d(float f) { return (f >= -2147483648.0f && f < 2147483647.0f) ? (int64_t)f : -100; }

oa_status_t oa_ref_grid_sampler_3d_prepare(const oa_op_call_t *call, const oa_kernel_env_t *env, oa_op_plan_t *plan,
                                           oa_diag_t *diag) {
  (void)env;
  return grid_prepare(call, plan, 3, diag);
}

oa_status_t oa_ref_grid_sampler_3d_run(const oa_op_call_t *call, const oa_op_plan_t *plan, void *scratch,
                                       const oa_kernel_env_t *env, oa_diag_t *diag) {
  (void)scratch;
  (void)env;
  (void)diag;
  const int64_t *p = plan->params;
  const int64_t n_n = p[P_N], c_n = p[P_C], d_n = p[P_D], h = p[P_H], w = p[P_W];
  const int mode = (int)p[P_MODE], pad = (int)p[P_PAD], align = (int)p[P_ALIGN];
  const float *x = (const float *)call->inputs[0]->data, *grid = (const float *)call->inputs[1]->data;
  float *y = (float *)call->outputs[0]->data;
  const int64_t plane = d_n * h * w, oplane = p[P_OD] * p[P_OH] * p[P_OW];
  for (int64_t n = 0; n < n_n; n++) {
    for (int64_t o = 0; o < oplane; o++) {
      const float *gp = grid + (n * oplane + o) * 3;
      float ix = source_index3d(gp[0], w, pad, align), iy = source_index3d(gp[1], h, pad, align);
      float iz = source_index3d(gp[2], d_n, pad, align);
      const float *xn = x + n * c_n * plane;
      float *yn = y + n * c_n * oplane + o;
      if (mode == MODE_NEAREST) {
        int64_t jx = index3d(nearbyintf(ix)), jy = index3d(nearbyintf(iy)), jz = index3d(nearbyintf(iz));
        int inside = jx >= 0 && jx < w && jy >= 0 && jy < h && jz >= 0 && jz < d_n;
        for (int64_t c = 0; c < c_n; c++) yn[c * oplane] = inside ? xn[c * plane + (jz * h + jy) * w + jx] : 0.0f;
        continue;
      }
      int64_t x0 = index3d(floorf(ix)), y0 = index3d(floorf(iy)), z0 = index3d(floorf(iz));
      /* distances as PyTorch writes them: (corner index as float) - coordinate, and back */
      float fx0 = (float)x0, fy0 = (float)y0, fz0 = (float)z0;
      float fx1 = (float)(x0 + 1), fy1 = (float)(y0 + 1), fz1 = (float)(z0 + 1);
      float ex = fx1 - ix, wx = ix - fx0, sy = fy1 - iy, ny = iy - fy0, bz = fz1 - iz, tz = iz - fz0;
      float wt[8];
      wt[0] = ex * sy * bz; /* tnw */
      wt[1] = wx * sy * bz; /* tne */
      wt[2] = ex * ny * bz; /* tsw */
      wt[3] = wx * ny * bz; /* tse */
      wt[4] = ex * sy * tz; /* bnw */
      wt[5] = wx * sy * tz; /* bne */
      wt[6] = ex * ny * tz; /* bsw */
      wt[7] = wx * ny * tz; /* bse */
      int64_t off[8];
      int in[8];
      for (int k = 0; k < 8; k++) {
        int64_t cx = x0 + (k & 1), cy = y0 + ((k >> 1) & 1), cz = z0 + ((k >> 2) & 1);
        in[k] = cx >= 0 && cx < w && cy >= 0 && cy < h && cz >= 0 && cz < d_n;
        off[k] = in[k] ? (cz * h + cy) * w + cx : 0;
      }
      for (int64_t c = 0; c < c_n; c++) {
        const float *xp = xn + c * plane;
        float s = 0.0f;
        for (int k = 0; k < 8; k++)
          if (in[k]) {
            float t = xp[off[k]] * wt[k];
            s = s + t;
          }
        yn[c * oplane] = s;
      }
    }
  }
  return OA_OK;
}
