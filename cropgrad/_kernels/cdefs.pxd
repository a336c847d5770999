# cython: language_level=3
#
# Declarations of cropgrad's C headers (cropgrad/_kernels/src/cg_*.h), in one place.

from libc.stdint cimport uint16_t


cdef extern from "cg_build.h" nogil:
    const char* CG_COMPILER
    const char* CG_CFLAGS
    void cg_prefetch(const void* p)
    # Cache lines to ask for a few at a time: `runs` runs of `length`
    # floats, `lane` apart; the next is run `run`, float `pos`.
    ctypedef struct cg_ahead:
        const float* start
        Py_ssize_t lane
        Py_ssize_t length
        Py_ssize_t runs
        Py_ssize_t run
        Py_ssize_t pos
    void cg_ask(cg_ahead* a, Py_ssize_t count)

cdef extern from "cg_fpenv.h" nogil:
    # Flush-to-zero and denormals-are-zero for the calling thread, while
    # `flush` is non-zero; enter and leave pair up within one thread.
    const bint CG_FPENV_SUPPORTED
    void cg_fpenv_enter(int flush)
    void cg_fpenv_leave(int flush)

cdef extern from "cg_half.h" nogil:
    # Exact float16 -> float32; float32 -> float16 rounding to nearest even.
    float cg_half_to_float(uint16_t h)
    uint16_t cg_float_to_half(float f)
    # The same for bfloat16.
    float cg_bfloat16_to_float(uint16_t h)
    uint16_t cg_float_to_bfloat16(float f)
    # dst[i] = cg_float_to_half(src[i]) for i < n: the portable loop, and
    # the clone chosen by cg_simd_select (cg_simd.h; F16C on x86-64).
    void cg_round_half_base(uint16_t* dst, const float* src, Py_ssize_t n)
    void cg_round_half(uint16_t* dst, const float* src, Py_ssize_t n)
    ctypedef void (*cg_round_half_fn)(uint16_t* dst, const float* src,
                                      Py_ssize_t n)
    cg_round_half_fn cg_round_half_f16c_clone()

cdef extern from "cg_scatter.h" nogil:
    # One crop row of bilinear samples, each sample's four corner updates in
    # turn (NULL rows: the spare pixels; see cg_scatter.h).  Function
    # pointers to the clone chosen by cg_simd_select (cg_simd.h).
    void cg_row_f(float* top, float* bottom, float* spare, Py_ssize_t stride,
                  const float* g, const Py_ssize_t* col_lo,
                  const Py_ssize_t* col_hi, const float* w_left,
                  const float* w_right, Py_ssize_t cw, float w_top,
                  float w_bottom, int same_row, Py_ssize_t n, Py_ssize_t ahead,
                  const float* g_end, cg_ahead* ask, Py_ssize_t ask_count)
    void cg_row_d(double* top, double* bottom, double* spare, Py_ssize_t stride,
                  const float* g, const Py_ssize_t* col_lo,
                  const Py_ssize_t* col_hi, const float* w_left,
                  const float* w_right, Py_ssize_t cw, float w_top,
                  float w_bottom, int same_row, Py_ssize_t n, Py_ssize_t ahead,
                  const float* g_end, cg_ahead* ask, Py_ssize_t ask_count)

cdef extern from "cg_shallow.h" nogil:
    # One crop row of bilinear samples into pixels of 1 to 4 channels (the
    # float one a clone cg_simd_select chooses).
    void cg_shallow_rows_f(float* top, Py_ssize_t top_step, float* bottom,
                           Py_ssize_t bottom_step, const float* g,
                           const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                           const float* w_left, const float* w_right,
                           Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                           float w_bottom, int same, Py_ssize_t n)
    void cg_shallow_rows_d(double* top, Py_ssize_t top_step, double* bottom,
                           Py_ssize_t bottom_step, const float* g,
                           const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                           const float* w_left, const float* w_right,
                           Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                           float w_bottom, int same, Py_ssize_t n)
    # The same for NCHW: the lanes are 1 to 4 planes, `*_lane` apart.
    void cg_shallow_rows_f_planes(float* top, Py_ssize_t top_step,
                                  Py_ssize_t top_lane, float* bottom,
                                  Py_ssize_t bottom_step, Py_ssize_t bottom_lane,
                                  const float* g, Py_ssize_t g_lane,
                                  const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                                  const float* w_left, const float* w_right,
                                  Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                                  float w_bottom, int same, Py_ssize_t n)
    void cg_shallow_rows_d_planes(double* top, Py_ssize_t top_step,
                                  Py_ssize_t top_lane, double* bottom,
                                  Py_ssize_t bottom_step, Py_ssize_t bottom_lane,
                                  const float* g, Py_ssize_t g_lane,
                                  const Py_ssize_t* col_lo, const Py_ssize_t* col_hi,
                                  const float* w_left, const float* w_right,
                                  Py_ssize_t crop_w, Py_ssize_t width, float w_top,
                                  float w_bottom, int same, Py_ssize_t n)

cdef extern from "cg_pages.h" nogil:
    # Transparent huge pages asked for under a block's whole pages: 0, 1
    # (nothing to advise) or -1 (refused); results get them from
    # CG_HUGE_PAGES_FROM bytes on.
    size_t CG_HUGE_PAGES_FROM
    int cg_advise_huge_pages(void* start, size_t nbytes)
    # Whether a block's first, middle and last pages are resident: 1, 0, or
    # -1 where the system does not say.
    int cg_pages_resident(const void* start, size_t nbytes)


cdef extern from "cg_planes.h" nogil:
    # Channels between NCHW planes and side-by-side pixels.  gather and
    # scatter_f are function pointers to the clone chosen by cg_simd_select.
    void cg_planes_gather(float* dst, const float* src, Py_ssize_t src_lane,
                          Py_ssize_t count, Py_ssize_t n)
    void cg_planes_scatter_f(float* dst, Py_ssize_t dst_lane, const float* src,
                             Py_ssize_t count, Py_ssize_t n)
    void cg_planes_scatter_runs_f(float* dst, Py_ssize_t dst_lane,
                                  const float* src, Py_ssize_t count, Py_ssize_t n)
    void cg_copy_streaming(float* dst, const float* src, Py_ssize_t n)
    void cg_stream_fence()
    void cg_planes_scatter_d(double* dst, Py_ssize_t dst_lane, const double* src,
                             Py_ssize_t count, Py_ssize_t n)
    void cg_planes_scatter_h(uint16_t* dst, Py_ssize_t dst_lane, const float* src,
                             Py_ssize_t count, Py_ssize_t n)
    void cg_planes_scatter_bf(uint16_t* dst, Py_ssize_t dst_lane, const float* src,
                              Py_ssize_t count, Py_ssize_t n)

cdef extern from "cg_terms.h" nogil:
    # The boxes gradient's four terms of one sample, per channel, from
    # float32 pixels (a function pointer to the clone cg_simd_select chose).
    void cg_terms(const float* tl, const float* tr, const float* bl,
                  const float* br, const float* g, float x_lerp,
                  float one_minus_x, float y_lerp, float one_minus_y,
                  float f_y1, float f_x1, float f_y2, float f_x2, Py_ssize_t n,
                  float* t)
    # Up to CG_SUM_GROUP boxes' terms added to their four sums each, every
    # sum in its serial order.
    enum: CG_SUM_GROUP
    void cg_sum_terms(float* sums, float* const* terms, const Py_ssize_t* n,
                      int count)

cdef extern from "cg_lerp.h" nogil:
    # The forward op's bilinear samples of one crop row, `n` channels each
    # (a function pointer to the clone cg_simd_select chose).
    void cg_lerp_row(float* out, Py_ssize_t out_stride, const float* top,
                     const float* bottom, Py_ssize_t pixel_stride,
                     const Py_ssize_t* left, const Py_ssize_t* right,
                     const float* x_lerp, Py_ssize_t count, float y_lerp,
                     float extrapolation, Py_ssize_t n)

cdef extern from "cg_roi.h" nogil:
    # RoIAlign's loops over a sample's channels, side by side, for float
    # and double (function pointers to the clone cg_simd_select chose).
    # pool: acc += ((w1 v1 + w2 v2) + w3 v3) + w4 v4; mean: acc /= count;
    # spread: dst += (g w)
    # / divisor (times it, by_inverse); slopes: the boxes gradient's terms
    # of one axis (hi NULL: the size is held); tangent: the JVP's terms of
    # the axes `axes` names.
    enum:
        CG_ROI_BOTH
        CG_ROI_ROWS_ONLY
        CG_ROI_COLS_ONLY
    void cg_roi_pool_f(float* acc, const float* v1, const float* v2,
                       const float* v3, const float* v4, float w1, float w2,
                       float w3, float w4, Py_ssize_t n)
    void cg_roi_pool_d(double* acc, const double* v1, const double* v2,
                       const double* v3, const double* v4, double w1, double w2,
                       double w3, double w4, Py_ssize_t n)
    void cg_roi_mean_f(float* acc, float count, Py_ssize_t n)
    void cg_roi_mean_d(double* acc, double count, Py_ssize_t n)
    void cg_roi_spread_f(float* dst, const float* g, float w, float divisor,
                         int by_inverse, Py_ssize_t n)
    void cg_roi_spread_d(double* dst, const double* g, double w, double divisor,
                         int by_inverse, Py_ssize_t n)
    void cg_roi_slopes_f(float* lo, float* hi, const float* a1, const float* b1,
                         const float* a2, const float* b2, float w_rest,
                         float w_lerp, const float* g, float f_lo, float f_hi,
                         Py_ssize_t n)
    void cg_roi_slopes_d(double* lo, double* hi, const double* a1,
                         const double* b1, const double* a2, const double* b2,
                         double w_rest, double w_lerp, const double* g,
                         double f_lo, double f_hi, Py_ssize_t n)
    void cg_roi_tangent_f(float* acc, const float* v1, const float* v2,
                          const float* v3, const float* v4, float hy, float ly,
                          float hx, float lx, float rate_y, float rate_x,
                          int axes, Py_ssize_t n)
    void cg_roi_tangent_d(double* acc, const double* v1, const double* v2,
                          const double* v3, const double* v4, double hy,
                          double ly, double hx, double lx, double rate_y,
                          double rate_x, int axes, Py_ssize_t n)

cdef extern from "cg_simd.h" nogil:
    # Which clones of the inner loops above (cg_scatter.h, cg_shallow.h, cg_terms.h,
    # cg_lerp.h, cg_planes.h, cg_roi.h, and the F16C rounding of cg_half.h) this
    # module runs: cg_simd_select points them at a target (x86-64: sse2,
    # avx2 or avx512; AArch64: neon or baseline; elsewhere baseline) and
    # returns -1 when this CPU cannot run it.  cg_simd_supported: whether it
    # can; cg_simd_choice: the name cg_simd_select would choose for a
    # request (NULL or "auto": the widest; NULL when it cannot run it).
    const char* CG_SIMD_BASELINE
    int cg_simd_supported(const char* target)
    const char* cg_simd_choice(const char* target)
    int cg_simd_select(const char* target)

cdef extern from "cg_transpose.h" nogil:
    # dst (cols x rows, rows dst_stride values apart) = src (rows x cols,
    # rows src_stride apart) transposed, any 32-bit values; 8 x 8 blocks
    # through registers where `simd` (cg_transpose_simd(): the CPU has
    # AVX2).
    int cg_transpose_simd()
    void cg_transpose32(const void* src, Py_ssize_t src_stride, void* dst,
                        Py_ssize_t dst_stride, Py_ssize_t rows, Py_ssize_t cols,
                        int simd)
