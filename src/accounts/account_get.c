/* account_get.c: a GET on an account's own upstream (see account_get.h). */
#include "accounts/account_get.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <string.h>

upstream_req *account_get_start(upstream *up, const pool_account *pa, const char *url, long timeout_ms,
                                const upstream_callbacks *cb, void *ud, const char *what)
{
    sbuf auth = SBUF_INIT;
    int anthropic = pa->a.kind == ACCOUNT_ANTHROPIC; /* x-api-key and a version, as its API asks */
    if (!anthropic)
        sbuf_puts(&auth, "Bearer ");
    sbuf_puts(&auth, pa->a.token);
    upstream_header h[4];
    size_t nh = 0;
    h[nh++] = (upstream_header){anthropic ? "x-api-key" : "Authorization", auth.p};
    h[nh++] = (upstream_header){"Accept", "application/json"};
    if (anthropic)
        h[nh++] = (upstream_header){"anthropic-version", "2023-06-01"};
    if (pa->a.kind == ACCOUNT_CHATGPT) {
        h[nh++] = (upstream_header){"originator", "codex_cli_rs"};
        if (pa->a.chatgpt_account_id && *pa->a.chatgpt_account_id)
            h[nh++] = (upstream_header){"ChatGPT-Account-Id", pa->a.chatgpt_account_id};
    }
    upstream_spec spec = {url, NULL, 0, h, nh, timeout_ms, 0, NULL};
    upstream_req *r = upstream_start(up, &spec, cb, ud);
    if (!r)
        log_warn("account %s: %s could not start", pa->a.name, what);
    explicit_bzero(auth.p, auth.len);
    sbuf_free(&auth);
    return r;
}
