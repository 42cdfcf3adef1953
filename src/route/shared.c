/* shared.c: the interface's calls, and the local implementation (see
 * shared.h): a lone gateway, or one told no Redis, shares nothing. */
#include "route/shared.h"
#include <stdlib.h>

static shared_call *shared_local_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
{
    fn(ud, SHARED_REFRESH_GO, NULL); /* oauth's single flight per account is enough in one process */
    return NULL;
}

static void shared_local_refresh_end(shared *sh, const char *account_name, const account *fresh) {}
static void shared_local_call_cancel(shared *sh, shared_call *c) {}
static void shared_local_rest_changed(shared *sh, pool_account *pa) {}

static int shared_local_degraded(const shared *sh, char *why, size_t n)
{
    if (n)
        why[0] = '\0';
    return 0;
}

static void shared_local_free(shared *sh) { free(sh); }

static const shared_ops shared_local_ops = {
    "local", shared_local_refresh_begin, shared_local_refresh_end, shared_local_call_cancel,
    shared_local_rest_changed, shared_local_degraded, shared_local_free,
};

shared *shared_local_new(gateway *gw)
{
    shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->ops = &shared_local_ops;
    sh->gw = gw;
    return sh;
}

static void shared_on_rest(void *ud, pool_account *pa)
{
    shared *sh = ud;
    sh->ops->rest_changed(sh, pa);
}

void shared_attach(shared *sh)
{
    /* the local one leaves the hook unset: not even a call per request */
    if (sh && sh->ops != &shared_local_ops)
        pool_on_rest(sh->gw->pool, shared_on_rest, sh);
}

void shared_free(shared *sh)
{
    if (!sh)
        return;
    if (sh->gw && sh->gw->pool)
        pool_on_rest(sh->gw->pool, NULL, NULL);
    sh->ops->free(sh);
}

const char *shared_kind(const shared *sh) { return sh ? sh->ops->name : "local"; }

shared_call *shared_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
{
    if (!sh) {
        fn(ud, SHARED_REFRESH_GO, NULL);
        return NULL;
    }
    return sh->ops->refresh_begin(sh, pa, fn, ud);
}

void shared_refresh_end(shared *sh, const char *account_name, const account *fresh)
{
    if (sh)
        sh->ops->refresh_end(sh, account_name, fresh);
}

void shared_call_cancel(shared *sh, shared_call *c)
{
    if (sh && c)
        sh->ops->call_cancel(sh, c);
}

void shared_on_login(shared *sh, shared_login_fn fn, void *ud)
{
    if (!sh)
        return;
    sh->on_login = fn;
    sh->on_login_ud = ud;
}

int shared_degraded(const shared *sh, char *why, size_t n)
{
    if (!sh) {
        if (n)
            why[0] = '\0';
        return 0;
    }
    return sh->ops->degraded(sh, why, n);
}
