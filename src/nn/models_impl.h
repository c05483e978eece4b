/* models_impl.h -- private to src/nn/models_*.c (and the fuzz target
 * tests/fuzz/fuzz_json.c): the config readers of the pretrained-model
 * loaders, on a byte buffer. */
#ifndef CT_MODELS_IMPL_H
#define CT_MODELS_IMPL_H

#include <stddef.h>

#include "ctorch/models.h"

/* A BERT config.json (Hugging Face; the config ct_sentence_encoder_load
 * reads) from text[0..len) -- any bytes, no NUL terminator needed: it must be
 * UTF-8 holding one JSON object.  Members that are absent keep
 * ct_bert_base_config()'s values; integers must be non-negative (at most
 * 2^40; pad_token_id may be null: -1), model_type "bert", hidden_act "gelu",
 * position_embedding_type "absolute" when given.  path only names the file
 * in error messages.  0 and *c filled, or -1 with the error set. */
int ct__bert_config_parse(const char *text, size_t len, const char *path, ct_bert_config *c);

#endif
