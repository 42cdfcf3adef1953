/* proxy.h: one client request through the pool: ask the router for the
 * candidate order, try each candidate upstream, let the policy classify
 * failures (cooldown, fail over or return), hold streamed responses in
 * preflight until they carry output, then commit and stream through. After
 * commit a request is never replayed on another account. */
#ifndef SY_PROXY_H
#define SY_PROXY_H
#include <event2/http.h>
#include "gateway.h"
#include "json.h"
#include "preflight.h"
#include "sbuf.h"

typedef struct proxy_input {
    int64_t key_id;
    int64_t preferred_account;  /* 0 none */
    api_kind api;
    const char *endpoint;       /* "/v1/responses", "/v1/chat/completions", "/v1/models" */
    const char *suffix;         /* appended to the account base_url: "/responses", ... */
    int is_get;
    int stream;
    char model[128];
    char previous_response_id[128];
    json_value *doc;            /* parsed body, owned by the proxy from here (NULL for GET) */
    sbuf body;                  /* raw body, owned by the proxy from here */
} proxy_input;

/* Takes over req and in (body, doc). Always answers the client eventually. */
void proxy_start(gateway *gw, struct evhttp_request *req, proxy_input *in);

/* Hands the client bytes gathered in this loop turn to libevent now
 * (server_reply_chunk) instead of at the end of the turn. Only where no
 * proxy or curl code is on the stack: after an upstream event (serve.c). */
void proxy_flush_pending(void);

#endif
