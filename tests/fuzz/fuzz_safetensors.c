/* fuzz_safetensors.c -- the safetensors header parser and loader on
 * arbitrary bytes: open must return a file or NULL with an error, never
 * crash, leak or read out of bounds; every tensor of a file that opens is
 * loaded and all its bytes read (ASan checks they lie inside the buffer),
 * and the loaded tensors serialize and reopen. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <ctorch/ctorch.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_scope s = ct_scope_begin();
    ct_safetensors *f = ct_safetensors_open_buffer(data, size, "fuzz");
    if (f) {
        volatile unsigned sum = 0;
        for (int i = 0; i < ct_safetensors_metadata_count(f); i++)
            sum += (unsigned)ct_safetensors_metadata_key(f, i)[0] +
                   (unsigned)ct_safetensors_metadata_value(f, i)[0];
        ct_sample *all = ct_sample_new();
        for (int i = 0; i < ct_safetensors_count(f); i++) {
            const char *name = ct_safetensors_name(f, i);
            ct_tensor *t = ct_safetensors_get(f, name);
            if (!t) continue;
            const unsigned char *p = ct_data_ptr(t);
            size_t nb = (size_t)ct_numel(t) * ct_dtype_size(ct_get_dtype(t));
            for (size_t k = 0; k < nb; k++) sum += p[k];
            if (ct_sample_set(all, name, t)) break;
        }
        void *buf = NULL;
        size_t n = 0;
        if (ct_safetensors_serialize(all, NULL, &buf, &n) == CT_OK) {
            ct_safetensors *g = ct_safetensors_open_buffer(buf, n, "fuzz-roundtrip");
            if (!g) abort(); /* what we write must read back */
            ct_safetensors_close(g);
        }
        free(buf);
        (void)sum;
        ct_sample_free(all);
        ct_safetensors_close(f);
    }
    ct_scope_end(s);
    ct_clear_error();
    return 0;
}
