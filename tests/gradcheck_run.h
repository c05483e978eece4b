/* gradcheck_run.h -- the loop over a family's gradcheck cases (tests/grad_*.c,
 * gradcheck_harness.h) that test_gradcheck and test_fwad_ops share: each
 * case run contiguous, then non-contiguous unless GC_CONTIG_ONLY, marking
 * per op whether it has a case (seen) and a passing one (passed).  Include
 * after autograd/autograd_impl.h (the op table). */
#ifndef CT_GRADCHECK_RUN_H
#define CT_GRADCHECK_RUN_H

#include <stdio.h>
#include <string.h>

#include "gradcheck_harness.h"

/* the op-table index of an op name, or -1 */
static inline int gc_op_index(const char *name) {
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (strcmp(ct__op_info[i].name, name) == 0) return i;
    return -1;
}

/* Runs cases[0..n) through run (1: passed); returns the failures.  *gg
 * (may be NULL) counts the passing cases flagged GC_GRADGRAD. */
static inline int gc_run_family(const char *name, const gc_case *cases, int n,
                                int (*run)(const gc_case *c, int noncontig), char *seen, char *passed,
                                int *gg) {
    int fails = 0;
    for (int i = 0; i < n; i++) {
        const gc_case *c = &cases[i];
        int op = gc_op_index(c->op);
        if (op < 0) {
            fprintf(stderr, "  FAIL %s/%s: '%s' is not in the op table\n", name, c->label, c->op);
            fails++;
            continue;
        }
        seen[op] = 1;
        int ok = run(c, 0);
        if (ok && !(c->flags & GC_CONTIG_ONLY)) ok = run(c, 1);
        if (ok) passed[op] = 1;
        else fails++;
        if (ok && gg && (c->flags & GC_GRADGRAD)) (*gg)++;
    }
    return fails;
}

#endif
