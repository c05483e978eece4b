/* test_params.c -- the typed op parameters of params.def: for every family
 * and every field, equal parameters compare and hash equal, a change in any
 * one field makes them differ (in value and in hash), a list's entries past
 * its count do not count, -0.0 differs from 0.0 and NaN equals itself, and
 * the printed form names every field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op_table.h"
#include "autograd/autograd_impl.h"

/* the first op of family f */
static int op_of(int f) {
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (ct__op_pfam[op] == f) return op;
    return -1;
}

static ct_args zeroed(int op) {
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = (ct_op)op;
    return a;
}

/* Sets field f of a's family to a value that differs from zero: variant v
 * (1 or 2) gives two different nonzero values. */
static void poke(ct_args *a, const ct_pfield *f, int v) {
    char *base = (char *)&a->p;
    switch (f->kind) {
    case CT_PK_I64: { int64_t x = v == 1 ? 3 : -7; memcpy(base + f->off, &x, 8); break; }
    case CT_PK_F64: { double x = v == 1 ? 0.5 : -2.25; memcpy(base + f->off, &x, 8); break; }
    case CT_PK_BOOL: *(bool *)(void *)(base + f->off) = v == 1; break; /* v 2: stays false */
    case CT_PK_DTYPE: { ct_dtype d = v == 1 ? CT_F64 : CT_I64; memcpy(base + f->off, &d, sizeof d); break; }
    case CT_PK_STR: { const char *s = v == 1 ? "ij,jk->ik" : "ii->i"; memcpy(base + f->off, &s, sizeof s); break; }
    case CT_PK_ARR: { int64_t x = v == 1 ? 2 : 5; memcpy(base + f->off + 8 * (size_t)(f->n - 1), &x, 8); break; }
    case CT_PK_LIST: {
        int n = 1;
        int64_t x = v == 1 ? 4 : 9;
        memcpy(base + f->count_off, &n, sizeof n);
        memcpy(base + f->off, &x, 8);
        break;
    }
    }
}

static void every_field_counts(void **state) {
    (void)state;
    int families = 0, fields = 0;
    for (int fam = 1; fam < CT_PFAM_COUNT; fam++) {
        const ct_pfamily_info *fi = &ct__pfamilies[fam];
        int op = op_of(fam);
        assert_true(op >= 0);         /* a family no op uses is dead code */
        assert_true(fi->nfields > 0);
        assert_true(fi->size > 0 && fi->size <= sizeof(ct_params));
        families++;
        for (int k = 0; k < fi->nfields; k++) {
            const ct_pfield *f = &fi->fields[k];
            ct_args a = zeroed(op), b = zeroed(op);
            assert_true(ct__args_equal(&a, &b));
            assert_true(ct__args_hash(&a) == ct__args_hash(&b));
            poke(&b, f, 1);
            assert_false(ct__args_equal(&a, &b));
            assert_false(ct__args_hash(&a) == ct__args_hash(&b));
            poke(&a, f, 1);
            assert_true(ct__args_equal(&a, &b));
            assert_true(ct__args_hash(&a) == ct__args_hash(&b));
            if (f->kind != CT_PK_BOOL) {
                poke(&b, f, 2);
                assert_false(ct__args_equal(&a, &b));
                assert_false(ct__args_hash(&a) == ct__args_hash(&b));
            }
            char *s = ct__args_str(&a);
            assert_non_null(s);
            char want[96];
            snprintf(want, sizeof want, "%s=", f->name);
            assert_non_null(strstr(s, want));
            assert_int_equal(strncmp(s, ct__op_info[op].name, strlen(ct__op_info[op].name)), 0);
            free(s);
            fields++;
        }
    }
    printf("%d parameter families, %d fields\n", families, fields);
    assert_true(families > 0);
}

/* Entries of a list past its count are not part of the parameters. */
static void list_tail_ignored(void **state) {
    (void)state;
    int seen = 0;
    for (int fam = 1; fam < CT_PFAM_COUNT; fam++) {
        const ct_pfamily_info *fi = &ct__pfamilies[fam];
        for (int k = 0; k < fi->nfields; k++) {
            const ct_pfield *f = &fi->fields[k];
            if (f->kind != CT_PK_LIST || f->n < 2) continue;
            ct_args a = zeroed(op_of(fam)), b = zeroed(op_of(fam));
            poke(&a, f, 1);
            poke(&b, f, 1);
            int64_t junk = 77;
            memcpy((char *)&b.p + f->off + 8, &junk, 8);
            assert_true(ct__args_equal(&a, &b));
            assert_true(ct__args_hash(&a) == ct__args_hash(&b));
            int n = 2;
            memcpy((char *)&b.p + f->count_off, &n, sizeof n);
            assert_false(ct__args_equal(&a, &b));
            seen++;
        }
    }
    printf("%d list fields checked\n", seen);
}

/* Doubles by their bits; a different op is a different parameter set. */
static void doubles_and_ops(void **state) {
    (void)state;
    for (int fam = 1; fam < CT_PFAM_COUNT; fam++) {
        const ct_pfamily_info *fi = &ct__pfamilies[fam];
        for (int k = 0; k < fi->nfields; k++) {
            const ct_pfield *f = &fi->fields[k];
            if (f->kind != CT_PK_F64) continue;
            ct_args a = zeroed(op_of(fam)), b = zeroed(op_of(fam));
            double nz = -0.0, nan1 = NAN;
            memcpy((char *)&b.p + f->off, &nz, 8);
            assert_false(ct__args_equal(&a, &b));
            memcpy((char *)&a.p + f->off, &nan1, 8);
            memcpy((char *)&b.p + f->off, &nan1, 8);
            assert_true(ct__args_equal(&a, &b));
            assert_true(ct__args_hash(&a) == ct__args_hash(&b));
        }
    }
    for (int fam = 1; fam < CT_PFAM_COUNT; fam++) {
        int first = -1;
        for (int op = 0; op < CT_OP_COUNT; op++) {
            if (ct__op_pfam[op] != fam) continue;
            if (first < 0) { first = op; continue; }
            ct_args a = zeroed(first), b = zeroed(op);
            assert_false(ct__args_equal(&a, &b));
            assert_false(ct__args_hash(&a) == ct__args_hash(&b));
        }
    }
}

/* The args an op recorded for t (its grad_fn node's). */
static const ct_args *recorded(ct_tensor *t) {
    const ct_ag_meta *m = ct__ag_peek(t);
    assert_non_null(m);
    assert_non_null(m->grad_fn);
    return m->grad_fn->args;
}

/* squeeze's params name the dims it may remove: squeeze() and squeeze(0)
 * of a [1, 1, 3] tensor differ (a cache on params must not mix them up),
 * squeeze(0) and squeeze(-3) are the same op. */
static void squeeze_params_name_the_dims(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(1, 1, 3), CT_F32);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_tensor *all = ct_squeeze(x), *d0 = ct_squeeze_dim(x, 0), *dm3 = ct_squeeze_dim(x, -3);
    assert_non_null(all);
    assert_non_null(d0);
    assert_non_null(dm3);
    assert_int_equal(ct_ndim(all), 1);
    assert_int_equal(ct_ndim(d0), 2);
    const ct_args *a = recorded(all), *b = recorded(d0), *c = recorded(dm3);
    assert_int_equal(a->op, CT_OP_squeeze);
    assert_false(ct__args_equal(a, b));
    assert_true(ct__args_equal(b, c));
    assert_int_equal(b->p.view.dims_n, 1);
    assert_int_equal(b->p.view.dims[0], 0);
    assert_int_equal(a->p.view.dims_n, 3);
    ct_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_field_counts),
        cmocka_unit_test(list_tail_ignored),
        cmocka_unit_test(doubles_and_ops),
        cmocka_unit_test(squeeze_params_name_the_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
