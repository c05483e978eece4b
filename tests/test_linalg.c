/* test_linalg.c -- bad input for the linalg family (exact messages and
 * codes), NULL propagation, leaks, and the parallel / packed GEMM paths
 * checked against a naive loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "test_util.h"


static ct_tensor *rnd(const int64_t *shape, int nd, ct_dtype dt, unsigned seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    unsigned s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        v[i] = (double)((s >> 16) % 9) - 4.0;
    }
    ct_tensor *t = ct_from_doubles(v, shape, nd, dt);
    free(v);
    return t;
}

/* expects op returned NULL with this code and message */
#define EXPECT_ERR(expr, code, msg)                                      \
    do {                                                                 \
        ct_clear_error();                                                \
        ct_tensor *r_ = (expr);                                          \
        assert_null(r_);                                                 \
        assert_int_equal(ct_last_error_code(), (code));                  \
        assert_string_equal(ct_last_error(), (msg));                     \
    } while (0)
#define EXPECT_ERR_SUB(expr, code, sub)                                  \
    do {                                                                 \
        ct_clear_error();                                                \
        ct_tensor *r_ = (expr);                                          \
        assert_null(r_);                                                 \
        assert_int_equal(ct_last_error_code(), (code));                  \
        if (!strstr(ct_last_error(), (sub))) fail_msg("message: %s", ct_last_error()); \
    } while (0)

static void test_null_propagation(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *m = ct_ones(CT_SHAPE(3, 3), CT_F32);
    ct_tensor *v = ct_ones(CT_SHAPE(3), CT_F32);
    /* a first error, then every op given NULL keeps it */
    assert_null(ct_mm(m, v));
    const char *first = "mm: mat2 must be a matrix (got a 1D tensor)";
    assert_string_equal(ct_last_error(), first);
    ct_status code = ct_last_error_code();
    ct_tensor *ops[] = {
        ct_matmul(NULL, m), ct_matmul(m, NULL), ct_mm(NULL, m), ct_bmm(m, NULL),
        ct_mv(NULL, v), ct_dot(v, NULL), ct_vdot(NULL, v), ct_outer(v, NULL),
        ct_addmm(NULL, m, m, 1, 1), ct_addmm(m, NULL, m, 1, 1), ct_addmv(m, NULL, v, 1, 1),
        ct_addr(m, v, NULL, 1, 1), ct_baddbmm(NULL, m, m, 1, 1), ct_addbmm(m, m, NULL, 1, 1),
        ct_linear(NULL, m, NULL), ct_linear(m, NULL, v), ct_bilinear(v, NULL, m, NULL),
        ct_tensordot(NULL, m, NULL, NULL, 0), ct_kron(m, NULL), ct_trace(NULL),
        ct_cross(NULL, m, 0), ct_cdist(m, NULL, 2),
        ct_matmul(ct_mm(NULL, m), m),
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) assert_null(ops[i]);
    ct_tensor *lst[2] = {m, NULL};
    assert_null(ct_einsum("ij,jk", lst, 2));
    assert_string_equal(ct_last_error(), first);
    assert_int_equal(ct_last_error_code(), code);
    SCOPE_END;
}

static void test_matmul_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *a34 = ct_ones(CT_SHAPE(3, 4), CT_F32), *b56 = ct_ones(CT_SHAPE(5, 6), CT_F32);
    ct_tensor *a34d = ct_ones(CT_SHAPE(3, 4), CT_F64), *b42 = ct_ones(CT_SHAPE(4, 2), CT_F32);
    EXPECT_ERR(ct_mm(a34, b56), CT_ERR_SHAPE,
               "mm: mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)");
    EXPECT_ERR(ct_matmul(a34, b56), CT_ERR_SHAPE,
               "matmul: mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)");
    EXPECT_ERR(ct_mm(a34d, b42), CT_ERR_DTYPE,
               "mm: expected m1 and m2 to have the same dtype, but got: double != float");
    EXPECT_ERR(ct_matmul(b42, a34d), CT_ERR_DTYPE,
               "matmul: expected m1 and m2 to have the same dtype, but got: float != double");
    EXPECT_ERR(ct_matmul(ct_scalar(1, CT_F32), b42), CT_ERR_SHAPE,
               "matmul: both arguments to matmul need to be at least 1D, but they are 0D and 2D");
    EXPECT_ERR(ct_matmul(ct_ones(CT_SHAPE(3), CT_F32), ct_ones(CT_SHAPE(4), CT_F32)), CT_ERR_SHAPE,
               "matmul: inconsistent tensor size, expected tensor [3] and src [4] to have the same "
               "number of elements, but got 3 and 4 elements respectively");
    EXPECT_ERR(ct_matmul(a34, ct_ones(CT_SHAPE(5), CT_F32)), CT_ERR_SHAPE,
               "matmul: size mismatch, got 3, 3x4,5");
    EXPECT_ERR(ct_matmul(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(5, 2), CT_F32)),
               CT_ERR_SHAPE, "matmul: mat1 and mat2 shapes cannot be multiplied (6x4 and 5x2)");
    EXPECT_ERR(ct_matmul(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(2, 5, 6), CT_F32)),
               CT_ERR_SHAPE, "matmul: Expected size for first two dimensions of batch2 tensor to "
               "be: [2, 4] but got: [2, 5].");
    EXPECT_ERR(ct_matmul(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(3, 4, 6), CT_F32)),
               CT_ERR_SHAPE, "matmul: The size of tensor a (2) must match the size of tensor b (3) "
               "at non-singleton dimension 0");
    EXPECT_ERR(ct_mm(ct_ones(CT_SHAPE(2, 2), CT_BOOL), ct_ones(CT_SHAPE(2, 2), CT_BOOL)), CT_ERR_DTYPE,
               "mm: \"addmm_impl_cpu_\" not implemented for 'Bool'");
    EXPECT_ERR(ct_bmm(a34, ct_ones(CT_SHAPE(3, 4, 6), CT_F32)), CT_ERR_SHAPE,
               "bmm: batch1 must be a 3D tensor (got 2D)");
    EXPECT_ERR(ct_bmm(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(3, 4, 6), CT_F32)),
               CT_ERR_SHAPE, "bmm: Expected size for first two dimensions of batch2 tensor to be: "
               "[2, 4] but got: [3, 4].");
    EXPECT_ERR(ct_mv(a34, ct_ones(CT_SHAPE(5), CT_F32)), CT_ERR_SHAPE, "mv: size mismatch, got 3, 3x4,5");
    EXPECT_ERR(ct_dot(ct_ones(CT_SHAPE(3, 1), CT_F32), ct_ones(CT_SHAPE(3), CT_F32)), CT_ERR_SHAPE,
               "dot: 1D tensors expected, but got 2D and 1D tensors");
    EXPECT_ERR(ct_dot(ct_ones(CT_SHAPE(3), CT_F32), ct_ones(CT_SHAPE(3), CT_F64)), CT_ERR_DTYPE,
               "dot: expected both vectors to have same dtype, but found Float and Double");
    EXPECT_ERR(ct_vdot(ct_ones(CT_SHAPE(3), CT_F32), ct_ones(CT_SHAPE(4), CT_F32)), CT_ERR_SHAPE,
               "vdot: inconsistent tensor size, expected tensor [3] and src [4] to have the same "
               "number of elements, but got 3 and 4 elements respectively");
    EXPECT_ERR(ct_outer(a34, ct_ones(CT_SHAPE(5), CT_F32)), CT_ERR_SHAPE,
               "outer: Expected 1-D argument self, but got 2-D");
    SCOPE_END;
}

static void test_addmm_linear_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *m1 = ct_ones(CT_SHAPE(3, 4), CT_F32), *m2 = ct_ones(CT_SHAPE(4, 5), CT_F32);
    EXPECT_ERR(ct_addmm(ct_ones(CT_SHAPE(3, 3), CT_F32), m1, m2, 1, 1), CT_ERR_SHAPE,
               "addmm: The expanded size of the tensor (5) must match the existing size (3) at "
               "non-singleton dimension 1.  Target sizes: [3, 5].  Tensor sizes: [3, 3]");
    EXPECT_ERR(ct_addmm(ct_ones(CT_SHAPE(3, 5), CT_F64), m1, m2, 1, 1), CT_ERR_DTYPE,
               "addmm: self and mat2 must have the same dtype, but got double and float");
    ct_tensor *i34 = ct_ones(CT_SHAPE(3, 4), CT_I64), *i45 = ct_ones(CT_SHAPE(4, 5), CT_I64);
    EXPECT_ERR(ct_addmm(ct_ones(CT_SHAPE(3, 5), CT_I64), i34, i45, 0.5, 1), CT_ERR_ARG,
               "addmm: For integral input tensors, argument beta must not be a floating point number.");
    EXPECT_ERR_SUB(ct_baddbmm(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(2, 3, 4), CT_F32),
                              ct_ones(CT_SHAPE(2, 4, 5), CT_F32), 1, 1),
                   CT_ERR_SHAPE, "baddbmm: The expanded size of the tensor (5)");
    EXPECT_ERR_SUB(ct_addbmm(ct_ones(CT_SHAPE(3, 5), CT_F32), m1, m2, 1, 1), CT_ERR_SHAPE,
                   "addbmm: batch1 must be a 3D tensor");
    EXPECT_ERR(ct_linear(ct_ones(CT_SHAPE(2, 3, 4), CT_F32), ct_ones(CT_SHAPE(5, 3), CT_F32), NULL),
               CT_ERR_SHAPE, "linear: mat1 and mat2 shapes cannot be multiplied (6x4 and 3x5)");
    EXPECT_ERR_SUB(ct_linear(m1, ct_ones(CT_SHAPE(5, 4), CT_F32), ct_ones(CT_SHAPE(4), CT_F32)),
                   CT_ERR_SHAPE, "linear: The expanded size of the tensor (5)");
    EXPECT_ERR(ct_bilinear(ct_ones(CT_SHAPE(2, 3), CT_F32), ct_ones(CT_SHAPE(2, 4), CT_F32),
                           ct_ones(CT_SHAPE(5, 3, 3), CT_F32), NULL),
               CT_ERR_SHAPE, "bilinear(): input2 size does not match weight size: got 4 but expected 3");
    EXPECT_ERR(ct_bilinear(ct_ones(CT_SHAPE(2, 3), CT_F32), ct_ones(CT_SHAPE(3, 4), CT_F32),
                           ct_ones(CT_SHAPE(5, 3, 4), CT_F32), NULL),
               CT_ERR_SHAPE, "bilinear(): input batch dimensions do not match: got [2] and [3]");
    SCOPE_END;
}

static void test_misc_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *a = ct_ones(CT_SHAPE(3, 4), CT_F32), *b = ct_ones(CT_SHAPE(5, 6), CT_F32);
    EXPECT_ERR(ct_tensordot(a, b, (int64_t[]){1}, (int64_t[]){0}, 1), CT_ERR_SHAPE,
               "tensordot: contracted dimensions need to match, but first has size 4 in dim 1 and "
               "second has size 5 in dim 0");
    EXPECT_ERR(ct_tensordot(a, b, (int64_t[]){2}, (int64_t[]){0}, 1), CT_ERR_INDEX,
               "tensordot: dim 2 out of range for a 2-D tensor (expected in [-2, 1])");
    EXPECT_ERR(ct_trace(ct_ones(CT_SHAPE(3), CT_F32)), CT_ERR_SHAPE,
               "trace: expected a matrix, but got tensor with dim 1");
    EXPECT_ERR(ct_trace(ct_ones(CT_SHAPE(3, 3), CT_BOOL)), CT_ERR_DTYPE,
               "trace: \"trace\" not implemented for 'Bool'");
    EXPECT_ERR(ct_cross(a, a, 1), CT_ERR_SHAPE,
               "linalg.cross: inputs dimension 1 must have length 3. Got 4 and 4");
    EXPECT_ERR(ct_cross(ct_ones(CT_SHAPE(3, 4), CT_F32), ct_ones(CT_SHAPE(3, 4), CT_F64), 0),
               CT_ERR_DTYPE, "cross: expected scalar type Float but found Double");
    EXPECT_ERR(ct_cross(ct_ones(CT_SHAPE(3, 4), CT_F32), ct_ones(CT_SHAPE(3, 4), CT_F32), 2),
               CT_ERR_INDEX, "cross: dim 2 out of range for a 2-D tensor (expected in [-2, 1])");
    EXPECT_ERR(ct_cdist(a, b, 2), CT_ERR_SHAPE,
               "cdist: X1 and X2 must have the same number of columns. X1: 4 X2: 6");
    EXPECT_ERR(ct_cdist(ct_ones(CT_SHAPE(3, 4), CT_I64), ct_ones(CT_SHAPE(3, 4), CT_I64), 2),
               CT_ERR_DTYPE, "cdist: cdist only supports floating-point dtypes, X1 got: Long");
    EXPECT_ERR(ct_cdist(ct_ones(CT_SHAPE(4), CT_F32), a, 2), CT_ERR_SHAPE,
               "cdist: cdist only supports at least 2D tensors, X1 got: 1D");
    EXPECT_ERR(ct_cdist(a, a, -1), CT_ERR_ARG, "cdist: cdist only supports non-negative p values (got -1)");
    SCOPE_END;
}

static void test_einsum_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *a = ct_ones(CT_SHAPE(3, 4), CT_F32), *v = ct_ones(CT_SHAPE(3), CT_F32);
    ct_tensor *b = ct_ones(CT_SHAPE(5, 5), CT_F32);
    ct_tensor *av[2] = {a, a}, *ab[2] = {a, b}, *one[1] = {a}, *vec[2] = {v, a};
    EXPECT_ERR(ct_einsum("ij,jk", vec, 2), CT_ERR_SHAPE,
               "einsum(): the number of subscripts in the equation (2) does not match the number of "
               "dimensions (1) for operand 0 and no ellipsis was given");
    EXPECT_ERR(ct_einsum("ij,jk->ik", one, 1), CT_ERR_ARG,
               "einsum(): fewer operands were provided than specified in the equation");
    EXPECT_ERR(ct_einsum("ij->ij", av, 2), CT_ERR_ARG,
               "einsum(): more operands were provided than specified in the equation");
    ct_tensor *at[2] = {a, ct_t(a)};
    EXPECT_ERR(ct_einsum("ij,jk->il", at, 2), CT_ERR_ARG,
               "einsum(): output subscript l does not appear in the equation for any input operand");
    EXPECT_ERR(ct_einsum("ij,jk->ik", ab, 2), CT_ERR_SHAPE,
               "einsum(): subscript j has size 5 for operand 1 which does not broadcast with "
               "previously seen size 4");
    EXPECT_ERR(ct_einsum("i#j", one, 1), CT_ERR_ARG,
               "einsum(): invalid subscript given at index 1 in the equation string, subscripts "
               "must be in [a-zA-Z]");
    EXPECT_ERR(ct_einsum("ii", one, 1), CT_ERR_SHAPE,
               "einsum(): subscript i is repeated for operand 0 but the sizes don't match, 3 != 4");
    EXPECT_ERR(ct_einsum("ij->ii", one, 1), CT_ERR_ARG,
               "einsum(): output subscript i appears more than once in the output");
    EXPECT_ERR_SUB(ct_einsum("i..j", one, 1), CT_ERR_ARG, "not part of any ellipsis");
    EXPECT_ERR_SUB(ct_einsum("...i...", one, 1), CT_ERR_ARG, "ellipsis was already found");
    EXPECT_ERR(ct_einsum(NULL, one, 1), CT_ERR_NULL, "einsum(): equation is NULL");
    EXPECT_ERR(ct_einsum("ij", NULL, 0), CT_ERR_ARG, "einsum(): must provide at least one operand");
    ct_tensor *mixed[2] = {a, ct_ones(CT_SHAPE(4), CT_F64)};
    EXPECT_ERR_SUB(ct_einsum("ij,j", mixed, 2), CT_ERR_DTYPE, "same dtype");
    SCOPE_END;
}

/* c == alpha * a @ b + beta * in (in NULL: beta 0) against a naive f64
 * product; a [B, M, K] and b [B, K, N] of any layout */
static void check_product(ct_tensor *c, ct_tensor *a, ct_tensor *b, ct_tensor *in, double alpha, double beta) {
    assert_non_null(c);
    int64_t B = ct_size(a, 0), M = ct_size(a, 1), K = ct_size(a, 2), N = ct_size(b, 2);
    ct_tensor *a64 = ct_contiguous(ct_to_dtype(a, CT_F64)), *b64 = ct_contiguous(ct_to_dtype(b, CT_F64));
    ct_tensor *c64 = ct_contiguous(ct_to_dtype(c, CT_F64));
    ct_tensor *i64 = in ? ct_contiguous(ct_to_dtype(ct_expand(in, CT_SHAPE(B, M, N)), CT_F64)) : NULL;
    const double *pa = ct_data_ptr(a64), *pb = ct_data_ptr(b64), *pc = ct_data_ptr(c64);
    const double *pi = i64 ? ct_data_ptr(i64) : NULL;
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += pa[(bb * M + i) * K + k] * pb[(bb * K + k) * N + j];
                s = alpha * s + (pi ? beta * pi[(bb * M + i) * N + j] : 0);
                assert_true(fabs(pc[(bb * M + i) * N + j] - s) <= 1e-5 * (1 + fabs(s)));
            }
}

/* naive f64 reference of a batched product */
static void check_bmm(int64_t B, int64_t M, int64_t K, int64_t N, ct_dtype dt, int transpose_b) {
    ct_tensor *a = rnd(CT_SHAPE(B, M, K), dt, 1);
    ct_tensor *b = transpose_b ? ct_transpose(rnd(CT_SHAPE(B, N, K), dt, 2), 1, 2)
                               : rnd(CT_SHAPE(B, K, N), dt, 2);
    check_product(ct_bmm(a, b), a, b, NULL, 1, 0);
}

static void test_gemm_paths(void **state) {
    (void)state;
    SCOPE_BEGIN;
    check_bmm(80, 12, 10, 14, CT_F32, 0);  /* small GEMMs, OpenMP over batches */
    check_bmm(80, 12, 10, 14, CT_F64, 1);  /* transposed B via CblasTrans */
    check_bmm(40, 9, 11, 7, CT_I64, 1);    /* integer kernel, strided */
    check_bmm(30, 5, 6, 7, CT_I32, 0);
    check_bmm(2, 70, 65, 40, CT_F64, 0);   /* BLAS-threaded sizes */
    check_bmm(3, 6, 5, 4, CT_F16, 1);      /* f16 computed in f32 */
    /* K == 1: outer products, one pass over C (vmap's per-sample weight
     * gradients), unit-stride and strided b, f32 and f64, alpha and beta */
    check_bmm(64, 12, 1, 33, CT_F32, 0);
    check_bmm(5, 7, 1, 9, CT_F64, 1);
    /* K == 1 with an output beyond the caches (8M f32 elements, 32 MB): C is
     * written with non-temporal stores; the products are the same bits as
     * the broadcast multiply's, rows of N % 8 != 0 (plain stores) too */
    for (int odd = 0; odd < 2; odd++) {
        int64_t N = odd ? 4099 : 4096;
        ct_tensor *a = rnd(CT_SHAPE(16, 128, 1), CT_F32, 15), *b = rnd(CT_SHAPE(16, 1, N), CT_F32, 16);
        ct_tensor *c = ct_bmm(a, b), *m = ct_mul(a, b);
        assert_non_null(c);
        assert_int_equal(ct_equal(c, m), 1);
    }
    {
        ct_tensor *a = rnd(CT_SHAPE(4, 6, 1), CT_F32, 6), *b = ct_transpose(rnd(CT_SHAPE(4, 5, 1), CT_F32, 7), 1, 2);
        ct_tensor *in = rnd(CT_SHAPE(4, 6, 5), CT_F32, 8);
        check_product(ct_baddbmm(in, a, b, 0.5, 2.0), a, b, in, 2.0, 0.5);
    }
    /* a batch against one shared matrix (batch stride 0) folds into one GEMM
     * of B * M rows: contiguous a, a's rows strided (a slice), M == 1, and a
     * layout that cannot fold (a's batch dim inside its rows) */
    {
        ct_tensor *w = rnd(CT_SHAPE(9, 7), CT_F32, 9);
        ct_tensor *a1 = rnd(CT_SHAPE(6, 5, 9), CT_F32, 10);
        ct_tensor *a2 = ct_slice(rnd(CT_SHAPE(6, 10, 9), CT_F32, 11), 1, 0, INT64_MAX, 2);
        ct_tensor *a3 = rnd(CT_SHAPE(6, 1, 9), CT_F32, 12);
        ct_tensor *a4 = ct_transpose(rnd(CT_SHAPE(5, 6, 9), CT_F32, 13), 0, 1);
        ct_tensor *as[4] = {a1, a2, a3, a4};
        for (int k = 0; k < 4; k++) {
            int64_t B = ct_size(as[k], 0), M = ct_size(as[k], 1);
            ct_tensor *we = ct_expand(ct_unsqueeze(w, 0), CT_SHAPE(B, 9, 7));
            check_product(ct_bmm(as[k], we), as[k], we, NULL, 1, 0);
            ct_tensor *bias = rnd(CT_SHAPE(7), CT_F32, 14);
            check_product(ct_baddbmm(bias, as[k], we, 1.0, 1.0), as[k], we, bias, 1.0, 1.0);
            (void)M;
        }
    }
    /* a slice with neither unit stride: packed */
    ct_tensor *big = rnd(CT_SHAPE(8, 12), CT_F64, 3);
    ct_tensor *sl = ct_slice(ct_slice(big, 0, 0, INT64_MAX, 2), 1, 0, INT64_MAX, 3); /* [4, 4] */
    ct_tensor *r = ct_matmul(sl, sl);
    ct_tensor *ref = ct_matmul(ct_contiguous(sl), ct_contiguous(sl));
    assert_int_equal(ct_allclose(r, ref, 1e-12, 1e-12, false), 1);
    /* matmul [B, M, K] @ [K, N] keeps the batch shape */
    ct_tensor *x = rnd(CT_SHAPE(2, 3, 4), CT_F32, 4), *w = rnd(CT_SHAPE(4, 5), CT_F32, 5);
    ct_tensor *y = ct_matmul(x, w);
    assert_int_equal(ct_ndim(y), 3);
    assert_int_equal(ct_size(y, 0), 2);
    assert_int_equal(ct_size(y, 2), 5);
    SCOPE_END;
    /* outside any scope the caller owns the result */
    int64_t live = ct_live_tensors();
    ct_tensor *o1 = ct_ones(CT_SHAPE(2, 2), CT_F64);
    ct_tensor *o2 = ct_matmul(o1, o1);
    assert_non_null(o2);
    assert_true(((double *)ct_data_ptr(o2))[3] == 2.0);
    ct_release(o2);
    ct_release(o1);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_einsum_values(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *a = rnd(CT_SHAPE(3, 3), CT_F64, 7);
    ct_tensor *one[1] = {a};
    ct_tensor *tr = ct_einsum("ii", one, 1);
    assert_non_null(tr);
    assert_true(fabs(ct_item(tr) - ct_item(ct_trace(a))) < 1e-12);
    ct_tensor *two[2] = {a, a};
    ct_tensor *p = ct_einsum("ij,jk->ik", two, 2);
    assert_int_equal(ct_allclose(p, ct_mm(a, a), 1e-12, 1e-12, false), 1);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_propagation),  cmocka_unit_test(test_matmul_errors),
        cmocka_unit_test(test_addmm_linear_errors), cmocka_unit_test(test_misc_errors),
        cmocka_unit_test(test_einsum_errors),     cmocka_unit_test(test_gemm_paths),
        cmocka_unit_test(test_einsum_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
