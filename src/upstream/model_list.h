/* model_list.h: the models an account serves, as comma-separated exact
 * names: the operator's override (`account add/update --models`), the list
 * learned from an upstream's GET {base}/models, and membership. Pure: no
 * I/O; bad input gives an error or an empty result, never a crash. */
#ifndef SY_MODEL_LIST_H
#define SY_MODEL_LIST_H
#include <stddef.h>
#include "base/sbuf.h"

/* Longest model name kept; longer names are refused (override) or skipped
 * (upstream answer). */
#define MODEL_LIST_NAME_MAX 128
/* At most this many models are kept from one list. */
#define MODEL_LIST_MAX 512

/* 1 if model is one of the names in csv (exact match); 0 otherwise, and
 * when model is NULL or empty. */
int model_list_has(const char *csv, const char *model);

/* Normalizes an operator's list "a, b,c" into out as "a,b,c": names are
 * trimmed, duplicates dropped; an empty name, a name with a space, a quote,
 * a comma inside or a control byte, or more than MODEL_LIST_MAX names is an
 * error (-1 with err). An empty or blank input gives "" (no override). */
int model_list_normalize(const char *in, sbuf *out, char *err, size_t errlen);

/* Reads an upstream's GET /models answer: the OpenAI list
 * {"data":[{"id":...}]} or the ChatGPT backend's Codex form
 * {"models":[{"slug":...}, ...]} (codex-rs ModelsResponse / ModelInfo).
 * Appends the ids (comma-separated, duplicates and bad names skipped) to
 * ids, and, for the Codex form when codex is not NULL, the model objects
 * kept (those with a good, new slug) as a JSON array text to codex. 1 when
 * the answer was the Codex form, 0 the OpenAI form, -1 neither (nothing
 * appended). */
int model_list_parse_upstream(const char *body, size_t len, sbuf *ids, sbuf *codex);

#endif
