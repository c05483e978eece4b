/* index_impl.h -- private helpers shared by src/ops/index.c and shape.c. */
#ifndef CT_INDEX_IMPL_H
#define CT_INDEX_IMPL_H

#include "ew.h"
#include "meta.h"

/* A meta function's failure: the error the check just recorded. */
#define CT_IDX_FAILED() (ct_last_error_code() ? ct_last_error_code() : CT_ERR_ARG)
/* dim wrapped as ct__wrap_dim wraps it (after a meta function checked it) */
static inline int64_t ct__idx_wrapped(int64_t dim, int ndim) {
    return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}
/* The output m describes (not a view, not dynamic), op's kernel run on the
 * prepared inputs kin[0..nkin) into it: the output (refcount 1, no scope,
 * not yet recorded) or NULL with the error. */
ct_tensor *ct__idx_alloc_run(ct_op op, const ct_meta *m, ct_tensor *const *kin, int nkin, const ct_args *a);

/* A fresh contiguous copy of t converted to dt (refcount 1, no scope). */
ct_tensor *ct__idx_copy_as(ct_tensor *t, ct_dtype dt);
/* Checks that ix is int64/int32, copies it to a fresh contiguous int64
 * tensor, bounds-checks every value against size (negatives wrap when
 * allow_neg) with "op: index i is out of bounds for dimension d with size
 * n".  NULL + error otherwise. */
ct_tensor *ct__idx_checked(const char *op, ct_tensor *ix, int64_t size, int64_t dim, int allow_neg);
/* Copies r into x (x <- r, any layout) and releases r; returns x finished
 * as the in-place form of op (recorded with inputs in[0..nin) -- x among
 * them -- and args a) or NULL.  name: the in-place op's name for errors. */
ct_tensor *ct__idx_writeback(ct_op op, ct_tensor *x, ct_tensor *r, ct_tensor *const *in, int nin,
                             const ct_args *a, const char *name);

#endif
