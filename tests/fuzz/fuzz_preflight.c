/* fuzz_preflight.c: the hold/commit/error watcher on any stream, cut
 * anywhere, for both APIs: states only move forward, held bytes cover the
 * unfinished event, usage is -1 or a clamped count, a forced commit holds. */
#include "fuzz_common.h"
#include "preflight.h"
#include "usage.h"

typedef struct run {
    preflight pf;
    pf_state last;
    int forced;
} run;

static void feed(void *ud, const char *p, size_t len)
{
    run *r = ud;
    pf_state st = preflight_feed(&r->pf, p, len);
    FUZZ_CHECK(r->last == PF_HOLD || st == r->last); /* ERROR and COMMIT are final */
    FUZZ_CHECK(preflight_open_bytes(&r->pf) <= r->pf.held.len);
    r->last = st;
    if (st == PF_COMMIT) /* the proxy drains what it sends */
        sbuf_consume(&r->pf.held, r->pf.held.len - preflight_open_bytes(&r->pf));
    if (!r->forced && r->pf.events == 3) {
        preflight_commit(&r->pf);
        r->forced = 1;
        r->last = r->pf.state;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    run r = {.last = PF_HOLD};
    preflight_init(&r.pf, data[0] & 1 ? API_RESPONSES : API_CHAT, (data[0] & 2) ? 256 : 64 << 10);
    fuzz_chunks(data + 1, n - 1, data[0], feed, &r);
    long t[3] = {r.pf.input_tokens, r.pf.output_tokens, r.pf.total_tokens};
    for (int i = 0; i < 3; i++)
        FUZZ_CHECK(t[i] >= -1 && t[i] <= USAGE_TOKENS_MAX);
    preflight_free(&r.pf);
    return 0;
}
