/* model_poll.c: the model poll's kind (see model_poll.h): which accounts,
 * the URL, and what an answer does (a list that changed is stored,
 * store_writer_put_models, for the next start; the pool keeps the learned
 * list across reloads). When and how many is account_poll.c's. */
#include "accounts/model_poll.h"
#include "route/pool.h"
#include "upstream/model_list.h"
#include "upstream/upstream.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_BODY_MAX (4u << 20) /* the Codex form carries each model's instructions: a few hundred KiB */
#define MODEL_TIMEOUT_MS 30000

void model_poll_url(const char *base_url, int chatgpt, const char *client_version, char *out, size_t n)
{
    size_t blen = strlen(base_url);
    while (blen && base_url[blen - 1] == '/')
        blen--;
    const char *v = client_version && *client_version ? client_version : MODEL_POLL_CLIENT_VERSION;
    snprintf(out, n, "%.*s/models%s%s", (int)blen, base_url, chatgpt ? "?client_version=" : "", chatgpt ? v : "");
}

static int model_same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Sets an account's learned list (ids NULL: unknown) and Codex objects;
 * a change is stored (read back at the next start, so a restart routes by
 * it before its first poll answers). */
static void model_set(store *st, pool_account *pa, sbuf *ids, sbuf *codex)
{
    const char *new_ids = ids ? (ids->p ? ids->p : "") : NULL;
    const char *new_codex = codex && codex->len ? codex->p : NULL;
    int changed = !model_same(pa->models_upstream, new_ids) || !model_same(pa->models_codex_json, new_codex);
    free(pa->models_upstream);
    free(pa->models_codex_json);
    pa->models_upstream = NULL;
    pa->models_codex_json = NULL;
    if (ids) {
        pa->models_upstream = ids->p ? ids->p : strdup("");
        *ids = (sbuf)SBUF_INIT;
    }
    if (codex && codex->len) {
        pa->models_codex_json = codex->p;
        *codex = (sbuf)SBUF_INIT;
    }
    if (changed)
        store_writer_put_models(st, pa->a.id, pa->models_upstream, pa->models_codex_json);
}

static void model_answer(gateway *gw, pool_account *pa, up_result r, int status, int too_large, const sbuf *body,
                         const char *errmsg)
{
    if (r != UP_OK) {
        log_info("model poll: account %s: %s", pa->a.name, errmsg ? errmsg : "network error");
    } else if (status == 200 && !too_large) {
        sbuf ids = SBUF_INIT, codex = SBUF_INIT;
        int form = model_list_parse_upstream(body->p ? body->p : "", body->len, &ids, &codex);
        if (form >= 0) {
            model_set(gw->st, pa, &ids, &codex);
            log_debug("model poll: account %s: %s", pa->a.name, pa->models_upstream);
        } else {
            log_warn("model poll: account %s: /models answered something that is not a model list", pa->a.name);
        }
        sbuf_free(&ids);
        sbuf_free(&codex);
    } else if (status == 404) { /* no models endpoint: nothing known, it serves everything */
        model_set(gw->st, pa, NULL, NULL);
    } else {
        log_info("model poll: account %s: HTTP %d%s", pa->a.name, status, too_large ? " (answer too large)" : "");
    }
}

static long model_every(const gateway *gw) { return gw->cfg.model_poll_s; }

/* enabled accounts without the operator's list (it wins: nothing to
 * learn); not while its token is being replaced or is dead, nor held */
static int model_wanted(const pool_account *pa)
{
    return pa->a.enabled && !(pa->a.models && *pa->a.models) && !pa->refreshing && !pa->a.login_error && !pa->a.hold;
}

static void model_url(const gateway *gw, const pool_account *pa, char *out, size_t n)
{
    model_poll_url(pa->a.base_url, pa->a.kind == ACCOUNT_CHATGPT, gw->codex_version, out, n);
}

const poll_kind model_poll_kind = {"model poll", NULL, MODEL_BODY_MAX, MODEL_TIMEOUT_MS,
                                   model_every, model_wanted, model_url, model_answer};
