/* conv_tmpl.h -- private: type-generic kernels of the conv family, included
 * by conv.c once per floating dtype with T (the element type), FN(name)
 * (name mangling) and GEMM (cblas_sgemm / cblas_dgemm) defined.
 * Every pointer here is to contiguous data (the op layer made it so). */

/* n elements from src to dst.  Rows of up to 16 elements are copied by
 * two fixed-size copies that overlap (inlined: no loop the compiler could
 * turn back into a memcpy call), longer ones by memcpy: for the short rows
 * of small planes the call cost more than the copy (im2col of a
 * [32, 14, 14] image spent a fifth of its time in memcpy calls). */
static inline void FN(copy_row)(T *restrict dst, const T *restrict src, int64_t n) {
    enum { E = (int)sizeof(T) };
    if (n >= 8 && n <= 16) {
        memcpy(dst, src, 8 * E);
        memcpy(dst + n - 8, src + n - 8, 8 * E);
    } else if (n >= 4 && n < 8) {
        memcpy(dst, src, 4 * E);
        memcpy(dst + n - 4, src + n - 4, 4 * E);
    } else if (n >= 2 && n < 4) {
        memcpy(dst, src, 2 * E);
        memcpy(dst + n - 2, src + n - 2, 2 * E);
    } else if (n == 1) {
        dst[0] = src[0];
    } else if (n > 16) {
        memcpy(dst, src, E * (size_t)n);
    }
}

/* Columns [C*K, L] from an image [C, img] for windows on a grid; row r of
 * the columns starts at col + r * ld (ld >= L: several samples' columns
 * side by side).  Threads over the rows unless called inside a parallel
 * region (then OpenMP runs it on the calling thread). */
static void FN(im2col_ld)(const T *x, int64_t C, const ct_win *g, T *col, int64_t ld) {
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t rows = C * K, IS = g->img[0] * g->img[1] * g->img[2];
    const int64_t W = g->img[2], H = g->img[1];
    if (g->img[0] == 1 && g->grid[0] == 1 && g->k[0] == 1 && g->s[1] == 1 && g->s[2] == 1 &&
        g->d[2] == 1 && g->grid[2] == W && g->p[2] >= 0 && g->p[2] < W &&
        (g->k[2] - 1 - g->p[2]) < W) {
        /* 2-D, unit strides, as wide as the image ("same" padding along x):
         * a row of the columns is the plane shifted by (iy0, ix), so the
         * rows of the grid that lie in the image are one contiguous copy,
         * after which the columns the shift brought in from the neighbour
         * row are zeroed, and grid rows off the image are zeros */
        const int64_t Ho = g->grid[1];
#pragma omp parallel for if (rows * L > CT_PAR_GRAIN)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t c = r / K, k = r % K, ky = k / g->k[2], kx = k % g->k[2];
            const int64_t ix = kx - g->p[2], dy = ky * g->d[1] - g->p[1]; /* iy = oy + dy */
            T *dst = col + r * ld;
            const T *src = x + c * IS;
            int64_t oy0 = dy < 0 ? -dy : 0, oy1 = H - dy < Ho ? H - dy : Ho;
            if (oy1 < oy0) oy1 = oy0;
            if (oy0 > Ho) oy0 = oy1 = Ho;
            if (oy0 > 0) memset(dst, 0, sizeof(T) * (size_t)(oy0 * W));
            if (oy1 > oy0) {
                /* dst[j] = src[j + dy * W + ix] for j in [oy0*W + max(0, -ix), oy1*W - max(0, ix)) */
                int64_t j0 = oy0 * W + (ix < 0 ? -ix : 0), j1 = oy1 * W - (ix > 0 ? ix : 0);
                memcpy(dst + j0, src + j0 + dy * W + ix, sizeof(T) * (size_t)(j1 - j0));
                /* column by column (strided stores: a memset call per
                 * row's one or two edge elements cost more than the row) */
                for (int64_t q = 0; q < -ix; q++)
                    for (int64_t oy = oy0; oy < oy1; oy++) dst[oy * W + q] = (T)0;
                for (int64_t q = W - ix; q < W; q++)
                    for (int64_t oy = oy0; oy < oy1; oy++) dst[oy * W + q] = (T)0;
            }
            if (oy1 < Ho) memset(dst + oy1 * W, 0, sizeof(T) * (size_t)((Ho - oy1) * W));
        }
        return;
    }
#pragma omp parallel for if (rows * L > CT_PAR_GRAIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = r / K, k = r % K;
        int64_t kz = k / (g->k[1] * g->k[2]), ky = (k / g->k[2]) % g->k[1], kx = k % g->k[2];
        T *dst = col + r * ld;
        const T *src = x + c * IS;
        /* the row's in-image window positions along x, [lo, hi): the same
         * for every (oz, oy) of the row */
        const int64_t Wo = g->grid[2], sx = g->s[2];
        const int64_t ix = -g->p[2] + kx * g->d[2];
        int64_t lo = ix >= 0 ? 0 : (-ix + sx - 1) / sx;
        int64_t hi = W - ix > 0 ? (W - ix + sx - 1) / sx : 0;
        if (hi > Wo) hi = Wo;
        if (lo > hi) lo = hi;
        for (int64_t oz = 0; oz < g->grid[0]; oz++) {
            int64_t iz = oz * g->s[0] - g->p[0] + kz * g->d[0];
            if (iz < 0 || iz >= g->img[0]) {
                memset(dst, 0, sizeof(T) * (size_t)(g->grid[1] * g->grid[2]));
                dst += g->grid[1] * g->grid[2];
                continue;
            }
            for (int64_t oy = 0; oy < g->grid[1]; oy++) {
                int64_t iy = oy * g->s[1] - g->p[1] + ky * g->d[1];
                if (iy < 0 || iy >= g->img[1]) {
                    memset(dst, 0, sizeof(T) * (size_t)Wo);
                    dst += Wo;
                    continue;
                }
                const T *srow = src + (iz * g->img[1] + iy) * W;
                int64_t ox = 0;
                for (; ox < lo; ox++) *dst++ = (T)0;
                if (sx == 1) {
                    FN(copy_row)(dst, srow + ix + lo, hi - lo);
                    dst += hi - lo;
                    ox = hi;
                } else {
                    const T *sp = srow + ix + lo * sx;
                    for (; ox < hi; ox++, sp += sx) *dst++ = *sp;
                }
                for (; ox < Wo; ox++) *dst++ = (T)0;
            }
        }
    }
}

static void FN(im2col)(const T *x, int64_t C, const ct_win *g, T *col) {
    FN(im2col_ld)(x, C, g, col, g->grid[0] * g->grid[1] * g->grid[2]);
}

/* Accumulates columns [C*K, L] into an image [C, img] (must be zeroed or
 * hold what to add to). */
static void FN(col2im)(const T *col, int64_t C, const ct_win *g, T *x) {
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t IS = g->img[0] * g->img[1] * g->img[2];
#pragma omp parallel for if (C * K * L > CT_PAR_GRAIN)
    for (int64_t c = 0; c < C; c++) {
        T *dstimg = x + c * IS;
        for (int64_t k = 0; k < K; k++) {
            int64_t kz = k / (g->k[1] * g->k[2]), ky = (k / g->k[2]) % g->k[1], kx = k % g->k[2];
            const T *src = col + (c * K + k) * L;
            for (int64_t oz = 0; oz < g->grid[0]; oz++) {
                int64_t iz = oz * g->s[0] - g->p[0] + kz * g->d[0];
                if (iz < 0 || iz >= g->img[0]) { src += g->grid[1] * g->grid[2]; continue; }
                for (int64_t oy = 0; oy < g->grid[1]; oy++) {
                    int64_t iy = oy * g->s[1] - g->p[1] + ky * g->d[1];
                    if (iy < 0 || iy >= g->img[1]) { src += g->grid[2]; continue; }
                    T *drow = dstimg + (iz * g->img[1] + iy) * g->img[2];
                    const int64_t W = g->img[2], Wo = g->grid[2], sx = g->s[2];
                    int64_t ix = -g->p[2] + kx * g->d[2];
                    int64_t lo = ix >= 0 ? 0 : (-ix + sx - 1) / sx;
                    int64_t hi = W - ix > 0 ? (W - ix + sx - 1) / sx : 0;
                    if (hi > Wo) hi = Wo;
                    if (lo > hi) lo = hi;
                    if (sx == 1) {
                        for (int64_t ox = lo; ox < hi; ox++) drow[ix + ox] += src[ox];
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++) drow[ix + ox * sx] += src[ox];
                    }
                    src += Wo;
                }
            }
        }
    }
}

/* A 1x1 window on the whole image: the image is its own column matrix (not
 * when the grid differs from the image: explicit geometries). */
static bool FN(is_pointwise)(const ct_win *g) {
    return g->k[0] * g->k[1] * g->k[2] == 1 && g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1 &&
           g->p[0] == 0 && g->p[1] == 0 && g->p[2] == 0 && g->grid[0] == g->img[0] &&
           g->grid[1] == g->img[1] && g->grid[2] == g->img[2];
}

/* Threads over the samples (each sample's GEMMs then run on one thread)
 * when there are enough samples and a sample's GEMMs are small enough that
 * OpenBLAS's own threading would not pay off.  Each sample's result comes
 * from its own single-threaded GEMMs, so the values do not depend on the
 * thread count. */
static int FN(sample_threads)(int64_t N, double macs_per_sample) {
    int nt = ct__num_threads();
    if (nt <= 1 || N < 2 || macs_per_sample > 4e8) return 1;
#ifdef _OPENMP
    if (omp_in_parallel()) return 1;
#endif
    return nt < N ? nt : (int)N;
}

static int FN(thread_id)(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* y[N, Co, out] = conv(x[N, C, in], w[Co, C/groups, k]) + b */
static ct_status FN(conv_fwd)(const T *x, const T *w, const T *b, T *y, int64_t N, int64_t C,
                              int64_t Co, int64_t groups, const ct_win *g) {
    const int64_t Cg = C / groups, Og = Co / groups;
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t IS = g->img[0] * g->img[1] * g->img[2];
    const int64_t CK = Cg * K;
    if (N == 0 || Co == 0 || L == 0) return CT_OK;
    if (L > INT_MAX || CK > INT_MAX || Og > INT_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "conv: a GEMM dimension exceeds the BLAS int range");
    const bool direct = FN(is_pointwise)(g);
    const int nth = FN(sample_threads)(N, (double)Co * (double)L * (double)CK);
    const size_t csz = (!direct && CK > 0) ? (size_t)(CK * L) : 0;
    T *cols = NULL;
    if (csz) {
        cols = malloc(sizeof(T) * csz * (size_t)nth);
        if (!cols) return ct__error_status(CT_ERR_OOM, "conv: out of memory for the columns");
    }
#pragma omp parallel for num_threads(nth) if (nth > 1) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        T *col = cols ? cols + csz * (size_t)FN(thread_id)() : NULL;
        for (int64_t gi = 0; gi < groups; gi++) {
            T *yg = y + (n * Co + gi * Og) * L;
            if (CK == 0) {
                memset(yg, 0, sizeof(T) * (size_t)(Og * L));
                continue;
            }
            const T *xg = x + (n * C + gi * Cg) * IS;
            const T *cm = xg;
            if (!direct) {
                FN(im2col)(xg, Cg, g, col);
                cm = col;
            }
            if (Og > 0)
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Og, (int)L, (int)CK, (T)1,
                     w + gi * Og * CK, (int)CK, cm, (int)L, (T)0, yg, (int)L);
        }
        if (b) {
            for (int64_t co = 0; co < Co; co++) {
                T *yr = y + (n * Co + co) * L, bv = b[co];
                for (int64_t l = 0; l < L; l++) yr[l] += bv;
            }
        }
    }
    free(cols);
    return CT_OK;
}

/* y[N, Co, img] = conv_transpose(x[N, C, grid], w[C, Co/groups, k]) + b;
 * here g->img is the output and g->grid the input. */
static ct_status FN(convt_fwd)(const T *x, const T *w, const T *b, T *y, int64_t N, int64_t C,
                               int64_t Co, int64_t groups, const ct_win *g) {
    const int64_t Cg = C / groups, Og = Co / groups;
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t OS = g->img[0] * g->img[1] * g->img[2];
    const int64_t OK = Og * K;
    if (N == 0 || Co == 0 || OS == 0) return CT_OK;
    if (L > INT_MAX || OK > INT_MAX || Cg > INT_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "conv_transpose: a GEMM dimension exceeds the BLAS int range");
    const bool direct = FN(is_pointwise)(g) && L > 0 && Cg > 0;
    const bool work = L > 0 && Cg > 0 && OK > 0;
    const int nth = FN(sample_threads)(N, (double)Co * (double)K * (double)L * (double)Cg);
    const size_t csz = (work && !direct) ? (size_t)(OK * L) : 0;
    T *cols = NULL;
    if (csz) {
        cols = malloc(sizeof(T) * csz * (size_t)nth);
        if (!cols) return ct__error_status(CT_ERR_OOM, "conv_transpose: out of memory for the columns");
    }
#pragma omp parallel for num_threads(nth) if (nth > 1) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        T *col = cols ? cols + csz * (size_t)FN(thread_id)() : NULL;
        T *yn = y + n * Co * OS;
        if (!direct) memset(yn, 0, sizeof(T) * (size_t)(Co * OS));
        if (work)
            for (int64_t gi = 0; gi < groups; gi++) {
                const T *xg = x + (n * C + gi * Cg) * L;
                T *yg = yn + gi * Og * OS;
                /* direct: the columns are the output itself (OK = Og, L = OS) */
                GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OK, (int)L, (int)Cg, (T)1,
                     w + gi * Cg * OK, (int)OK, xg, (int)L, (T)0, direct ? yg : col, (int)L);
                if (!direct) FN(col2im)(col, Og, g, yg);
            }
        if (b) {
            for (int64_t co = 0; co < Co; co++) {
                T *yr = yn + co * OS, bv = b[co];
                for (int64_t l = 0; l < OS; l++) yr[l] += bv;
            }
        }
    }
    free(cols);
    return CT_OK;
}

/* Weight gradient of a conv (and of a conv_transpose, with the roles read
 * off the image side and the grid side):
 *   dw[Cgr, Cim/groups, k] = sum_n gr_n[Cgr, L] . im2col(im_n)[Cim/groups*K, L]^T
 * per group, where im [N, Cim, img] is the image-side tensor and gr
 * [N, Cgr, grid] the grid-side one.  Samples go in fixed blocks of nb (the
 * columns of a block side by side, one GEMM with K = nb*L per block,
 * accumulated block after block), so the summation order depends on the
 * shapes only, never on the thread count. */
static ct_status FN(conv_wgrad)(const T *im, const T *gr, T *dw, int64_t N, int64_t Cim,
                                int64_t Cgr, int64_t groups, const ct_win *g) {
    const int64_t Cg = Cim / groups, Og = Cgr / groups;
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t IS = g->img[0] * g->img[1] * g->img[2];
    const int64_t CK = Cg * K;
    memset(dw, 0, sizeof(T) * (size_t)(Cgr * CK));
    if (N == 0 || L == 0 || CK == 0 || Og == 0) return CT_OK;
    /* block: columns and gradients of at most ~8M elements together */
    int64_t per = (CK + Og) * L, nb = ((int64_t)1 << 23) / (per > 0 ? per : 1);
    if (nb < 1) nb = 1;
    if (nb > N) nb = N;
    if (CK > INT_MAX || Og > INT_MAX || nb * L > INT_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "conv weight gradient: a GEMM dimension exceeds the "
                                "BLAS int range");
    if (FN(is_pointwise)(g) && L >= 256) {
        /* 1x1: the images are their own columns; one GEMM per sample with
         * K = L, accumulated sample after sample */
        for (int64_t gi = 0; gi < groups; gi++)
            for (int64_t n = 0; n < N; n++)
                GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Og, (int)CK, (int)L, (T)1,
                     gr + (n * Cgr + gi * Og) * L, (int)L, im + (n * Cim + gi * Cg) * IS, (int)L,
                     n == 0 ? (T)0 : (T)1, dw + gi * Og * CK, (int)CK);
        return CT_OK;
    }
    const int64_t ld = nb * L;
    T *col = malloc(sizeof(T) * (size_t)(CK * ld));
    T *gb = nb > 1 ? malloc(sizeof(T) * (size_t)(Og * ld)) : NULL;
    if (!col || (nb > 1 && !gb)) {
        free(col);
        free(gb);
        return ct__error_status(CT_ERR_OOM, "conv weight gradient: out of memory for the columns");
    }
    for (int64_t gi = 0; gi < groups; gi++) {
        for (int64_t n0 = 0; n0 < N; n0 += nb) {
            int64_t m = N - n0 < nb ? N - n0 : nb;
            for (int64_t j = 0; j < m; j++)
                FN(im2col_ld)(im + ((n0 + j) * Cim + gi * Cg) * IS, Cg, g, col + j * L, ld);
            /* one sample: its gradient rows are already [Og, L] */
            const T *ga = gr + (n0 * Cgr + gi * Og) * L;
            int64_t lda = L;
            if (m > 1) {
#pragma omp parallel for if (Og * m * L > CT_PAR_GRAIN) collapse(2)
                for (int64_t o = 0; o < Og; o++)
                    for (int64_t j = 0; j < m; j++)
                        memcpy(gb + o * ld + j * L, gr + ((n0 + j) * Cgr + gi * Og + o) * L,
                               sizeof(T) * (size_t)L);
                ga = gb;
                lda = ld;
            }
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Og, (int)CK, (int)(m * L), (T)1, ga,
                 (int)lda, col, (int)ld, n0 == 0 ? (T)0 : (T)1, dw + gi * Og * CK, (int)CK);
        }
    }
    free(col);
    free(gb);
    return CT_OK;
}

/* Weight gradients of many groups with sizeable per-group GEMMs: what
 * vmap's per-sample weight gradients are (src/func/batch_linalg.c: B
 * samples' images side by side as the channels of one image, B groups).
 * The groups split over the threads; each thread builds one group's
 * columns [Cg*K, L] of one sample in a buffer of its own (cache-sized for
 * such layers: 288 x 196 floats = 225 KB) and multiplies there with a
 * single-threaded GEMM, dw_g = sum_n gr_n,g [Og, L] . cols^T, so no
 * [groups*Cg*K, L] column tensor goes through memory, and the GEMM reads
 * its columns from the cache.  Per group the samples go in order, so the
 * bits depend on the shapes only, never on the thread count.  gemm1 is
 * the single-threaded GEMM (row-major C[M,N] = A[M,K] . B[K,N]^T-style
 * call below).  Returns CT_OK, or CT_ERR_OOM (buffers). */
typedef void (*FN(gemm1_fn))(int64_t M, int64_t N, int64_t K, const T *A, int64_t lda,
                             const T *Bt, int64_t ldb, T beta, T *C, int64_t ldc);
static ct_status FN(conv_wgrad_groups)(const T *im, const T *gr, T *dw, int64_t N, int64_t Cim,
                                       int64_t Cgr, int64_t groups, const ct_win *g, int nt,
                                       FN(gemm1_fn) gemm1) {
    const int64_t Cg = Cim / groups, Og = Cgr / groups;
    const int64_t K = g->k[0] * g->k[1] * g->k[2];
    const int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    const int64_t IS = g->img[0] * g->img[1] * g->img[2];
    const int64_t CK = Cg * K;
    if (nt < 1) nt = 1;
    if (nt > groups) nt = (int)groups;
    /* fewer column rows than output channels (a conv of one input channel:
     * 9 rows against 32 channels): the transposed product dw_g^T [CK, Og]
     * = cols [CK, L] . gr^T, whose wide side fills the GEMM's 16-column
     * tiles, in a small buffer transposed into dw at the end */
    const bool tr = CK < Og;
    const size_t per = (size_t)(CK * L) + (tr ? (size_t)(CK * Og) : 0);
    T *buf = malloc(sizeof(T) * per * (size_t)nt);
    if (!buf) return ct__error_status(CT_ERR_OOM, "conv weight gradient: out of memory for the columns");
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t gi = 0; gi < groups; gi++) {
#ifdef _OPENMP
        T *col = buf + (size_t)omp_get_thread_num() * per;
#else
        T *col = buf;
#endif
        T *dwg = dw + gi * Og * CK, *tg = col + CK * L;
        if (N == 0) memset(dwg, 0, sizeof(T) * (size_t)(Og * CK));
        for (int64_t n = 0; n < N; n++) {
            FN(im2col_ld)(im + (n * Cim + gi * Cg) * IS, Cg, g, col, L);
            const T *gn = gr + (n * Cgr + gi * Og) * L;
            if (tr) gemm1(CK, Og, L, col, L, gn, L, n == 0 ? (T)0 : (T)1, tg, Og);
            else gemm1(Og, CK, L, gn, L, col, L, n == 0 ? (T)0 : (T)1, dwg, CK);
        }
        if (tr && N > 0)
            for (int64_t o = 0; o < Og; o++)
                for (int64_t r = 0; r < CK; r++) dwg[o * CK + r] = tg[r * Og + o];
    }
    free(buf);
    return CT_OK;
}

/* ---- pooling over planes [P, H, W] -> [P, Ho, Wo] ---------------------- */
/* 2x2 windows, stride 2, no padding or dilation (the common pool): each
 * output reads rows 2*oh and 2*oh + 1 at columns 2*ow, 2*ow + 1; first max
 * in window order, a later NaN replaces the max, as the general loop below */
#if defined(CT_CONV_F32) && defined(__AVX2__)
/* A 2x2/2 f32 pool row with vectors (the AVX2 build of this file): the
 * columns of rows r0 and r1 split into the windows' four taps, the max
 * taken tap by tap in window order exactly as the scalar loop below (a
 * greater value or a NaN replaces the max), the winning tap's offset kept
 * beside it.  8 outputs a vector, 4 on rows of 4..7 outputs; the last
 * vector of a row overlaps the one before it (those outputs are written
 * twice, the same values), so rows of at least 4 outputs have no scalar
 * tail.  Returns the outputs done: Wo, or 0 on rows of fewer than 4. */
#define CT_MP_STEP(m, mi, v, off, CMP, ORF, BLEND, BLENDI, CAST)                  \
    do {                                                                          \
        __typeof__(m) t_ = ORF(CMP(v, m, _CMP_GT_OQ), CMP(v, v, _CMP_UNORD_Q));   \
        m = BLEND(m, v, t_);                                                      \
        mi = BLENDI(mi, off, CAST(t_));                                           \
    } while (0)
static void max_pool_2x2_v8_f32(const float *r0, const float *r1, float *y, int64_t *ip, int64_t ow,
                                int64_t W, int64_t base) {
    const int64_t c = 2 * ow;
    __m256 a0 = _mm256_loadu_ps(r0 + c), b0 = _mm256_loadu_ps(r0 + c + 8);
    __m256 a1 = _mm256_loadu_ps(r1 + c), b1 = _mm256_loadu_ps(r1 + c + 8);
    /* even/odd columns in order: shuffled within the 128-bit lanes, then
     * the 64-bit quarters put back in place */
#define CT_EVEN(a, b) _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8))
#define CT_ODD(a, b) _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8))
    __m256 m = CT_EVEN(a0, b0), v1 = CT_ODD(a0, b0), v2 = CT_EVEN(a1, b1), v3 = CT_ODD(a1, b1);
#undef CT_EVEN
#undef CT_ODD
    __m256i mi = _mm256_setzero_si256();
    CT_MP_STEP(m, mi, v1, _mm256_set1_epi32(1), _mm256_cmp_ps, _mm256_or_ps, _mm256_blendv_ps,
               _mm256_blendv_epi8, _mm256_castps_si256);
    CT_MP_STEP(m, mi, v2, _mm256_set1_epi32((int)W), _mm256_cmp_ps, _mm256_or_ps, _mm256_blendv_ps,
               _mm256_blendv_epi8, _mm256_castps_si256);
    CT_MP_STEP(m, mi, v3, _mm256_set1_epi32((int)W + 1), _mm256_cmp_ps, _mm256_or_ps, _mm256_blendv_ps,
               _mm256_blendv_epi8, _mm256_castps_si256);
    _mm256_storeu_ps(y + ow, m);
    if (ip) { /* base + c + 2 * lane + the tap's offset, as int64 */
        __m256i b = _mm256_add_epi64(_mm256_set1_epi64x(base + c), _mm256_setr_epi64x(0, 2, 4, 6));
        __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(mi));
        __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(mi, 1));
        _mm256_storeu_si256((__m256i *)(ip + ow), _mm256_add_epi64(b, lo));
        _mm256_storeu_si256((__m256i *)(ip + ow + 4),
                            _mm256_add_epi64(_mm256_add_epi64(b, _mm256_set1_epi64x(8)), hi));
    }
}
static void max_pool_2x2_v4_f32(const float *r0, const float *r1, float *y, int64_t *ip, int64_t ow,
                                int64_t W, int64_t base) {
    const int64_t c = 2 * ow;
    __m128 a0 = _mm_loadu_ps(r0 + c), b0 = _mm_loadu_ps(r0 + c + 4);
    __m128 a1 = _mm_loadu_ps(r1 + c), b1 = _mm_loadu_ps(r1 + c + 4);
    __m128 m = _mm_shuffle_ps(a0, b0, 0x88), v1 = _mm_shuffle_ps(a0, b0, 0xDD);
    __m128 v2 = _mm_shuffle_ps(a1, b1, 0x88), v3 = _mm_shuffle_ps(a1, b1, 0xDD);
    __m128i mi = _mm_setzero_si128();
    CT_MP_STEP(m, mi, v1, _mm_set1_epi32(1), _mm_cmp_ps, _mm_or_ps, _mm_blendv_ps, _mm_blendv_epi8,
               _mm_castps_si128);
    CT_MP_STEP(m, mi, v2, _mm_set1_epi32((int)W), _mm_cmp_ps, _mm_or_ps, _mm_blendv_ps, _mm_blendv_epi8,
               _mm_castps_si128);
    CT_MP_STEP(m, mi, v3, _mm_set1_epi32((int)W + 1), _mm_cmp_ps, _mm_or_ps, _mm_blendv_ps,
               _mm_blendv_epi8, _mm_castps_si128);
    _mm_storeu_ps(y + ow, m);
    if (ip) {
        __m256i b = _mm256_add_epi64(_mm256_set1_epi64x(base + c), _mm256_setr_epi64x(0, 2, 4, 6));
        _mm256_storeu_si256((__m256i *)(ip + ow), _mm256_add_epi64(b, _mm256_cvtepi32_epi64(mi)));
    }
}
#undef CT_MP_STEP
static int64_t max_pool_2x2_row_f32(const float *r0, const float *r1, float *y, int64_t *ip, int64_t Wo,
                                    int64_t W, int64_t base) {
    if (Wo >= 8) {
        int64_t ow = 0;
        for (; ow + 8 <= Wo; ow += 8) max_pool_2x2_v8_f32(r0, r1, y, ip, ow, W, base);
        if (ow < Wo) max_pool_2x2_v8_f32(r0, r1, y, ip, Wo - 8, W, base);
        return Wo;
    }
    if (Wo >= 4) {
        max_pool_2x2_v4_f32(r0, r1, y, ip, 0, W, base);
        if (Wo > 4) max_pool_2x2_v4_f32(r0, r1, y, ip, Wo - 4, W, base);
        return Wo;
    }
    return 0;
}
#endif

static void FN(max_pool_2x2)(const T *x, T *y, int64_t *idx, int64_t P, const ct_pool *q) {
    const int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
#pragma omp parallel for if (P * Ho * Wo * 4 > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        const T *xp = x + p * H * W;
        T *yp = y + p * Ho * Wo;
        int64_t *ip = idx ? idx + p * Ho * Wo : NULL;
        for (int64_t oh = 0; oh < Ho; oh++) {
            const T *r0 = xp + 2 * oh * W, *r1 = r0 + W;
            int64_t ow0 = 0;
#if defined(CT_CONV_F32) && defined(__AVX2__)
            if (W <= INT32_MAX - 1)
                ow0 = max_pool_2x2_row_f32(r0, r1, yp + oh * Wo, ip ? ip + oh * Wo : NULL, Wo, W, 2 * oh * W);
#endif
            for (int64_t ow = ow0; ow < Wo; ow++) {
                int64_t c = 2 * ow;
                T v0 = r0[c], v1 = r0[c + 1], v2 = r1[c], v3 = r1[c + 1];
                T mv = v0;
                int64_t mi = 0;
                if (v1 > mv || isnan(v1)) { mv = v1; mi = 1; }
                if (v2 > mv || isnan(v2)) { mv = v2; mi = W; }
                if (v3 > mv || isnan(v3)) { mv = v3; mi = W + 1; }
                yp[oh * Wo + ow] = mv;
                if (ip) ip[oh * Wo + ow] = 2 * oh * W + c + mi;
            }
        }
    }
}

/* dx[P, H*W] = 0, then dx[p, idx[p, o]] += g[p, o]: per plane in output
 * order, so the sums do not depend on the thread count */
static void FN(max_pool_bwd)(const T *g, const int64_t *idx, T *dx, int64_t P, int64_t HW,
                             int64_t L) {
#pragma omp parallel for if (P * (HW + L) > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        T *d = dx + p * HW;
        const T *gp = g + p * L;
        const int64_t *ip = idx + p * L;
        memset(d, 0, sizeof(T) * (size_t)HW);
        for (int64_t o = 0; o < L; o++) d[ip[o]] += gp[o];
    }
}

/* One output of a window that may hang over the border (rows hs..he of
 * the plane already clipped): the first max in window order, a later NaN
 * replacing it. */
static inline void FN(max_pool_one)(const T *xp, const ct_pool *q, int64_t hs, int64_t he,
                                    int64_t ow, T *yo, int64_t *io) {
    const int64_t W = q->W;
    int64_t ws = ow * q->sw - q->pw;
    int64_t we = ws + (q->kw - 1) * q->dw + 1;
    if (we > W) we = W;
    while (ws < 0) ws += q->dw;
    int64_t mi = hs * W + ws;
    T mv = -(T)INFINITY;
    for (int64_t ih = hs; ih < he; ih += q->dh)
        for (int64_t iw = ws; iw < we; iw += q->dw) {
            T v = xp[ih * W + iw];
            if (v > mv || isnan(v)) {
                mv = v;
                mi = ih * W + iw;
            }
        }
    *yo = mv;
    if (io) *io = mi;
}

/* n (<= 64) consecutive outputs from column o0 whose windows lie inside the
 * plane's columns, the same rule as max_pool_one, branch-free across the
 * outputs so that the compiler vectorizes it (sw is a constant where it is
 * inlined: 1, 2, or any) */
#define CT_MP_RUN 64
static inline __attribute__((always_inline)) void FN(max_pool_run)(
    const T *xp, const ct_pool *q, int64_t hs, int64_t he, int64_t o0, int64_t n, int64_t sw,
    T *yo, int64_t *io) {
    const int64_t W = q->W, base = o0 * sw - q->pw;
    T m[CT_MP_RUN];
    int64_t mi[CT_MP_RUN];
    for (int64_t j = 0; j < n; j++) {
        m[j] = -(T)INFINITY;
        mi[j] = hs * W + base + j * sw;
    }
    for (int64_t ih = hs; ih < he; ih += q->dh)
        for (int64_t kx = 0; kx < q->kw; kx++) {
            const int64_t off = ih * W + base + kx * q->dw;
            const T *src = xp + off;
            if (io)
                for (int64_t j = 0; j < n; j++) {
                    T v = src[j * sw];
                    int take = v > m[j] || v != v;
                    m[j] = take ? v : m[j];
                    mi[j] = take ? off + j * sw : mi[j];
                }
            else
                for (int64_t j = 0; j < n; j++) {
                    T v = src[j * sw];
                    m[j] = (v > m[j] || v != v) ? v : m[j];
                }
        }
    memcpy(yo, m, sizeof(T) * (size_t)n);
    if (io) memcpy(io, mi, sizeof(int64_t) * (size_t)n);
}

static void FN(max_pool)(const T *x, T *y, int64_t *idx, int64_t P, const ct_pool *q) {
    const int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
    if (q->kh == 2 && q->kw == 2 && q->sh == 2 && q->sw == 2 && q->ph == 0 && q->pw == 0 &&
        q->dh == 1 && q->dw == 1 && 2 * Ho <= H && 2 * Wo <= W) {
        FN(max_pool_2x2)(x, y, idx, P, q);
        return;
    }
    /* the outputs [owa, owb) of every row have their whole window inside
     * the columns: those go through max_pool_run (the 3x3 stride-2 pad-1
     * pool of ResNet's stem, [64, 112, 112]: 4.1 -> ~0.3 ms); the border
     * ones one at a time */
    const int64_t span = (q->kw - 1) * q->dw;
    int64_t owa = (q->pw + q->sw - 1) / q->sw, owb = 0;
    if (W - 1 - span + q->pw >= 0) owb = (W - 1 - span + q->pw) / q->sw + 1;
    if (owb > Wo) owb = Wo;
    if (owa > owb) owa = owb;
#pragma omp parallel for if (P * Ho * Wo * q->kh * q->kw > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        const T *xp = x + p * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t hs = oh * q->sh - q->ph;
            int64_t he = hs + (q->kh - 1) * q->dh + 1;
            if (he > H) he = H;
            while (hs < 0) hs += q->dh;
            T *yr = y + (p * Ho + oh) * Wo;
            int64_t *ir = idx ? idx + (p * Ho + oh) * Wo : NULL;
            for (int64_t ow = 0; ow < owa; ow++)
                FN(max_pool_one)(xp, q, hs, he, ow, yr + ow, ir ? ir + ow : NULL);
            for (int64_t o0 = owa; o0 < owb; o0 += CT_MP_RUN) {
                int64_t n = owb - o0 < CT_MP_RUN ? owb - o0 : CT_MP_RUN;
                int64_t *io = ir ? ir + o0 : NULL;
                if (q->sw == 2) FN(max_pool_run)(xp, q, hs, he, o0, n, 2, yr + o0, io);
                else if (q->sw == 1) FN(max_pool_run)(xp, q, hs, he, o0, n, 1, yr + o0, io);
                else FN(max_pool_run)(xp, q, hs, he, o0, n, q->sw, yr + o0, io);
            }
            for (int64_t ow = owb; ow < Wo; ow++)
                FN(max_pool_one)(xp, q, hs, he, ow, yr + ow, ir ? ir + ow : NULL);
        }
    }
}

static void FN(avg_pool)(const T *x, T *y, int64_t P, const ct_pool *q) {
    const int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
#pragma omp parallel for if (P * Ho * Wo * q->kh * q->kw > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        const T *xp = x + p * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t hs = oh * q->sh - q->ph, ws = ow * q->sw - q->pw;
                int64_t he = hs + q->kh, we = ws + q->kw;
                if (he > H + q->ph) he = H + q->ph;
                if (we > W + q->pw) we = W + q->pw;
                int64_t pool = (he - hs) * (we - ws);
                if (hs < 0) hs = 0;
                if (ws < 0) ws = 0;
                if (he > H) he = H;
                if (we > W) we = W;
                int64_t o = (p * Ho + oh) * Wo + ow;
                if (hs >= he || ws >= we) {
                    y[o] = 0;
                    continue;
                }
                T sum = 0;
                for (int64_t ih = hs; ih < he; ih++)
                    for (int64_t iw = ws; iw < we; iw++) sum += xp[ih * W + iw];
                int64_t div = q->divisor > 0 ? q->divisor
                              : q->count_pad ? pool : (he - hs) * (we - ws);
                y[o] = sum / (T)div;
            }
        }
    }
}

static void FN(adaptive_pool)(const T *x, T *y, int64_t *idx, int64_t P, const ct_pool *q,
                              bool is_max) {
    const int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
#pragma omp parallel for if (P * H * W > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        const T *xp = x + p * H * W;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t hs = (oh * H) / Ho, he = ((oh + 1) * H + Ho - 1) / Ho;
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t ws = (ow * W) / Wo, we = ((ow + 1) * W + Wo - 1) / Wo;
                int64_t o = (p * Ho + oh) * Wo + ow;
                if (is_max) {
                    int64_t mi = hs * W + ws;
                    T mv = -(T)INFINITY;
                    for (int64_t ih = hs; ih < he; ih++)
                        for (int64_t iw = ws; iw < we; iw++) {
                            T v = xp[ih * W + iw];
                            if (v > mv || isnan(v)) {
                                mv = v;
                                mi = ih * W + iw;
                            }
                        }
                    y[o] = mv;
                    if (idx) idx[o] = mi;
                } else {
                    T sum = 0;
                    for (int64_t ih = hs; ih < he; ih++)
                        for (int64_t iw = ws; iw < we; iw++) sum += xp[ih * W + iw];
                    y[o] = sum / (T)((he - hs) * (we - ws));
                }
            }
        }
    }
}

/* ---- interpolation over planes [P, H, W] -> [P, Ho, Wo] --------------- */
/* Per output index along one dim: up to 4 source indices and weights. */
static void FN(interp_table)(int mode, bool align, int64_t in, int64_t out, double sc,
                             int64_t *ix, T *wt) {
    for (int64_t i = 0; i < out; i++) {
        int64_t *ii = ix + 4 * i;
        T *ww = wt + 4 * i;
        for (int j = 0; j < 4; j++) { ii[j] = 0; ww[j] = 0; }
        if (mode == CT_INTERP_NEAREST || mode == CT_INTERP_NEAREST_EXACT) {
            float scale = sc > 0 ? (float)(1.0 / sc) : (float)in / (float)out;
            int64_t s;
            if (mode == CT_INTERP_NEAREST) {
                if (out == in) s = i;
                else if (out == 2 * in) s = i >> 1;
                else s = (int64_t)floorf((float)i * scale);
            } else {
                s = (int64_t)floorf((float)((i + 0.5) * scale));
            }
            if (s > in - 1) s = in - 1;
            ii[0] = s;
            ww[0] = 1;
        } else if (mode == CT_INTERP_BICUBIC) {
            T scale = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)
                            : (sc > 0 ? (T)(1.0 / sc) : (T)in / (T)out);
            T real = align ? scale * (T)i : scale * ((T)i + (T)0.5) - (T)0.5;
            int64_t s = (int64_t)floor(real);
            T t = real - (T)s, A = (T)-0.75;
            T x1 = t, x2 = (T)1 - t;
            ww[0] = ((A * (x1 + 1) - 5 * A) * (x1 + 1) + 8 * A) * (x1 + 1) - 4 * A;
            ww[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
            ww[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
            ww[3] = ((A * (x2 + 1) - 5 * A) * (x2 + 1) + 8 * A) * (x2 + 1) - 4 * A;
            for (int j = 0; j < 4; j++) {
                int64_t v = s - 1 + j;
                ii[j] = v < 0 ? 0 : v > in - 1 ? in - 1 : v;
            }
        } else { /* linear */
            if (out == in) {
                ii[0] = ii[1] = i;
                ww[0] = 1;
                continue;
            }
            T scale = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)
                            : (sc > 0 ? (T)(1.0 / sc) : (T)in / (T)out);
            double real = align ? (double)scale * (double)i
                                : (double)scale * ((double)i + 0.5) - 0.5;
            if (!align && real < 0) real = 0;
            int64_t i0 = (int64_t)real;
            ii[0] = i0;
            ii[1] = i0 + (i0 < in - 1 ? 1 : 0);
            T l1 = (T)(real - (double)i0);
            ww[1] = l1;
            ww[0] = (T)1 - l1;
        }
    }
}

static inline __attribute__((always_inline)) void FN(interp_plane)(
    const T *xp, T *yp, int64_t W, int64_t Ho, int64_t Wo, const int64_t *ih, const T *wh,
    const int64_t *iw, const T *ww, const int taps) {
    for (int64_t oh = 0; oh < Ho; oh++) {
        const int64_t *hi = ih + 4 * oh;
        const T *hw = wh + 4 * oh;
        for (int64_t ow = 0; ow < Wo; ow++) {
            const int64_t *wi = iw + 4 * ow;
            const T *wwt = ww + 4 * ow;
            T acc = 0;
            for (int a = 0; a < taps; a++) {
                const T *row = xp + hi[a] * W;
                T r = 0;
                for (int b = 0; b < taps; b++) r += wwt[b] * row[wi[b]];
                acc += hw[a] * r;
            }
            yp[oh * Wo + ow] = acc;
        }
    }
}

static ct_status FN(interp)(const T *x, T *y, int64_t P, const ct_pool *q, int mode, bool align,
                            double sh, double sw) {
    const int64_t H = q->H, W = q->W, Ho = q->Ho, Wo = q->Wo;
    int64_t *ih = malloc(sizeof(int64_t) * 4 * (size_t)(Ho + Wo + 1));
    T *wh = malloc(sizeof(T) * 4 * (size_t)(Ho + Wo + 1));
    if (!ih || !wh) {
        free(ih);
        free(wh);
        return ct__error_status(CT_ERR_OOM, "interpolate: out of memory");
    }
    int64_t *iw = ih + 4 * Ho;
    T *ww = wh + 4 * Ho;
    int hmode = mode == CT_INTERP_LINEAR ? CT_INTERP_BILINEAR : mode;
    FN(interp_table)(hmode, align, H, Ho, sh, ih, wh);
    FN(interp_table)(mode, align, W, Wo, sw, iw, ww);
    int taps = (mode == CT_INTERP_BICUBIC) ? 4 : (mode == CT_INTERP_NEAREST ||
                                                  mode == CT_INTERP_NEAREST_EXACT) ? 1 : 2;
#pragma omp parallel for if (P * Ho * Wo > CT_PAR_GRAIN)
    for (int64_t p = 0; p < P; p++) {
        const T *xp = x + p * H * W;
        T *yp = y + p * Ho * Wo;
        if (taps == 1) FN(interp_plane)(xp, yp, W, Ho, Wo, ih, wh, iw, ww, 1);
        else if (taps == 2) FN(interp_plane)(xp, yp, W, Ho, Wo, ih, wh, iw, ww, 2);
        else FN(interp_plane)(xp, yp, W, Ho, Wo, ih, wh, iw, ww, 4);
    }
    free(ih);
    free(wh);
    return CT_OK;
}
