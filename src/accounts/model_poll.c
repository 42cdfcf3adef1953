/* model_poll.c: per-account model list polling (see model_poll.h); a list
 * that changed is stored (store_writer_put_models) for the next start. One
 * entry per polled account holds when its next poll is due and the
 * transfer in flight; the account is always found again by id, because a
 * pool reload may move it (the pool keeps the learned list across reloads). */
#include "accounts/model_poll.h"
#include "accounts/account_get.h"
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

typedef struct model_entry {
    int64_t account_id;
    double next_at;    /* next poll, unix seconds */
    upstream_req *up;  /* in flight, NULL none */
    int status;
    int too_large;     /* the answer went past MODEL_BODY_MAX */
    sbuf body;
    model_poll *owner;
    int live;
} model_entry;

struct model_poll {
    gateway *gw;
    model_entry **e;
    size_t n, cap;
};

model_poll *model_poll_new(gateway *gw)
{
    model_poll *m = calloc(1, sizeof *m);
    m->gw = gw;
    return m;
}

static void model_entry_free(model_entry *e)
{
    if (e->up)
        upstream_cancel(e->up);
    sbuf_free(&e->body);
    free(e);
}

void model_poll_free(model_poll *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        model_entry_free(m->e[i]);
    free(m->e);
    free(m);
}

static model_entry *model_find(model_poll *m, int64_t id)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i]->account_id == id)
            return m->e[i];
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 8;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
    }
    model_entry *e = calloc(1, sizeof *e);
    e->account_id = id;
    e->owner = m;
    m->e[m->n++] = e;
    return e;
}

void model_poll_url(const char *base_url, int chatgpt, const char *client_version, char *out, size_t n)
{
    size_t blen = strlen(base_url);
    while (blen && base_url[blen - 1] == '/')
        blen--;
    const char *v = client_version && *client_version ? client_version : MODEL_POLL_CLIENT_VERSION;
    snprintf(out, n, "%.*s/models%s%s", (int)blen, base_url, chatgpt ? "?client_version=" : "", chatgpt ? v : "");
}

static int model_on_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    (void)h, (void)n;
    model_entry *e = ud;
    e->status = status;
    return 0;
}

static int model_on_data(void *ud, const char *p, size_t n)
{
    model_entry *e = ud;
    if (e->body.len + n <= MODEL_BODY_MAX)
        sbuf_append(&e->body, p, n);
    else
        e->too_large = 1;
    return 0;
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

static void model_on_done(void *ud, up_result r, const char *errmsg)
{
    model_entry *e = ud;
    gateway *gw = e->owner->gw;
    e->up = NULL; /* freed by upstream right after this returns */
    pool_account *pa = pool_find(gw->pool, e->account_id);
    if (!pa) {
        sbuf_reset(&e->body);
        return;
    }
    int status = r == UP_OK ? e->status : 0;
    if (r != UP_OK) {
        log_info("model poll: account %s: %s", pa->a.name, errmsg ? errmsg : "network error");
    } else if (status == 200 && !e->too_large) {
        sbuf ids = SBUF_INIT, codex = SBUF_INIT;
        int form = model_list_parse_upstream(e->body.p ? e->body.p : "", e->body.len, &ids, &codex);
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
        log_info("model poll: account %s: HTTP %d%s", pa->a.name, status, e->too_large ? " (answer too large)" : "");
    }
    e->too_large = 0;
    sbuf_keep(&e->body, 64u << 10);
}

static const upstream_callbacks model_cb = {model_on_headers, model_on_data, model_on_done};

static void model_start(model_poll *m, model_entry *e, const pool_account *pa)
{
    char url[2048];
    model_poll_url(pa->a.base_url, pa->a.kind == ACCOUNT_CHATGPT, m->gw->codex_version, url, sizeof url);
    e->status = 0;
    e->too_large = 0;
    sbuf_reset(&e->body);
    e->up = account_get_start(m->gw->up, pa, url, MODEL_TIMEOUT_MS, &model_cb, e, "model poll");
}

void model_poll_tick(model_poll *m, double now)
{
    long every = m->gw->cfg.model_poll_s;
    for (size_t i = 0; i < m->n; i++)
        m->e[i]->live = 0;
    for (size_t i = 0; every > 0 && i < pool_count(m->gw->pool); i++) {
        pool_account *pa = pool_at(m->gw->pool, i);
        /* the operator's list wins: nothing to learn */
        if (!pa->a.enabled || (pa->a.models && *pa->a.models))
            continue;
        model_entry *e = model_find(m, pa->a.id);
        e->live = 1;
        if (e->up || pa->refreshing || pa->a.login_error || pa->a.hold)
            continue;
        if (e->next_at > now + (double)every) /* the interval was shortened */
            e->next_at = now + (double)every;
        if (now < e->next_at)
            continue;
        e->next_at = now + (double)every;
        model_start(m, e, pa);
    }
    for (size_t i = 0; i < m->n;) { /* accounts removed, disabled or given a list */
        if (m->e[i]->live) {
            i++;
            continue;
        }
        model_entry_free(m->e[i]);
        m->e[i] = m->e[--m->n];
    }
}
