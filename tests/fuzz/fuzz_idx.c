/* fuzz_idx.c -- the IDX reader (raw and gzip) on arbitrary bytes: it must
 * return a tensor or NULL with an error, never crash, leak or overread. */
#include <stddef.h>
#include <stdint.h>

#include <ctorch/ctorch.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_idx_load_buffer(data, size);
    if (t) {
        volatile int64_t n = ct_numel(t);
        (void)n;
    }
    ct_scope_end(s);
    ct_clear_error();
    return 0;
}
