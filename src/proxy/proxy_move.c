/* proxy_move.c: what travels with a conversation when one of its requests
 * goes to another account than the one that holds it (the life of a
 * request: proxy.c; docs/architecture.md "How a conversation moves").
 *
 * - The turn state (x-codex-turn-state) is readable only where it was made:
 *   an attempt on another account goes without it (proxy_attempt.c drops
 *   the header) and the move is traced here.
 * - Account-bound blobs (encrypted reasoning, compaction items, encrypted
 *   parts: upstream/blobs.h) are found once per request; before each
 *   attempt every blob the target did not mint is put to the strip policy
 *   (policies/strip.lua), and the body is rewritten only when one goes. A
 *   blob of unknown origin passes untouched, unless the target has already
 *   refused one (the strip-retry, at most once per request).
 * - Who minted what is recorded from the answers relayed: each finished
 *   output item of a stream, the whole body of a plain answer.
 * - A response relayed with store (the API's default) is recorded as a
 *   turn: its input items, output items and the response it continued
 *   (store/store_conversations.h). When the owner of a request's
 *   previous_response_id cannot serve, the request is rebuilt from that
 *   record as one whole input without previous_response_id and goes to the
 *   next account (then its blobs are stripped as above); the new account's
 *   response id carries the chain on from there.
 * - The answer says what happened: x-switchyard-moved: <from>-><to> and
 *   x-switchyard-stripped: counts, never content. */
#include "proxy/proxy_internal.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "store/store_conversations.h"
#include "upstream/blobs.h"
#include "upstream/conversation.h"
#include "http/server.h"
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what replaces a blob the strip policy turns into text */
#define PROXY_BLOB_NOTE \
    "[Earlier context produced under another account was removed here: it is encrypted for that account only.]"

#define PROXY_STRIP_MEMO 8 /* distinct (item type, part, origin) answers kept per attempt */

/* An account's name, or #<id> for one removed since. */
static void proxy_account_name(proxy_req *p, int64_t id, char *out, size_t n)
{
    const pool_account *pa = pool_find(p->gw->pool, id);
    if (pa)
        sbuf_copy_cstr(out, n, pa->a.name);
    else
        snprintf(out, n, "#%lld", (long long)id);
}

/* This attempt takes the conversation off the account named from (its
 * stored response's owner, its turn state's, or the minter of a blob it
 * carries): the first such account of the attempt is the one the answer
 * names. */
static void proxy_move_from(proxy_req *p, int64_t from)
{
    if (!p->moved_from[0])
        proxy_account_name(p, from, p->moved_from, sizeof p->moved_from);
}

void proxy_note_move(proxy_req *p, const pool_account *pa)
{
    proxy_move_from(p, p->plan.turn_owner);
    p->strip_turn_state = 1;
    metrics_conversation_move(0);
    trace_event(p->gw->trace, "CONVERSATION_MOVE",
                "req=%llu attempt=%d from=%s to=%s by=x-codex-turn-state stripped=turn_state",
                (unsigned long long)p->id, p->attempts, p->moved_from, pa->a.name);
}

static void proxy_quick_key(void *ud, const char *key)
{
    proxy_req *p = ud;
    if (p->quick_n == p->quick_cap) {
        size_t cap = p->quick_cap ? p->quick_cap * 2 : 16;
        int64_t *v = realloc(p->quick_origin, cap * sizeof *v);
        if (!v)
            abort(); /* as sbuf: no useful work without memory */
        p->quick_origin = v;
        p->quick_cap = cap;
    }
    int64_t origin = pool_owner_get(p->gw->pool, key);
    p->quick_origin[p->quick_n++] = origin;
    if (!origin && p->quick_ask)
        shared_ask_add(p->quick_ask, SHARED_ASK_OWNER, key);
}

/* The quick look, once per request. */
static void proxy_blobs_look(proxy_req *p)
{
    if (p->blobs_looked)
        return;
    p->blobs_looked = 1;
    if (p->in.api == API_RESPONSES && !p->in.is_get && p->in.body.len)
        p->blobs_unsure = blobs_quick(p->in.body.p, p->in.body.len, proxy_quick_key, p) < 0;
}

/* The quick look made for shared_ask: the blobs of unknown origin are
 * asked for (a conversation whose last turn another gateway served). */
void proxy_blobs_ask(proxy_req *p, shared_ask *q)
{
    p->quick_ask = q;
    proxy_blobs_look(p);
    p->quick_ask = NULL;
}

/* The answer is in the owner map: the origins unknown before are looked
 * up again (the whole quick look, at the first attempt). */
void proxy_blobs_asked(proxy_req *p)
{
    for (size_t i = 0; i < p->quick_n; i++)
        if (!p->quick_origin[i]) {
            p->blobs_looked = 0;
            p->blobs_unsure = 0;
            p->quick_n = 0;
            return;
        }
}

/* Does the body need the full scan for pa: does it (maybe) carry a blob pa
 * did not mint that the strip policy would be asked about? The quick look
 * (a memmem, once per request) answers for almost every request: none, or
 * only pa's own and unknown ones. */
static int proxy_blobs_need_scan(proxy_req *p, const pool_account *pa)
{
    proxy_blobs_look(p);
    if (p->blobs_unsure)
        return 1;
    for (size_t i = 0; i < p->quick_n; i++)
        if (p->quick_origin[i] != pa->a.id && (p->quick_origin[i] || p->strip_retried))
            return 1;
    return 0;
}

/* Finds the request's blobs and who minted each, once per request. */
static void proxy_blobs_find(proxy_req *p)
{
    p->blobs_scanned = 1;
    if (blobs_scan(p->in.body.p, p->in.body.len, &p->blobs) != 0 || !p->blobs.n) {
        blobs_scan_free(&p->blobs); /* malformed or beyond the limits: the body goes as it came */
        return;
    }
    p->blob_origin = calloc(p->blobs.n, sizeof *p->blob_origin);
    if (!p->blob_origin) {
        blobs_scan_free(&p->blobs);
        return;
    }
    for (size_t i = 0; i < p->blobs.n; i++)
        p->blob_origin[i] = pool_owner_get(p->gw->pool, p->blobs.v[i].key);
}

/* The strip policy's answer for blob i on its way to pa, asked once per
 * distinct (item type, part, origin) of the attempt. */
static int proxy_blob_action(proxy_req *p, const pool_account *pa, size_t i, int64_t memo_origin[],
                             const blob_ref *memo_ref[], int memo_act[], size_t *nmemo)
{
    const blob_ref *b = &p->blobs.v[i];
    int64_t origin = p->blob_origin[i];
    if (origin == pa->a.id || (!origin && !p->strip_retried))
        return BLOB_KEEP; /* its own, or of unknown origin: untouched */
    for (size_t k = 0; k < *nmemo; k++)
        if (memo_origin[k] == origin && memo_ref[k]->in_part == b->in_part &&
            strcmp(memo_ref[k]->item_type, b->item_type) == 0)
            return memo_act[k];
    const pool_account *from = origin ? pool_find(p->gw->pool, origin) : NULL;
    char oname[32];
    if (origin && !from)
        snprintf(oname, sizeof oname, "#%lld", (long long)origin); /* removed since: still not the target */
    policy_blob pb = {
        .item_type = b->item_type,
        .in_part = b->in_part,
        .origin = from ? from->a.name : origin ? oname : "",
        .origin_kind = from ? account_kind_name(from->a.kind) : "",
        .target = pa->a.name,
        .target_kind = account_kind_name(pa->a.kind),
        .strip_retry = p->strip_retried,
    };
    int act = policy_strip(p->gw->policy, &pb);
    if (*nmemo < PROXY_STRIP_MEMO) {
        memo_origin[*nmemo] = origin;
        memo_ref[*nmemo] = b;
        memo_act[(*nmemo)++] = act;
    }
    return act;
}

const sbuf *proxy_blobs_for(proxy_req *p, const pool_account *pa)
{
    p->stripped_drop = p->stripped_text = 0;
    if (!p->blobs_scanned && !proxy_blobs_need_scan(p, pa))
        return &p->in.body; /* no blob the policy would be asked about: nothing parsed, nothing copied */
    if (!p->blobs_scanned)
        proxy_blobs_find(p);
    if (!p->blobs.n)
        return &p->in.body;
    int64_t memo_origin[PROXY_STRIP_MEMO];
    const blob_ref *memo_ref[PROXY_STRIP_MEMO];
    int memo_act[PROXY_STRIP_MEMO];
    size_t nmemo = 0;
    int64_t foreign = 0;
    int any = 0;
    for (size_t i = 0; i < p->blobs.n; i++) {
        int act = proxy_blob_action(p, pa, i, memo_origin, memo_ref, memo_act, &nmemo);
        p->blobs.v[i].action = act;
        if (act == BLOB_KEEP)
            continue;
        any = 1;
        if (act == BLOB_DROP)
            p->stripped_drop++;
        else
            p->stripped_text++;
        if (!foreign && p->blob_origin[i] && p->blob_origin[i] != pa->a.id)
            foreign = p->blob_origin[i];
    }
    if (!any)
        return &p->in.body;
    sbuf_reset(&p->blobbody);
    int changed = blobs_rewrite(p->in.body.p, p->in.body.len, &p->blobs, PROXY_BLOB_NOTE, &p->blobbody);
    if (changed <= 0) {
        p->stripped_drop = p->stripped_text = 0;
        return &p->in.body;
    }
    char fname[64] = "-";
    if (foreign) {
        proxy_account_name(p, foreign, fname, sizeof fname);
        proxy_move_from(p, foreign);
        metrics_conversation_move(1);
    }
    metrics_blobs_stripped(p->stripped_drop, p->stripped_text);
    trace_event(p->gw->trace, "BLOBS_STRIPPED",
                "req=%llu attempt=%d account=%s from=%s dropped=%d text=%d strip_retry=%d",
                (unsigned long long)p->id, p->attempts, pa->a.name, fname, p->stripped_drop, p->stripped_text,
                p->strip_retried);
    return &p->blobbody;
}

int proxy_strip_retry_possible(const proxy_req *p)
{
    if (p->strip_retried)
        return 0;
    if (p->blobs_unsure)
        return 1;
    for (size_t i = 0; i < p->quick_n; i++)
        if (p->quick_origin[i] != p->acct_id)
            return 1; /* one not known to be this account's: the resend can leave it out */
    return 0;
}

void proxy_blobs_free(proxy_req *p)
{
    blobs_scan_free(&p->blobs);
    free(p->blob_origin);
    p->blob_origin = NULL;
    free(p->quick_origin);
    p->quick_origin = NULL;
    sbuf_free(&p->blobbody);
}

/* ---------- who minted what ---------- */

static void proxy_blob_minted(void *ud, const char *key)
{
    proxy_req *p = ud;
    pool_owner_set(p->gw->pool, key, p->acct_id);
}

void proxy_blobs_minted(proxy_req *p, const char *json, size_t len)
{
    if (p->in.api == API_RESPONSES)
        blobs_minted(json, len, proxy_blob_minted, p);
}

void proxy_item_blobs(void *ud, const char *data, size_t len)
{
    proxy_blobs_minted(ud, data, len);
}

/* ---------- stored conversations ---------- */

#define PROXY_CHAIN_DEPTH 1000               /* turns followed back from a previous_response_id */
#define PROXY_CHAIN_BYTES ((size_t)32 << 20) /* of recorded input and output read for one rebuild */

/* The turns this process recorded last, newest wins: the writer commits a
 * turn some milliseconds after its answer, and a client may send the next
 * turn at once; a chain is read from here first and from the database for
 * what is older. Loop thread only. */
#define PROXY_RECENT 64
#define PROXY_RECENT_TURN_MAX ((size_t)1 << 20) /* a larger turn is read from the database only */
static conv_link proxy_recent[PROXY_RECENT];
static size_t proxy_recent_next;

static char *proxy_dup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        abort(); /* as sbuf: no useful work without memory */
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void proxy_recent_clear(conv_link *l)
{
    free(l->response_id);
    free(l->previous_response_id);
    free(l->input_json);
    free(l->output_json);
    memset(l, 0, sizeof *l);
}

static void proxy_recent_put(const char *id, int64_t acct, const char *prev, const char *in, size_t in_len,
                             const sbuf *out)
{
    if (in_len + out->len > PROXY_RECENT_TURN_MAX)
        return;
    conv_link *l = &proxy_recent[proxy_recent_next++ % PROXY_RECENT];
    proxy_recent_clear(l);
    l->response_id = proxy_dup(id, strlen(id));
    l->account_id = acct;
    l->previous_response_id = prev && *prev ? proxy_dup(prev, strlen(prev)) : NULL;
    l->input_json = proxy_dup(in, in_len);
    l->input_len = in_len;
    l->output_json = proxy_dup(out->p, out->len);
    l->output_len = out->len;
}

static const conv_link *proxy_recent_find(const char *id)
{
    for (size_t k = 1; k <= PROXY_RECENT && k <= proxy_recent_next; k++) {
        const conv_link *l = &proxy_recent[(proxy_recent_next - k) % PROXY_RECENT];
        if (l->response_id && strcmp(l->response_id, id) == 0)
            return l;
    }
    return NULL;
}

/* Turns deleted here lately (DELETE /v1/responses/{id}): the writer
 * deletes the row some milliseconds after the 200, and a GET right after
 * must not find it meanwhile. Loop thread only. */
#define PROXY_GONE 64
static char proxy_gone[PROXY_GONE][CONVERSATION_ID_MAX];
static size_t proxy_gone_next;

static int proxy_turn_gone(const char *id)
{
    for (size_t i = 0; i < PROXY_GONE; i++)
        if (proxy_gone[i][0] && strcmp(proxy_gone[i], id) == 0)
            return 1;
    return 0;
}

void proxy_turn_forget(const char *id)
{
    for (size_t i = 0; i < PROXY_RECENT; i++)
        if (proxy_recent[i].response_id && strcmp(proxy_recent[i].response_id, id) == 0)
            proxy_recent_clear(&proxy_recent[i]);
    if (!proxy_turn_gone(id))
        sbuf_copy_cstr(proxy_gone[proxy_gone_next++ % PROXY_GONE], CONVERSATION_ID_MAX, id);
}

/* The chain that ends at id, oldest first: the recent turns, then the
 * database for what is older. *older is the store's part (free it with
 * store_conversation_chain_free); the links point into both. 0 / -1. */
static int proxy_chain_read(proxy_req *p, const char *id, conv_link **links, size_t *n, conv_link **older,
                            size_t *nolder, char *err, size_t errlen)
{
    const conv_link *mine[PROXY_RECENT];
    size_t k = 0;
    const conv_link *l;
    if (proxy_turn_gone(id)) {
        snprintf(err, errlen, "the stored response %.60s was deleted", id);
        return -1;
    }
    while (id && k < PROXY_RECENT && (l = proxy_recent_find(id))) {
        for (size_t j = 0; j < k; j++)
            if (mine[j] == l) {
                snprintf(err, errlen, "the stored conversation of %.60s loops: %.60s comes back",
                         p->in.previous_response_id, id);
                return -1;
            }
        mine[k++] = l;
        id = l->previous_response_id;
    }
    *older = NULL;
    *nolder = 0;
    if (id && store_conversation_chain(p->gw->st, id, PROXY_CHAIN_DEPTH > k ? PROXY_CHAIN_DEPTH - k : 1,
                                       PROXY_CHAIN_BYTES, older, nolder, err, errlen) != 0)
        return -1;
    *n = *nolder + k;
    *links = calloc(*n ? *n : 1, sizeof **links);
    if (!*links) {
        store_conversation_chain_free(*older, *nolder);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < *nolder; i++)
        (*links)[i] = (*older)[i];
    for (size_t j = 0; j < k; j++) /* mine is newest first */
        (*links)[*nolder + j] = *mine[k - 1 - j];
    return 0;
}

/* Records the turn the answer response_json completes (a store'd request,
 * proxy_relay.c / proxy_finish.c). A turn above PROXY_TURN_RECORD_MAX is
 * not recorded (its conversation cannot move; the 503 says so): each kept
 * turn costs a copy for the writer, and a 16 MiB body must not cost two. */
#define PROXY_TURN_RECORD_MAX ((size_t)8 << 20)

void proxy_turn_record(proxy_req *p, const char *response_json, size_t len)
{
    sbuf out = SBUF_INIT, in = SBUF_INIT;
    char id[CONVERSATION_ID_MAX], prev[CONVERSATION_ID_MAX];
    int store_flag = 1;
    const sbuf *input = p->turn_input.len ? &p->turn_input : &p->in.body;
    if (input->len + len > PROXY_TURN_RECORD_MAX ||
        conversation_record_output(response_json, len, &out, id) != 0 ||
        (!p->turn_input.len && conversation_record_input(p->in.body.p, p->in.body.len, &in, prev, &store_flag) != 0) ||
        !store_flag) {
        sbuf_free(&out);
        sbuf_free(&in);
        return;
    }
    input = p->turn_input.len ? &p->turn_input : &in;
    store_writer_put_conversation(p->gw->st, id, p->acct_id, p->in.previous_response_id, input->p, input->len, out.p,
                                  out.len);
    proxy_recent_put(id, p->acct_id, p->in.previous_response_id, input->p, input->len, &out);
    /* and for the other gateways, so the conversation can move there too */
    conv_link turn = {id, p->acct_id, p->in.previous_response_id[0] ? p->in.previous_response_id : NULL,
                      input->p, input->len, out.p, out.len, gateway_now()};
    shared_turn_tell(p->gw->shared, &turn);
    sbuf_free(&out);
    sbuf_free(&in);
}

void proxy_made_response_note(proxy_req *p, const char *json, size_t len)
{
    static const char *const wanted[] = {"id"};
    json_value *doc = json_parse_members(json, len, 1, wanted, 1);
    const char *id = doc ? json_get_str(doc, "id") : NULL;
    if (id)
        pool_owner_set(p->gw->pool, id, p->acct_id);
    json_free(doc);
    if (!p->in.is_get && !p->in.store_off)
        proxy_turn_record(p, json, len);
}

void proxy_item_done(void *ud, const char *data, size_t len)
{
    proxy_req *p = ud;
    size_t a, b;
    if (p->turn_items.len + len > PROXY_TURN_RECORD_MAX || json_member_span(data, len, "item", &a, &b) != 0)
        return;
    sbuf_puts(&p->turn_items, p->turn_items.len ? "," : "[");
    sbuf_append(&p->turn_items, data + a, b - a);
}

/* The turn of a stream's response.completed (data): recorded as it is, or,
 * when its output is empty and the stream's items were kept (the ChatGPT
 * backend sends them only in output_item.done events), with those items. */
void proxy_turn_completed(void *ud, const char *data, size_t len)
{
    proxy_req *p = ud;
    size_t a, b, oa, ob;
    static const char *const wanted[] = {"id"};
    if (!p->turn_items.len || json_member_span(data, len, "response", &a, &b) != 0 ||
        json_member_span(data + a, b - a, "output", &oa, &ob) != 0 || ob - oa > 2) {
        proxy_turn_record(p, data, len);
        return;
    }
    json_value *resp = json_parse_members(data + a, b - a, 1, wanted, 1);
    const char *id = resp ? json_get_str(resp, "id") : NULL;
    if (id) {
        sbuf whole = SBUF_INIT;
        sbuf_puts(&whole, "{\"id\":");
        sbuf_json_str(&whole, id, strlen(id));
        sbuf_puts(&whole, ",\"output\":");
        sbuf_append(&whole, p->turn_items.p, p->turn_items.len);
        sbuf_puts(&whole, "]}");
        proxy_turn_record(p, whole.p, whole.len);
        sbuf_free(&whole);
    }
    json_free(resp);
}

/* The conversation cannot move: why says so (the 503 names it). */
static void proxy_chain_refused(proxy_req *p, const char *err)
{
    char why[320];
    snprintf(why, sizeof why, "the conversation cannot move to another account: %s", err);
    proxy_why(p, "previous_response_id", why);
    trace_event(p->gw->trace, "CONVERSATION_MOVE_REFUSED", "req=%llu by=previous_response_id reason=\"%s\"",
                (unsigned long long)p->id, err);
}

/* The request goes out rebuilt from chain (oldest first) as one whole
 * input without previous_response_id, planned again without the pin.
 * 0, or -1 with err (the chain or the body cannot be spliced). */
static int proxy_chain_go(proxy_req *p, const conv_link *chain, size_t n, char *err, size_t errlen)
{
    char prev[CONVERSATION_ID_MAX];
    int store_flag = 1;
    sbuf body = SBUF_INIT;
    int64_t owner = p->plan.pinned_owner;
    if (conversation_rebuild(chain, n, p->in.body.p, p->in.body.len, &body, err, errlen) != 0 ||
        conversation_record_input(p->in.body.p, p->in.body.len, &p->turn_input, prev, &store_flag) != 0) {
        sbuf_free(&body);
        sbuf_free(&p->turn_input);
        return -1;
    }
    /* the rebuilt body is the request from here: every account is sent it
     * (blobs stripped for each as usual) */
    p->gw->body_bytes += body.len;
    p->gw->body_bytes -= p->in.body.len;
    sbuf_free(&p->in.body);
    p->in.body = body;
    proxy_blobs_free(p);
    p->blobs_looked = p->blobs_scanned = p->blobs_unsure = 0;
    p->quick_n = p->quick_cap = 0;
    p->moved_from[0] = '\0';
    proxy_move_from(p, owner);
    sbuf_copy_cstr(p->chain_from, sizeof p->chain_from, p->moved_from);
    metrics_conversation_move(2);
    trace_event(p->gw->trace, "CONVERSATION_MOVE", "req=%llu from=%s by=previous_response_id turns=%zu bytes=%zu",
                (unsigned long long)p->id, p->moved_from, n, p->in.body.len);
    p->rctx.previous_response_id = NULL;
    router_plan_free(&p->plan);
    router_plan(p->gw, &p->rctx, &p->plan);
    p->next = 0;
    proxy_next(p);
    return 0;
}

typedef struct proxy_minter {
    pool *pl;
    int64_t account_id;
} proxy_minter;

static void proxy_chain_blob(void *ud, const char *key)
{
    proxy_minter *m = ud;
    pool_owner_learn(m->pl, key, m->account_id);
}

/* The other gateways' record of the chain (shared/shared.h): its part that
 * this instance does not hold, and the rest (from missing on) from this
 * instance's own record. Its turns' blobs were minted by their accounts:
 * learned as such, so they are stripped before another account sees them
 * (the relaying gateway learned them as it relayed). */
static void proxy_on_chain(void *ud, const conv_link *chain, size_t n, const char *missing, const char *err)
{
    proxy_req *p = ud;
    p->chain_wait = NULL;
    char lerr[256];
    conv_link *mine = NULL, *older = NULL, *all = NULL;
    size_t nmine = 0, nolder = 0;
    int rc = -1;
    if (!chain) {
        snprintf(lerr, sizeof lerr, "%s", err ? err : "the other gateways do not hold it");
    } else if (missing[0] && proxy_chain_read(p, missing, &mine, &nmine, &older, &nolder, lerr, sizeof lerr) != 0) {
        /* lerr says why */
    } else if (!(all = calloc(nmine + n, sizeof *all))) {
        snprintf(lerr, sizeof lerr, "out of memory");
    } else {
        for (size_t i = 0; i < nmine; i++)
            all[i] = mine[i];
        for (size_t i = 0; i < n; i++) {
            all[nmine + i] = chain[i];
            proxy_minter m = {p->gw->pool, chain[i].account_id};
            if (m.account_id)
                blobs_minted(chain[i].output_json, chain[i].output_len, proxy_chain_blob, &m);
        }
        rc = proxy_chain_go(p, all, nmine + n, lerr, sizeof lerr);
    }
    free(all);
    free(mine);
    store_conversation_chain_free(older, nolder);
    if (rc != 0) {
        proxy_chain_refused(p, lerr);
        proxy_next(p); /* the plan is spent: on to a wait for capacity or the 503 */
    }
}

/* The request continues a stored response whose account cannot serve (its
 * plan is spent): rebuild it from the gateway's record as a whole input
 * without previous_response_id, and plan again without the pin. 1 when
 * the request goes on (or waits for the other gateways' record of the
 * chain, when this instance's does not hold all of it); 0 when it cannot
 * (not recorded, expired, too long, malformed: why says so, and the 503
 * names it). Once per request. */
int proxy_chain_move(proxy_req *p)
{
    if (p->chain_tried || p->committed || !p->plan.pinned_owner || !p->in.previous_response_id[0] ||
        !p->plan.pinned_by || strcmp(p->plan.pinned_by, "previous_response_id") != 0)
        return 0;
    return proxy_chain_rebuild(p);
}

/* see proxy_internal.h */
int proxy_chain_rebuild(proxy_req *p)
{
    if (p->chain_tried || p->committed || !p->in.previous_response_id[0])
        return 0;
    p->chain_tried = 1;
    conv_link *chain = NULL, *older = NULL;
    size_t n = 0, nolder = 0;
    char err[256];
    int read = proxy_chain_read(p, p->in.previous_response_id, &chain, &n, &older, &nolder, err, sizeof err);
    if (read == 0) {
        int rc = proxy_chain_go(p, chain, n, err, sizeof err);
        free(chain);
        store_conversation_chain_free(older, nolder);
        if (rc == 0)
            return 1;
        proxy_chain_refused(p, err);
        return 0;
    }
    /* not all of it here: its turns may have reached another gateway */
    p->chain_wait = shared_chain_get(p->gw->shared, p->in.previous_response_id, PROXY_CHAIN_DEPTH, PROXY_CHAIN_BYTES,
                                     proxy_on_chain, p);
    if (p->chain_wait)
        return 1;
    proxy_chain_refused(p, err);
    return 0;
}

/* ---------- stored responses answered from the record ---------- */

/* see proxy_internal.h */
int proxy_stores_nothing(proxy_req *p, const pool_account *pa)
{
    if (!(account_dialects(&pa->a, &pa->st) & DIALECT_BIT(API_RESPONSES)))
        return 1; /* a chat upstream has no stored responses at all */
    policy_dialect_ask ask = {account_kind_name(pa->a.kind), "responses", "responses"};
    return policy_dialect_rules(p->gw->policy, &ask)->store_off;
}

static void proxy_record_send(proxy_req *p, int status, const sbuf *body)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    evhttp_add_header(oh, "Content-Type", "application/json");
    evhttp_add_header(oh, "x-switchyard-record", "1");
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, body->p, body->len);
    server_reply(p->req, status, b);
    if (b)
        evbuffer_free(b);
}

/* see proxy_internal.h */
int proxy_record_reply(proxy_req *p, int or_not_found)
{
    conv_link *chain = NULL, *older = NULL;
    size_t n = 0, nolder = 0;
    char err[256];
    const char *id = p->in.response_id;
    sbuf b = SBUF_INIT;
    if (proxy_chain_read(p, id, &chain, &n, &older, &nolder, err, sizeof err) != 0 || !n) {
        free(chain);
        store_conversation_chain_free(older, nolder);
        if (!or_not_found)
            return 0;
        sbuf_printf(&b, "No response found with id '%s' (its account keeps no responses, and the gateway's record "
                        "of the conversations it relayed does not hold it: not stored, expired or deleted).", id);
        snprintf(p->error_class, sizeof p->error_class, "not_found");
        proxy_send_error(p, 404, "invalid_request_error", "not_found", b.p);
        sbuf_free(&b);
        proxy_finish(p, 404);
        return 1;
    }
    const conv_link *l = &chain[n - 1];
    if (p->in.is_delete) {
        store_conversation_delete(p->gw->st, id);
        proxy_turn_forget(id);
        shared_turn_forget(p->gw->shared, id);
        sbuf_puts(&b, "{\"id\":");
        sbuf_json_str(&b, id, strlen(id));
        sbuf_puts(&b, ",\"object\":\"response\",\"deleted\":true}");
    } else if (p->in.input_items) {
        sbuf_puts(&b, "{\"object\":\"list\",\"data\":");
        sbuf_append(&b, l->input_json, l->input_len);
        sbuf_puts(&b, ",\"first_id\":null,\"last_id\":null,\"has_more\":false}");
    } else {
        sbuf_puts(&b, "{\"id\":");
        sbuf_json_str(&b, id, strlen(id));
        sbuf_printf(&b, ",\"object\":\"response\",\"created_at\":%.0f,\"status\":\"completed\",\"error\":null,"
                        "\"previous_response_id\":", l->created_at);
        if (l->previous_response_id)
            sbuf_json_str(&b, l->previous_response_id, strlen(l->previous_response_id));
        else
            sbuf_puts(&b, "null");
        sbuf_puts(&b, ",\"store\":true,\"output\":");
        sbuf_append(&b, l->output_json, l->output_len);
        sbuf_puts(&b, "}");
    }
    trace_event(p->gw->trace, "RECORD_ANSWER", "req=%llu id=%s op=%s", (unsigned long long)p->id, id,
                p->in.is_delete ? "delete" : p->in.input_items ? "input_items" : "get");
    free(chain);
    store_conversation_chain_free(older, nolder);
    proxy_record_send(p, 200, &b);
    sbuf_free(&b);
    proxy_finish(p, 200);
    return 1;
}

/* ---------- what the answer says ---------- */

void proxy_moved_header(const proxy_req *p, struct evkeyvalq *oh)
{
    char v[160];
    if (p->moved_from[0] && strcmp(p->moved_from, p->acct_name) != 0) {
        snprintf(v, sizeof v, "%s->%s", p->moved_from, p->acct_name);
        evhttp_add_header(oh, "x-switchyard-moved", v);
    }
    int ts = p->strip_turn_state && p->acct_id != p->plan.turn_owner;
    if (!ts && !p->stripped_drop && !p->stripped_text)
        return;
    int n = 0;
    v[0] = '\0';
    if (ts)
        n += snprintf(v + n, sizeof v - (size_t)n, "turn_state=1");
    if (p->stripped_drop)
        n += snprintf(v + n, sizeof v - (size_t)n, "%sdropped=%d", n ? "," : "", p->stripped_drop);
    if (p->stripped_text)
        n += snprintf(v + n, sizeof v - (size_t)n, "%sreplaced=%d", n ? "," : "", p->stripped_text);
    evhttp_add_header(oh, "x-switchyard-stripped", v);
}
