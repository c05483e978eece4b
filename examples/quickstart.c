/* quickstart.c -- the README's example. */
#include <ctorch/ctorch.h>
#include <stdio.h>

int main(void) {
    ct_manual_seed(0);
    ct_scope s = ct_scope_begin();                    /* owns every temporary */
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3), CT_F32);  /* [4, 3] normal samples */
    ct_tensor *w = ct_arange(0, 6, 1, CT_F32);
    w = ct_view(w, CT_SHAPE(3, 2));                   /* a view: no copy */
    ct_tensor *y = ct_softmax(ct_matmul(x, w), -1);   /* [4, 2], rows sum to 1 */
    ct_tensor *m = ct_mean(y, CT_SHAPE(0), false);    /* mean over dim 0 */
    ct_tensor *bad = ct_matmul(y, y);                 /* [4,2] @ [4,2]: an error */
    if (!bad) printf("error: %s\n", ct_last_error());
    ct_print(y);
    ct_print(m);
    ct_scope_end(s);                                  /* frees all of the above */
    return 0;
}
