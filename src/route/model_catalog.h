/* model_catalog.h: the gateway's own answer to GET /v1/models: the union
 * of the models the pool's usable accounts (enabled, not held, not needing
 * a login) serve, as the OpenAI list, or, for Codex's picker
 * (?client_version=), in Codex's own form built from the Codex-form answers
 * the model poll kept (upstream/model_list.h). An account whose list is not
 * known adds nothing; a model it refused is left out; a platform key's
 * allowed models narrow the list. When nothing is known the builders say
 * so and the request is passed through to an account as before. Pure: no
 * I/O. */
#ifndef SY_MODEL_CATALOG_H
#define SY_MODEL_CATALOG_H
#include "base/sbuf.h"
#include "route/pool.h"

/* {"object":"list","data":[{"id":...,"object":"model","created":0,
 * "owned_by":"switchyard"}...]} into out, allowed (a key's allowed_models
 * patterns, NULL every model) applied. Returns the number of accounts
 * whose list was known: 0 means "not known, pass through" (out empty). */
size_t model_catalog_openai(pool *p, const char *allowed, sbuf *out);

/* {"models":[...]} (codex-rs ModelsResponse), each slug once (the first
 * account in pool order that has it gives its object). Returns the number
 * of accounts that gave Codex-form objects; 0: pass through (out empty). */
size_t model_catalog_codex(pool *p, const char *allowed, sbuf *out);

#endif
