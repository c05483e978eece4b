/* text_impl.h -- private to src/text: the per-character behaviour of the
 * BERT tokenizer, generated into unicode_data.c by
 * tools/gen_unicode_table.py from the tokenizers library itself. */
#ifndef CT_TEXT_IMPL_H
#define CT_TEXT_IMPL_H

#include <stdbool.h>
#include <stdint.h>

bool ct__uc_is_drop(uint32_t cp);   /* NUL, U+FFFD, category C* except \t \n \r */
bool ct__uc_is_space(uint32_t cp);  /* cleaned to ' ': White_Space */
bool ct__uc_is_split(uint32_t cp);  /* other pre-tokenizer separators left after cleaning */
bool ct__uc_is_punct(uint32_t cp);  /* BERT's _is_punctuation */
bool ct__uc_is_mn(uint32_t cp);     /* category Mn */
/* The lowercase of one character (Rust's char::to_lowercase, as the
 * tokenizers library does it: no final-sigma context): writes 1 or 2 code
 * points, returns the count. */
int ct__uc_lower(uint32_t cp, uint32_t out[2]);
/* strip_accents: NFD of cp with the Mn marks dropped: *seq points to the result (into a
 * static table or buf), returns its length (0..3+). */
int ct__uc_strip_accents(uint32_t cp, const uint32_t **seq, uint32_t buf[3]);

#endif
