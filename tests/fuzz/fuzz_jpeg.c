/* fuzz_jpeg.c -- the image decoder on arbitrary bytes (corpus: tiny valid
 * jpeg files and truncated/garbled variants).  Headers announcing more than
 * 2^20 pixels are only checked (ct_image_info), not decoded, so a run stays
 * fast; the size limits themselves are tested in test_transforms. */
#include <stddef.h>
#include <stdint.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_scope s = ct_scope_begin();
    int64_t h = 0, w = 0;
    int c = 0;
    if (ct_image_info(data, size, &h, &w, &c) == CT_OK && h * w <= (1 << 20)) {
        ct_tensor *t = ct_image_decode(data, size);
        if (t && (ct_ndim(t) != 3 || ct_size(t, 0) != h || ct_size(t, 1) != w)) __builtin_trap();
        ct_image_decode_mode(data, size, CT_IMAGE_RGB);
        ct_image_decode_mode(data, size, CT_IMAGE_GRAY);
    }
    ct_clear_error();
    ct_scope_end(s);
    return 0;
}
