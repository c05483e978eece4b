/* demo.c -- placeholder main job until the nn issue lands: a tour of tensors. */
#include <ctorch/ctorch.h>
#include <stdio.h>

int main(void) {
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_arange(0, 6, 1, CT_F32);
    ct_tensor *b = ct_view(a, CT_SHAPE(2, 3));
    ct_print(ct_exp(b));
    ct_scope_end(s);
    return 0;
}
