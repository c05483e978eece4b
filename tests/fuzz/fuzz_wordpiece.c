/* fuzz_wordpiece.c -- the WordPiece tokenizer on arbitrary bytes.  The
 * first byte picks the mode; the input is split at the first "\n--\n":
 * before it a vocab file, after it the text (without the separator, the
 * whole input is the text and a small built-in vocab is used).  Loading
 * and encoding must return a result or NULL with an error -- never crash,
 * leak or read out of bounds; every id encoded is inside the vocab and
 * decodes back to a string. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

static const char k_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n##a\n##b\n##c\nab\n##bc\n,\n.\n!\n"
                              "\xe4\xb8\xad\n\xc3\xa9\ne\nhello\n##llo\nhe\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool lower = data[0] & 1, special = data[0] & 2;
    int64_t max_length = (data[0] >> 2) & 7; /* 0: no limit */
    if (special && max_length == 1) max_length = 2;
    data++;
    size--;
    const uint8_t *sep = NULL;
    for (size_t i = 0; i + 4 <= size; i++)
        if (!memcmp(data + i, "\n--\n", 4)) {
            sep = data + i;
            break;
        }
    ct_scope s = ct_scope_begin();
    ct_wordpiece *tok = sep ? ct_wordpiece_load_buffer((const char *)data, (size_t)(sep - data) + 1, lower)
                            : ct_wordpiece_load_buffer(k_vocab, sizeof k_vocab - 1, lower);
    const uint8_t *text = sep ? sep + 4 : data;
    size_t tlen = sep ? size - (size_t)(text - data) : size;
    if (tok) {
        ct_tensor *ids = ct_wordpiece_encode_len(tok, (const char *)text, tlen, max_length, special);
        if (ids) {
            const int64_t *p = ct_data_ptr(ids);
            int64_t n = ct_numel(ids);
            for (int64_t i = 0; i < n; i++)
                if (p[i] < 0 || p[i] >= ct_wordpiece_vocab_size(tok)) abort();
            if (max_length > 0 && n > max_length) abort();
            char *d = ct_wordpiece_decode(tok, p, n, lower);
            if (!d) abort();
            free(d);
        }
        /* the batch path on a NUL-terminated copy */
        char *z = malloc(tlen + 1);
        memcpy(z, text, tlen);
        z[tlen] = 0;
        const char *texts[2] = {z, "a b"};
        ct_tensor *bi = NULL, *bm = NULL;
        if (ct_wordpiece_encode_batch(tok, texts, 2, max_length == 1 ? 2 : max_length, &bi, &bm) == CT_OK &&
            ct_size(bi, 0) != 2)
            abort();
        free(z);
        ct_wordpiece_free(tok);
    }
    ct_scope_end(s);
    ct_clear_error();
    return 0;
}
