/* Body of cg_shallow_rows_f and cg_shallow_rows_d: included by _shallow.h
 * with CG_ACC (the accumulator type), CG_VEC (4 lanes of it), CG_ADD
 * (adds a float32 vector of terms to a CG_VEC) and CG_NAME defined.
 *
 * CG_NAME() walks one crop row of bilinear samples:
 *   top, bottom       the crop row's two output rows; a row the caller does
 *                     not own is a scratch pixel with a step of 0, so an
 *                     owned row is updated by the same instructions whether
 *                     or not the other row is owned
 *   top_step, bottom_step   pixel strides of the rows: n, or 0 (scratch)
 *   g                 the crop row of grads, crop_w * n floats
 *   col_lo, col_hi, w_left, w_right   the box's column taps (col_lo < 0:
 *                     the sample is outside the image)
 *   w_top, w_bottom   row weights
 *   same              top and bottom are the same row (an integer row
 *                     coordinate): every update goes to top, in the order
 *                     top-left, top-right, bottom-left, bottom-right
 *   n                 channels, 1 to 4
 */

static inline CG_VEC CG_NAME(_load)(const CG_ACC* p, ptrdiff_t n) {
    CG_VEC r = CG_SPLAT(0);
    ptrdiff_t d;
    for (d = 0; d < n; d++) CG_LANE(r, d) = p[d];
    return r;
}

static inline void CG_NAME(_store)(CG_ACC* p, CG_VEC v, ptrdiff_t n) {
    ptrdiff_t d;
    for (d = 0; d < n; d++) p[d] = CG_LANE(v, d);
}

/* Write back the cached columns c and c + 1 (if it exists) of both rows. */
static inline void CG_NAME(_flush)(CG_ACC* top, ptrdiff_t top_step,
                                   CG_ACC* bottom, ptrdiff_t bottom_step,
                                   ptrdiff_t c, ptrdiff_t width, CG_VEC t0,
                                   CG_VEC t1, CG_VEC b0, CG_VEC b1,
                                   ptrdiff_t n) {
    CG_NAME(_store)(top + c * top_step, t0, n);
    CG_NAME(_store)(bottom + c * bottom_step, b0, n);
    if (c + 1 < width) {
        CG_NAME(_store)(top + (c + 1) * top_step, t1, n);
        CG_NAME(_store)(bottom + (c + 1) * bottom_step, b1, n);
    }
}

/* The walk, inlined below with a constant n so that the loads and stores
 * of n lanes unroll. */
static inline void CG_NAME(_walk)(CG_ACC* top, ptrdiff_t top_step,
                                  CG_ACC* bottom, ptrdiff_t bottom_step,
                                  const float* g, const ptrdiff_t* col_lo,
                                  const ptrdiff_t* col_hi, const float* w_left,
                                  const float* w_right, ptrdiff_t crop_w,
                                  ptrdiff_t width, float w_top, float w_bottom,
                                  int same, ptrdiff_t n) {
    CG_VEC t0 = CG_SPLAT(0), t1 = CG_SPLAT(0), b0 = CG_SPLAT(0), b1 = CG_SPLAT(0);
    cg_f4 wt = cg_f4_splat(w_top), wb = cg_f4_splat(w_bottom);
    /* Cached: columns c and c + 1 (if it exists); c = -2: nothing. */
    ptrdiff_t x, d, left, c = -2;
    for (x = 0; x < crop_w; x++) {
        cg_f4 gv = CG_SPLAT(0.0f), wl, wr, vt, vb;
        left = col_lo[x];
        if (left < 0) continue;
        if (left != c) {
            if (left == c + 1) {
                /* One column to the right: c + 1 stays cached. */
                CG_NAME(_store)(top + c * top_step, t0, n);
                CG_NAME(_store)(bottom + c * bottom_step, b0, n);
                t0 = t1;
                b0 = b1;
            } else {
                /* Write back before reading: the columns may overlap. */
                if (c >= 0) {
                    CG_NAME(_flush)(top, top_step, bottom, bottom_step, c,
                                    width, t0, t1, b0, b1, n);
                }
                t0 = CG_NAME(_load)(top + left * top_step, n);
                b0 = CG_NAME(_load)(bottom + left * bottom_step, n);
            }
            if (left + 1 < width) {
                t1 = CG_NAME(_load)(top + (left + 1) * top_step, n);
                b1 = CG_NAME(_load)(bottom + (left + 1) * bottom_step, n);
            }
            c = left;
        }
        for (d = 0; d < n; d++) CG_LANE(gv, d) = g[x * n + d];
        wl = cg_f4_splat(w_left[x]);
        wr = cg_f4_splat(w_right[x]);
        vt = cg_f4_mul(wt, gv);
        vb = cg_f4_mul(wb, gv);
        if (col_hi[x] != left) {
            t0 = CG_ADD(t0, cg_f4_mul(wl, vt));
            t1 = CG_ADD(t1, cg_f4_mul(wr, vt));
            if (same) {
                t0 = CG_ADD(t0, cg_f4_mul(wl, vb));
                t1 = CG_ADD(t1, cg_f4_mul(wr, vb));
            } else {
                b0 = CG_ADD(b0, cg_f4_mul(wl, vb));
                b1 = CG_ADD(b1, cg_f4_mul(wr, vb));
            }
        } else {
            /* The right pixel is the left one. */
            t0 = CG_ADD(CG_ADD(t0, cg_f4_mul(wl, vt)), cg_f4_mul(wr, vt));
            if (same) {
                t0 = CG_ADD(CG_ADD(t0, cg_f4_mul(wl, vb)), cg_f4_mul(wr, vb));
            } else {
                b0 = CG_ADD(CG_ADD(b0, cg_f4_mul(wl, vb)), cg_f4_mul(wr, vb));
            }
        }
    }
    if (c >= 0) {
        CG_NAME(_flush)(top, top_step, bottom, bottom_step, c, width, t0, t1,
                        b0, b1, n);
    }
}

/* The entry point: the walk with its channel count made a constant. */
static void CG_NAME()(CG_ACC* top, ptrdiff_t top_step, CG_ACC* bottom,
                      ptrdiff_t bottom_step, const float* g,
                      const ptrdiff_t* col_lo, const ptrdiff_t* col_hi,
                      const float* w_left, const float* w_right,
                      ptrdiff_t crop_w, ptrdiff_t width, float w_top,
                      float w_bottom, int same, ptrdiff_t n) {
    switch (n) {
    case 1:
        CG_NAME(_walk)(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                       w_left, w_right, crop_w, width, w_top, w_bottom, same, 1);
        break;
    case 2:
        CG_NAME(_walk)(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                       w_left, w_right, crop_w, width, w_top, w_bottom, same, 2);
        break;
    case 3:
        CG_NAME(_walk)(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                       w_left, w_right, crop_w, width, w_top, w_bottom, same, 3);
        break;
    default:
        CG_NAME(_walk)(top, top_step, bottom, bottom_step, g, col_lo, col_hi,
                       w_left, w_right, crop_w, width, w_top, w_bottom, same, 4);
        break;
    }
}

#undef CG_ACC
#undef CG_VEC
#undef CG_ADD
#undef CG_NAME
