/* fuzz_csvds.c -- the CSV dataset parser on arbitrary bytes.  The first
 * byte picks the label column mode (none / "label" as int64 / "y" as
 * float32); a parsed dataset is read back entirely. */
#include <stddef.h>
#include <stdint.h>

#include <ctorch/ctorch.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] % 3;
    const char *label = mode == 0 ? NULL : mode == 1 ? "label" : "y";
    ct_scope s = ct_scope_begin();
    ct_dataset *d = ct_csv_dataset_from_buffer((const char *)data + 1, size - 1, label,
                                               mode == 2 ? CT_F32 : CT_I64);
    if (d) {
        ct_sample *sm = ct_sample_new();
        int64_t n = ct_dataset_len(d);
        for (int64_t i = 0; i < n && i < 1000; i++)
            if (ct_dataset_get(d, i, sm) != CT_OK) __builtin_trap();
        ct_sample_free(sm);
        ct_dataset_release(d);
    }
    ct_scope_end(s);
    ct_clear_error();
    return 0;
}
