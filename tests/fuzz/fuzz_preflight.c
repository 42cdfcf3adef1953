/* fuzz_preflight.c: the hold/commit/error watcher on any stream, cut
 * anywhere, for both APIs: states only move forward, held bytes cover the
 * unfinished event, usage is -1 or a clamped count, a forced commit holds.
 * Until the first commit or error, a second watcher that reads every event
 * as a JSON tree (tree_only) agrees with it, the text kept for a stream
 * resume included. */
#include "fuzz_common.h"
#include "upstream/preflight.h"
#include "upstream/usage.h"
#include <string.h>

typedef struct run {
    preflight pf;
    pf_state last;
    int forced;
    preflight tree; /* tree_only: chat chunks read as trees */
    int same;       /* both still holding: compared after every feed */
} run;

static void same_verdicts(const preflight *a, const preflight *b)
{
    FUZZ_CHECK(a->state == b->state && a->saw_semantic == b->saw_semantic && a->saw_terminal == b->saw_terminal);
    FUZZ_CHECK(a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens &&
               a->total_tokens == b->total_tokens && a->cached_tokens == b->cached_tokens);
    FUZZ_CHECK(strcmp(a->model, b->model) == 0 && strcmp(a->response_id, b->response_id) == 0);
    FUZZ_CHECK(strcmp(a->error_type, b->error_type) == 0 && strcmp(a->error_code, b->error_code) == 0);
    FUZZ_CHECK(a->error_message.len == b->error_message.len && a->events == b->events);
    FUZZ_CHECK(a->saw_tool_call == b->saw_tool_call && a->text_overflow == b->text_overflow &&
               a->text.len == b->text.len && (!a->text.len || memcmp(a->text.p, b->text.p, a->text.len) == 0));
}

static void feed(void *ud, const char *p, size_t len)
{
    run *r = ud;
    pf_state st = preflight_feed(&r->pf, p, len);
    if (r->same) {
        preflight_feed(&r->tree, p, len);
        if (st == PF_HOLD)
            same_verdicts(&r->pf, &r->tree);
        else /* events after the commit in this piece: the tree reads more of them */
            FUZZ_CHECK(st == r->tree.state);
        r->same = st == PF_HOLD;
    }
    FUZZ_CHECK(r->last == PF_HOLD || st == r->last); /* ERROR and COMMIT are final */
    FUZZ_CHECK(preflight_open_bytes(&r->pf) <= r->pf.held.len);
    r->last = st;
    if (st == PF_COMMIT) /* the proxy drains what it sends */
        sbuf_consume(&r->pf.held, r->pf.held.len - preflight_open_bytes(&r->pf));
    if (!r->forced && r->pf.events == 3) {
        preflight_commit(&r->pf);
        r->forced = 1;
        r->same = 0; /* the tree watcher was not forced */
        r->last = r->pf.state;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    run r = {.last = PF_HOLD, .same = 1};
    preflight_init(&r.pf, data[0] & 1 ? API_RESPONSES : API_CHAT, (data[0] & 2) ? 256 : 64 << 10);
    preflight_init(&r.tree, r.pf.api, r.pf.max_bytes);
    r.tree.tree_only = 1;
    r.pf.keep_text = r.tree.keep_text = data[0] & 4 ? 1 : 0;
    fuzz_chunks(data + 1, n - 1, data[0], feed, &r);
    long t[3] = {r.pf.input_tokens, r.pf.output_tokens, r.pf.total_tokens};
    for (int i = 0; i < 3; i++)
        FUZZ_CHECK(t[i] >= -1 && t[i] <= USAGE_TOKENS_MAX);
    preflight_free(&r.pf);
    preflight_free(&r.tree);
    return 0;
}
