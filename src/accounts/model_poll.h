/* model_poll.h: learns the models each account serves. For every enabled
 * account without an operator's --models list the poller (account_poll.h)
 * GETs {base}/models (with ?client_version= for chatgpt accounts, as Codex
 * asks the ChatGPT backend) at start and every model_poll_s seconds. A
 * list answer (the OpenAI list or the Codex form, upstream/model_list.h)
 * becomes the account's models_upstream in memory, where the router and
 * the catalog see it (and is stored when it changed, read back at the next
 * start); a 404 (no such endpoint) makes the list unknown again (the
 * account serves every model); other failures keep what was known. Polls
 * are transfers on the gateway's curl multi: nothing blocks the loop. */
#ifndef SY_MODEL_POLL_H
#define SY_MODEL_POLL_H
#include <stddef.h>
#include "core/gateway.h"

/* The client_version the poll sends the ChatGPT backend (it answers the
 * Codex form only with one) until a client has sent its own to GET /models
 * (gateway.codex_version): the catalog then lists what that Codex may use. */
#define MODEL_POLL_CLIENT_VERSION "0.98.0"

#include "accounts/poll_kind.h"

/* The model poll, for account_poll.c. */
extern const poll_kind model_poll_kind;

/* The models URL for an account base URL into out (NUL-terminated); a
 * ChatGPT account's asks with client_version (NULL or "": the default). */
void model_poll_url(const char *base_url, int chatgpt, const char *client_version, char *out, size_t n);

#endif
