/* ctorch/text.h -- text processing (the torchtext / tokenizers piece):
 * tokenizers that turn strings into token ids for the text models. */
#ifndef CTORCH_TEXT_H
#define CTORCH_TEXT_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- section: wordpiece (src/text/wordpiece*.c) ---- */
/* BERT's WordPiece tokenizer: the same ids as transformers' BertTokenizer
 * (transformers 5, backed by the tokenizers library: BertNormalizer,
 * BertPreTokenizer, WordPiece, [CLS] $A [SEP]) built from the same vocab.txt:
 *
 *   1. special tokens written in the text ("[CLS]", "[SEP]", "[PAD]",
 *      "[MASK]", "[UNK]", case-sensitive, when in the vocab) are split out
 *      whole and map to their ids;
 *   2. cleaning: NUL, U+FFFD and control / format / unassigned characters
 *      (category C*, except tab, newline, return) are dropped, whitespace
 *      becomes a space;
 *   3. every CJK ideograph becomes a word of its own;
 *   4. lower_case: accents stripped (NFD, then the nonspacing marks,
 *      category Mn, dropped) and each character lower-cased (full case
 *      mapping, no final-sigma rule -- like the reference);
 *   5. split on whitespace; punctuation (ASCII punctuation and category P*)
 *      split off as single-character words;
 *   6. each word: longest-match-first pieces, continuations prefixed "##";
 *      a word longer than 100 characters or with an unmatched rest is one
 *      [UNK].
 *
 * The character tables are measured on the tokenizers library itself
 * (tools/gen_unicode_table.py).  Texts are NUL-terminated UTF-8; invalid
 * UTF-8 (overlongs, surrogates, > U+10FFFF, truncated sequences) and texts
 * over 2^30 bytes are errors (CT_ERR_ARG), never a crash.  A tokenizer is
 * immutable after loading: threads may share it. */
typedef struct ct_wordpiece ct_wordpiece;

/* Loads a vocab.txt: one token per line (newline, CR-LF or CR ends a
 * line), the id is the line number; a repeated token maps to its last
 * line, like BertTokenizer's load_vocab.  NULL + error: CT_ERR_IO (cannot
 * read), CT_ERR_FORMAT (not UTF-8, empty, over 1 GiB). */
CT_API ct_wordpiece *ct_wordpiece_load(const char *vocab_txt, bool lower_case);
/* The same from the bytes of a vocab file in memory (copied). */
CT_API ct_wordpiece *ct_wordpiece_load_buffer(const char *data, size_t size, bool lower_case);
CT_API void ct_wordpiece_free(ct_wordpiece *tok);   /* NULL is a no-op */

/* Number of lines (ids 0 .. n-1). */
CT_API int64_t ct_wordpiece_vocab_size(const ct_wordpiece *tok);
/* Id of a token string, or -1 (no error recorded). */
CT_API int64_t ct_wordpiece_token_to_id(const ct_wordpiece *tok, const char *token);
/* The token of an id (borrowed, valid until free), or NULL + CT_ERR_INDEX. */
CT_API const char *ct_wordpiece_id_to_token(const ct_wordpiece *tok, int64_t id);
/* Ids of the special tokens, -1 when the vocab lacks them. */
CT_API int64_t ct_wordpiece_cls_id(const ct_wordpiece *tok);
CT_API int64_t ct_wordpiece_sep_id(const ct_wordpiece *tok);
CT_API int64_t ct_wordpiece_pad_id(const ct_wordpiece *tok);
CT_API int64_t ct_wordpiece_unk_id(const ct_wordpiece *tok);

/* tokenizer(text, add_special_tokens, truncation=True, max_length)
 * ["input_ids"]: an int64 tensor [n] (scope-owned).  add_special_tokens
 * wraps the pieces in [CLS] ... [SEP]; max_length > 0 truncates the
 * result to that many ids (the [SEP] kept), 0 means no limit. */
CT_API ct_tensor *ct_wordpiece_encode(const ct_wordpiece *tok, const char *text, int64_t max_length,
                                      bool add_special_tokens);
/* The same for text[0..len) (may hold NUL bytes, which are dropped as
 * control characters like the reference does). */
CT_API ct_tensor *ct_wordpiece_encode_len(const ct_wordpiece *tok, const char *text, size_t len,
                                          int64_t max_length, bool add_special_tokens);
/* tokenizer(texts, padding=True, truncation=True, max_length): [CLS] ...
 * [SEP] for each text, truncated to max_length (> 0, or 0: no limit), all
 * padded with [PAD] to the longest; *input_ids [n, L] int64 and
 * *attention_mask [n, L] int64 (1 = token, 0 = padding), scope-owned.
 * attention_mask may be NULL when not wanted.  n >= 1. */
CT_API ct_status ct_wordpiece_encode_batch(const ct_wordpiece *tok, const char *const *texts, int64_t n,
                                           int64_t max_length, ct_tensor **input_ids,
                                           ct_tensor **attention_mask) CT_NODISCARD;
/* tokenizer.decode(ids, skip_special_tokens): tokenizers' WordPiece
 * decoder -- tokens joined by spaces, a "##" continuation glued to the
 * previous one, and each token's clean-up of a space before . ? ! , and
 * contractions ("hello , world" -> "hello, world"; "don ' t" stays).  A malloc'ed string (free()), or NULL + CT_ERR_INDEX for
 * an id outside the vocab. */
CT_API char *ct_wordpiece_decode(const ct_wordpiece *tok, const int64_t *ids, int64_t n,
                                 bool skip_special_tokens);
/* ---- end section: wordpiece ---- */

#ifdef __cplusplus
}
#endif
#endif
