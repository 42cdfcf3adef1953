/* metrics.c: counters and histograms of the running gateway and their
 * Prometheus text exposition (see metrics.h). Everything is a fixed-size
 * static table touched only by the loop thread: recording is an index
 * computation and an increment; names and labels are only formatted when
 * /metrics is scraped. */
#include "obs/metrics.h"

#define METRICS_PAIRS 8 /* dialect pairs counted (two today, rows for more) */
#include "base/sbuf.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_STATUS_MAX 600      /* statuses 0..599; others count as 0 */
#define METRICS_WORDS 32            /* distinct outcome / class words kept */
#define METRICS_WORD_LEN 32
#define METRICS_ATTEMPT_SLOTS 2048  /* (account, outcome, class) cells */
#define METRICS_RETRY_SLOTS 256
#define METRICS_MINUTES 64          /* ring of per-minute figures (60 shown) */
#define METRICS_REFUSAL_SLOTS 1024  /* keys with a key-rule refusal (more: key="other") */
#define METRICS_REFUSAL_REASONS 5

enum { EP_RESPONSES, EP_CHAT, EP_MODELS, EP_OTHER, EP_COUNT };
static const char *const metrics_endpoints[EP_COUNT] = {"/v1/responses", "/v1/chat/completions", "/v1/models",
                                                        "other"};

/* Seconds; the same bounds for time to first byte and attempt duration. */
static const double metrics_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
#define METRICS_BUCKETS (sizeof metrics_bounds / sizeof *metrics_bounds)

typedef struct metrics_hist {
    uint64_t counts[METRICS_BUCKETS + 1]; /* last: above every bound */
    uint64_t n;
    double sum;
} metrics_hist;

typedef struct metrics_words {
    char w[METRICS_WORDS][METRICS_WORD_LEN];
    int n;
} metrics_words;

typedef struct metrics_cell {
    int64_t account_id;   /* 0: empty slot */
    uint8_t outcome, cls;
    uint64_t count;
} metrics_cell;

typedef struct metrics_minute {
    int64_t minute;       /* unix minute; 0: unused */
    int64_t requests, failovers, failed;
} metrics_minute;

/* One (account, key, model) cell of usage: since start, and for one UTC day. */
typedef struct metrics_usage_cell {
    int64_t account_id, key_id; /* account -1 stands for "none" (0 marks an empty slot) */
    uint8_t model;
    uint8_t used;
    uint64_t requests, input, cached, output; /* since start */
    double cost;
    int64_t day;                              /* the UTC day of the day_ figures */
    uint64_t day_requests, day_input, day_cached, day_output;
    double day_cost;
} metrics_usage_cell;

typedef struct metrics_retry_cell {
    int64_t account_id;
    uint64_t count;
} metrics_retry_cell;

/* One platform key's key-rule refusals by reason (metrics_key_refusal). */
typedef struct metrics_refusal_cell {
    int64_t key_id; /* 0: empty slot; -1 none */
    uint64_t n[METRICS_REFUSAL_REASONS];
} metrics_refusal_cell;

static struct {
    uint64_t requests[EP_COUNT][METRICS_STATUS_MAX];
    metrics_words outcomes, classes;
    metrics_cell cells[METRICS_ATTEMPT_SLOTS];
    uint64_t cells_overflow;
    metrics_retry_cell retries[METRICS_RETRY_SLOTS];
    uint64_t retries_total;
    uint64_t preflight_switches;
    uint64_t conversation_moves[3]; /* by turn state, by blobs, by previous_response_id */
    uint64_t websocket_turns[2];    /* upstream turns, warm-ups */
    uint64_t body_decodes;          /* compressed request bodies decoded (whatever the outcome) */
    uint64_t body_decode_slices;    /* loop turns they took */
    uint64_t blobs_dropped, blobs_replaced, strip_retries;
    uint64_t redis_resyncs[2]; /* [0] a (re)connect, [1] the pool's data found lost */
    uint64_t redis_rtt_buckets[METRICS_REDIS_RTT_BUCKETS + 1], redis_rtt_count;
    double redis_rtt_sum;
    uint64_t redis_waits_expired[METRICS_REDIS_WAITS];
    uint64_t redis_dropped[METRICS_REDIS_DROPS];
    uint64_t redis_limits_refused[METRICS_LIMITS_REFUSED_KINDS];
    struct { char pair[24]; uint64_t n; } translations[METRICS_PAIRS]; /* by "client>upstream" */
    uint64_t waits;
    double wait_seconds;
    uint64_t reloads[2]; /* [0] failed, [1] ok */
    metrics_hist ttfb, attempt_duration;
    metrics_minute minutes[METRICS_MINUTES];
    char models[METRICS_MODELS][METRICS_MODEL_LEN];
    int n_models;
    metrics_usage_cell usage[METRICS_USAGE_SLOTS];
    metrics_usage_cell usage_other; /* usage past the table's slots */
    metrics_refusal_cell refusals[METRICS_REFUSAL_SLOTS];
    uint64_t refusals_other[METRICS_REFUSAL_REASONS]; /* keys past the table */
} M;

/* Key-rule refusals (metrics_key_refusal): the reason label of each code. */
static const char *const metrics_refusal_codes[METRICS_REFUSAL_REASONS] = {
    "expired_api_key", "model_not_allowed", "insufficient_quota", "rate_limit_exceeded", "other"};
static const char *const metrics_refusal_reasons[METRICS_REFUSAL_REASONS] = {"expired", "model_not_allowed",
                                                                             "over_budget", "rpm", "other"};

void metrics_reset(void) { memset(&M, 0, sizeof M); }

/* The index of word in the table, adding it when there is room; the last
 * slot collects every word that did not fit ("other"). */
static uint8_t metrics_word(metrics_words *t, const char *word)
{
    if (!word || !*word)
        word = "none";
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->w[i], word) == 0)
            return (uint8_t)i;
    if (t->n == METRICS_WORDS - 1) {
        memcpy(t->w[t->n], "other", 6);
        t->n++;
    }
    if (t->n == METRICS_WORDS)
        return METRICS_WORDS - 1;
    sbuf_copy_cstr(t->w[t->n], METRICS_WORD_LEN, word); /* cut on a character, never inside one */
    return (uint8_t)t->n++;
}

static int metrics_endpoint(const char *endpoint)
{
    for (int i = 0; i < EP_OTHER; i++)
        if (endpoint && strcmp(endpoint, metrics_endpoints[i]) == 0)
            return i;
    return EP_OTHER;
}

static void metrics_hist_add(metrics_hist *h, double v)
{
    if (!(v >= 0)) /* negative or NaN: not timed */
        return;
    size_t i = 0;
    while (i < METRICS_BUCKETS && v > metrics_bounds[i])
        i++;
    h->counts[i]++;
    h->n++;
    h->sum += v;
}

void metrics_request(const char *endpoint, int status)
{
    M.requests[metrics_endpoint(endpoint)][status >= 0 && status < METRICS_STATUS_MAX ? status : 0]++;
}

void metrics_key_refusal(int64_t key_id, const char *code)
{
    int r = 0;
    while (r < METRICS_REFUSAL_REASONS - 1 && !(code && strcmp(code, metrics_refusal_codes[r]) == 0))
        r++;
    if (key_id <= 0)
        key_id = -1; /* slots use 0 for empty */
    uint64_t h = (uint64_t)key_id * 0x9E3779B97F4A7C15ull;
    for (size_t probe = 0; probe < METRICS_REFUSAL_SLOTS; probe++) {
        metrics_refusal_cell *c = &M.refusals[(h + probe) % METRICS_REFUSAL_SLOTS];
        if (!c->key_id)
            c->key_id = key_id;
        if (c->key_id == key_id) {
            c->n[r]++;
            return;
        }
    }
    M.refusals_other[r]++;
}

void metrics_attempt(int64_t account_id, const char *outcome, const char *cls, double seconds)
{
    uint8_t o = metrics_word(&M.outcomes, outcome), c = metrics_word(&M.classes, cls);
    if (account_id <= 0)
        account_id = -1; /* slots use 0 for empty */
    uint64_t h = (uint64_t)account_id * 0x9E3779B97F4A7C15ull ^ ((uint64_t)o << 8 | c) * 0xff51afd7ed558ccdull;
    for (size_t probe = 0; probe < METRICS_ATTEMPT_SLOTS; probe++) {
        metrics_cell *cell = &M.cells[(h + probe) % METRICS_ATTEMPT_SLOTS];
        if (cell->account_id == 0) {
            cell->account_id = account_id;
            cell->outcome = o;
            cell->cls = c;
        }
        if (cell->account_id == account_id && cell->outcome == o && cell->cls == c) {
            cell->count++;
            metrics_hist_add(&M.attempt_duration, seconds);
            return;
        }
    }
    M.cells_overflow++;
    metrics_hist_add(&M.attempt_duration, seconds);
}

void metrics_ttfb(double seconds) { metrics_hist_add(&M.ttfb, seconds); }
void metrics_preflight_switch(void) { M.preflight_switches++; }
void metrics_websocket_turn(int warmup) { M.websocket_turns[warmup ? 1 : 0]++; }
void metrics_body_decode(int slices)
{
    M.body_decodes++;
    M.body_decode_slices += (uint64_t)slices;
}
void metrics_conversation_move(int by) { M.conversation_moves[by >= 0 && by <= 2 ? by : 0]++; }
void metrics_blobs_stripped(int dropped, int replaced)
{
    M.blobs_dropped += (uint64_t)(dropped > 0 ? dropped : 0);
    M.blobs_replaced += (uint64_t)(replaced > 0 ? replaced : 0);
}
void metrics_strip_retry(void) { M.strip_retries++; }
void metrics_redis_resync(int loss) { M.redis_resyncs[loss ? 1 : 0]++; }

static const double metrics_redis_rtt_le[METRICS_REDIS_RTT_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                                       0.05,   0.1,   0.25,   0.5,   1.0};
const char *const metrics_redis_wait_kinds[METRICS_REDIS_WAITS] = {"ask", "slot", "chain", "limits", "rotation"};

void metrics_redis_rtt(double seconds)
{
    size_t i = 0;
    while (i < METRICS_REDIS_RTT_BUCKETS && seconds > metrics_redis_rtt_le[i])
        i++;
    M.redis_rtt_buckets[i]++;
    M.redis_rtt_count++;
    M.redis_rtt_sum += seconds;
}

void metrics_redis_dropped(int why)
{
    if (why >= 0 && why < METRICS_REDIS_DROPS)
        M.redis_dropped[why]++;
}

void metrics_redis_wait_expired(int kind)
{
    if (kind >= 0 && kind < METRICS_REDIS_WAITS)
        M.redis_waits_expired[kind]++;
}

void metrics_redis_limits_refused(int kind)
{
    if (kind >= 0 && kind < METRICS_LIMITS_REFUSED_KINDS)
        M.redis_limits_refused[kind]++;
}

void metrics_translation(const char *pair)
{
    for (size_t i = 0; i < METRICS_PAIRS; i++) {
        if (!M.translations[i].pair[0])
            sbuf_copy_cstr(M.translations[i].pair, sizeof M.translations[i].pair, pair);
        if (strcmp(M.translations[i].pair, pair) == 0) {
            M.translations[i].n++;
            return;
        }
    }
}

void metrics_retry(int64_t account_id)
{
    M.retries_total++;
    for (size_t i = 0; i < METRICS_RETRY_SLOTS; i++) {
        metrics_retry_cell *r = &M.retries[((uint64_t)account_id + i) % METRICS_RETRY_SLOTS];
        if (r->account_id == 0)
            r->account_id = account_id;
        if (r->account_id == account_id) {
            r->count++;
            return;
        }
    }
}

void metrics_wait(double seconds)
{
    M.waits++;
    if (seconds > 0)
        M.wait_seconds += seconds;
}

void metrics_policy_reload(int ok) { M.reloads[ok ? 1 : 0]++; }

/* ---------- tokens and cost ---------- */

/* The index of model in the model table (as metrics_word, with its own
 * length): "none" for no model, the last slot "other" for the excess. A
 * name is added only when add is set (a request an account served): names
 * in requests refused before any upstream do not take the table's slots. */
static uint8_t metrics_model(const char *model, int add)
{
    char cut[METRICS_MODEL_LEN];
    sbuf_copy_cstr(cut, sizeof cut, model && *model ? model : "none");
    for (int i = 0; i < M.n_models; i++)
        if (strcmp(M.models[i], cut) == 0)
            return (uint8_t)i;
    if (!add)
        return METRICS_MODELS - 1; /* "other" */
    if (M.n_models == METRICS_MODELS - 1) {
        memcpy(M.models[M.n_models], "other", 6);
        M.n_models++;
    }
    if (M.n_models == METRICS_MODELS)
        return METRICS_MODELS - 1;
    memcpy(M.models[M.n_models], cut, sizeof cut);
    return (uint8_t)M.n_models++;
}

/* The cell of (account, key, model), taken when free; the overflow cell
 * when the table is full. */
static metrics_usage_cell *metrics_usage_cell_for(int64_t account_id, int64_t key_id, const char *model)
{
    uint8_t m = metrics_model(model, account_id > 0 || !model || !*model);
    if (account_id <= 0)
        account_id = -1;
    if (key_id < 0)
        key_id = 0;
    uint64_t h = (uint64_t)account_id * 0x9E3779B97F4A7C15ull ^ (uint64_t)key_id * 0xff51afd7ed558ccdull ^
                 (uint64_t)m * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    for (size_t probe = 0; probe < METRICS_USAGE_SLOTS; probe++) {
        metrics_usage_cell *c = &M.usage[(h + probe) % METRICS_USAGE_SLOTS];
        if (!c->used) {
            c->used = 1;
            c->account_id = account_id;
            c->key_id = key_id;
            c->model = m;
        }
        if (c->account_id == account_id && c->key_id == key_id && c->model == m)
            return c;
    }
    M.usage_other.used = 1;
    M.usage_other.account_id = M.usage_other.key_id = METRICS_USAGE_OTHER;
    M.usage_other.model = METRICS_MODELS - 1; /* "other", once the model table is full or not */
    return &M.usage_other;
}

/* The cell's day figures, started over when they are of another day. */
static void metrics_usage_day(metrics_usage_cell *c, int64_t day)
{
    if (c->day == day)
        return;
    c->day = day;
    c->day_requests = c->day_input = c->day_cached = c->day_output = 0;
    c->day_cost = 0;
}

static uint64_t metrics_pos(long v) { return v > 0 ? (uint64_t)v : 0; }

void metrics_usage(double now, int64_t account_id, int64_t key_id, const char *model, long input, long cached,
                   long output, double cost_usd)
{
    metrics_usage_cell *c = metrics_usage_cell_for(account_id, key_id, model);
    double cost = cost_usd > 0 && isfinite(cost_usd) ? cost_usd : 0;
    c->requests++;
    c->input += metrics_pos(input);
    c->cached += metrics_pos(cached);
    c->output += metrics_pos(output);
    c->cost += cost;
    metrics_usage_day(c, (int64_t)floor(now / 86400));
    c->day_requests++;
    c->day_input += metrics_pos(input);
    c->day_cached += metrics_pos(cached);
    c->day_output += metrics_pos(output);
    c->day_cost += cost;
}

void metrics_usage_seed_day(double day_ts, int64_t account_id, int64_t key_id, const char *model, int64_t requests,
                            int64_t input, int64_t cached, int64_t output, double cost_usd)
{
    metrics_usage_cell *c = metrics_usage_cell_for(account_id, key_id, model);
    metrics_usage_day(c, (int64_t)floor(day_ts / 86400));
    c->day_requests += metrics_pos((long)requests);
    c->day_input += metrics_pos((long)input);
    c->day_cached += metrics_pos((long)cached);
    c->day_output += metrics_pos((long)output);
    c->day_cost += cost_usd > 0 && isfinite(cost_usd) ? cost_usd : 0;
}

static const char *metrics_model_name(uint8_t m) { return m < M.n_models ? M.models[m] : "other"; }

/* A cell's value for the grouping metrics_usage_today sorts by. */
static int metrics_usage_by;
static int64_t metrics_usage_group(const metrics_usage_cell *c)
{
    return metrics_usage_by == 0 ? c->account_id : metrics_usage_by == 1 ? c->key_id : c->model;
}

static int metrics_usage_cmp(const void *a, const void *b)
{
    int64_t x = metrics_usage_group(*(const metrics_usage_cell *const *)a);
    int64_t y = metrics_usage_group(*(const metrics_usage_cell *const *)b);
    return x < y ? -1 : x > y;
}

int metrics_usage_today(double now, const char *by, void (*fn)(void *ud, const metrics_usage_row *r), void *ud)
{
    int what = !by ? -1 : strcmp(by, "account") == 0 ? 0 : strcmp(by, "key") == 0 ? 1 : strcmp(by, "model") == 0 ? 2 : -1;
    if (what < 0)
        return -1;
    int64_t today = (int64_t)floor(now / 86400);
    /* today's cells sorted by the group, then summed run by run */
    static const metrics_usage_cell *cells[METRICS_USAGE_SLOTS + 1];
    size_t k = 0;
    for (size_t i = 0; i <= METRICS_USAGE_SLOTS; i++) {
        const metrics_usage_cell *c = i < METRICS_USAGE_SLOTS ? &M.usage[i] : &M.usage_other;
        if (c->used && c->day == today)
            cells[k++] = c;
    }
    metrics_usage_by = what;
    qsort(cells, k, sizeof *cells, metrics_usage_cmp);
    int n = 0;
    for (size_t i = 0; i < k;) {
        const metrics_usage_cell *c = cells[i];
        metrics_usage_row r = {0};
        if (what == 0)
            r.account_id = c->account_id == -1 ? 0 : c->account_id;
        else if (what == 1)
            r.key_id = c->key_id;
        else
            r.model = metrics_model_name(c->model);
        for (; i < k && metrics_usage_group(cells[i]) == metrics_usage_group(c); i++) {
            r.requests += cells[i]->day_requests;
            r.input += cells[i]->day_input;
            r.cached += cells[i]->day_cached;
            r.output += cells[i]->day_output;
            r.cost_usd += cells[i]->day_cost;
        }
        fn(ud, &r);
        n++;
    }
    return n;
}

/* The slot of minute, cleared when it held an older one; NULL when it
 * already holds a newer one (minute is out of the ring's reach). */
static metrics_minute *metrics_minute_at(int64_t minute)
{
    metrics_minute *m = &M.minutes[(uint64_t)minute % METRICS_MINUTES];
    if (m->minute > minute)
        return NULL;
    if (m->minute != minute)
        *m = (metrics_minute){minute, 0, 0, 0};
    return m;
}

void metrics_minute_request(double now, int status, int attempts)
{
    metrics_minute *m = metrics_minute_at((int64_t)(now / 60));
    if (!m)
        return;
    m->requests++;
    m->failovers += attempts > 1 ? attempts - 1 : 0;
    m->failed += status < 200 || status >= 300;
}

void metrics_minute_seed(double minute_start, int64_t requests, int64_t failovers, int64_t failed)
{
    metrics_minute *m = metrics_minute_at((int64_t)(minute_start / 60));
    if (!m)
        return;
    m->requests += requests;
    m->failovers += failovers;
    m->failed += failed;
}

double metrics_minutes(double now, void (*fn)(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed),
                       void *ud)
{
    int64_t last = (int64_t)(now / 60);
    for (int64_t minute = last - 59; minute <= last; minute++) {
        const metrics_minute *m = &M.minutes[(uint64_t)minute % METRICS_MINUTES];
        if (m->minute == minute && m->requests)
            fn(ud, (double)minute * 60, m->requests, m->failovers, m->failed);
    }
    return (double)(last - 59) * 60;
}

void metrics_totals_get(metrics_totals *out)
{
    memset(out, 0, sizeof *out);
    for (int e = 0; e < EP_COUNT; e++)
        for (int s = 0; s < METRICS_STATUS_MAX; s++)
            out->requests += M.requests[e][s];
    int fo = -1;
    for (int i = 0; i < M.outcomes.n; i++)
        if (strcmp(M.outcomes.w[i], "failover") == 0)
            fo = i;
    for (size_t i = 0; i < METRICS_ATTEMPT_SLOTS; i++) {
        out->attempts += M.cells[i].count;
        if (M.cells[i].account_id && M.cells[i].outcome == fo)
            out->failovers += M.cells[i].count;
    }
    out->attempts += M.cells_overflow;
    out->preflight_switches = M.preflight_switches;
    out->retries = M.retries_total;
    out->waits = M.waits;
    out->reloads_ok = M.reloads[1];
    out->reloads_failed = M.reloads[0];
}

/* ---------- exposition ---------- */

/* A label value as the exposition format has it: backslash, double quote
 * and newline escaped; and valid UTF-8, which the format requires (one bad
 * byte and Prometheus rejects the whole scrape): what is not, and the
 * other control characters, written as U+FFFD. */
static void metrics_label(sbuf *out, const char *v)
{
    const char *s = v ? v : "";
    for (size_t i = 0, n = strlen(s); i < n;) {
        size_t k = sbuf_utf8_len(s + i, n - i);
        char c = s[i];
        if (k > 1 && !((unsigned char)c == 0xC2 && (unsigned char)s[i + 1] < 0xA0))
            sbuf_append(out, s + i, k); /* a character, not a C1 control */
        else if (c == '\\' || c == '"')
            sbuf_append(out, "\\", 1), sbuf_append(out, &c, 1);
        else if (c == '\n')
            sbuf_puts(out, "\\n");
        else if (k == 1 && (unsigned char)c >= 0x20 && c != 0x7f)
            sbuf_append(out, &c, 1);
        else
            sbuf_puts(out, "\xEF\xBF\xBD"); /* U+FFFD */
        i += k ? k : 1;
    }
}

static void metrics_head(sbuf *out, const char *name, const char *type, const char *help)
{
    sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Integers as such, other values with 9 significant digits. */
static void metrics_num(sbuf *out, double v)
{
    if (isnan(v))
        sbuf_puts(out, "NaN");
    else if (v == floor(v) && fabs(v) < 1e15)
        sbuf_printf(out, "%.0f", v);
    else
        sbuf_printf(out, "%.9g", v);
}

static const char *metrics_account_name(const metrics_gauges *g, int64_t id, char *buf, size_t n)
{
    for (size_t i = 0; i < g->n_accounts; i++)
        if (g->accounts[i].id == id)
            return g->accounts[i].name;
    snprintf(buf, n, "id:%lld", (long long)id);
    return buf;
}

static void metrics_hist_format(sbuf *out, const char *name, const char *help, const metrics_hist *h)
{
    metrics_head(out, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->counts[i];
        sbuf_printf(out, "%s_bucket{le=\"", name);
        metrics_num(out, metrics_bounds[i]);
        sbuf_printf(out, "\"} %llu\n", (unsigned long long)cum);
    }
    sbuf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum ", name, (unsigned long long)h->n, name);
    metrics_num(out, h->sum);
    sbuf_printf(out, "\n%s_count %llu\n", name, (unsigned long long)h->n);
}

static void metrics_requests_format(sbuf *out)
{
    metrics_head(out, "switchyard_requests_total", "counter", "Client requests by endpoint and final status.");
    for (int e = 0; e < EP_COUNT; e++)
        for (int s = 0; s < METRICS_STATUS_MAX; s++)
            if (M.requests[e][s])
                sbuf_printf(out, "switchyard_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                            metrics_endpoints[e], s, (unsigned long long)M.requests[e][s]);
}

/* Attempts by account, outcome and class; failovers are the attempts whose
 * outcome is "failover", by account and class. */
static void metrics_attempts_format(sbuf *out, const metrics_gauges *g, int failovers_only)
{
    if (failovers_only)
        metrics_head(out, "switchyard_failovers_total", "counter",
                     "Attempts that failed over to the next account, by account and failure class.");
    else
        metrics_head(out, "switchyard_upstream_attempts_total", "counter",
                     "Upstream attempts by account, outcome and failure class.");
    char idbuf[32];
    for (size_t i = 0; i < METRICS_ATTEMPT_SLOTS; i++) {
        const metrics_cell *c = &M.cells[i];
        if (!c->account_id)
            continue;
        const char *outcome = M.outcomes.w[c->outcome];
        if (failovers_only && strcmp(outcome, "failover") != 0)
            continue;
        sbuf_puts(out, failovers_only ? "switchyard_failovers_total{account=\"" : "switchyard_upstream_attempts_total{account=\"");
        metrics_label(out, c->account_id > 0 ? metrics_account_name(g, c->account_id, idbuf, sizeof idbuf) : "none");
        if (!failovers_only) {
            sbuf_puts(out, "\",outcome=\"");
            metrics_label(out, outcome);
        }
        sbuf_puts(out, "\",class=\"");
        metrics_label(out, M.classes.w[c->cls]);
        sbuf_printf(out, "\"} %llu\n", (unsigned long long)c->count);
    }
}

const char *const metrics_account_states[METRICS_ACCOUNT_STATES] = {
    "available", "busy", "cooling", "breaker_open", "half_open", "rate_limited", "over_budget", "needs_login",
    "held", "disabled"};

static void metrics_accounts_format(sbuf *out, const metrics_gauges *g)
{
    metrics_head(out, "switchyard_accounts", "gauge", "Accounts by routing state.");
    for (size_t s = 0; s < METRICS_ACCOUNT_STATES; s++) {
        size_t n = 0;
        for (size_t i = 0; i < g->n_accounts; i++)
            n += strcmp(g->accounts[i].state, metrics_account_states[s]) == 0;
        sbuf_printf(out, "switchyard_accounts{state=\"%s\"} %zu\n", metrics_account_states[s], n);
    }
    metrics_head(out, "switchyard_account_cooldown_seconds", "gauge", "Seconds left of each account's cooldown.");
    for (size_t i = 0; i < g->n_accounts; i++) {
        sbuf_puts(out, "switchyard_account_cooldown_seconds{account=\"");
        metrics_label(out, g->accounts[i].name);
        sbuf_puts(out, "\"} ");
        metrics_num(out, ceil(g->accounts[i].cooldown_left));
        sbuf_puts(out, "\n");
    }
    metrics_head(out, "switchyard_account_inflight", "gauge", "Requests each account is serving now.");
    for (size_t i = 0; i < g->n_accounts; i++) {
        sbuf_puts(out, "switchyard_account_inflight{account=\"");
        metrics_label(out, g->accounts[i].name);
        sbuf_printf(out, "\"} %d\n", g->accounts[i].inflight);
    }
    metrics_head(out, "switchyard_account_success_ratio_60s", "gauge",
                 "Share of each account's attempts in the last 60 s that succeeded (accounts with attempts only).");
    for (size_t i = 0; i < g->n_accounts; i++) {
        if (g->accounts[i].attempts_60s <= 0)
            continue;
        sbuf_puts(out, "switchyard_account_success_ratio_60s{account=\"");
        metrics_label(out, g->accounts[i].name);
        sbuf_puts(out, "\"} ");
        metrics_num(out, g->accounts[i].success_rate_60s);
        sbuf_puts(out, "\n");
    }
    metrics_head(out, "switchyard_account_latency_60s_seconds", "gauge",
                 "Mean latency of each account's successful attempts in the last 60 s.");
    for (size_t i = 0; i < g->n_accounts; i++) {
        if (g->accounts[i].latency_60s_ms < 0)
            continue;
        sbuf_puts(out, "switchyard_account_latency_60s_seconds{account=\"");
        metrics_label(out, g->accounts[i].name);
        sbuf_puts(out, "\"} ");
        metrics_num(out, g->accounts[i].latency_60s_ms / 1000.0);
        sbuf_puts(out, "\n");
    }
    metrics_head(out, "switchyard_account_usage_ratio", "gauge",
                 "Used share (0..1) of each account's usage windows, where the upstream reports it.");
    for (size_t i = 0; i < g->n_accounts; i++) {
        const double used[2] = {g->accounts[i].primary_used_pct, g->accounts[i].secondary_used_pct};
        for (int w = 0; w < 2; w++) {
            if (used[w] < 0)
                continue;
            sbuf_puts(out, "switchyard_account_usage_ratio{account=\"");
            metrics_label(out, g->accounts[i].name);
            sbuf_printf(out, "\",window=\"%s\"} ", w ? "secondary" : "primary");
            metrics_num(out, used[w] / 100.0);
            sbuf_puts(out, "\n");
        }
    }
}

static const char *metrics_key_name(const metrics_gauges *g, int64_t id, char *buf, size_t n)
{
    for (size_t i = 0; i < g->n_keys; i++)
        if (g->keys[i].id == id)
            return g->keys[i].name;
    snprintf(buf, n, "id:%lld", (long long)id);
    return buf;
}

/* {account="..",key="..",model=".." and the rest of the labels after it */
static void metrics_usage_labels(sbuf *out, const metrics_gauges *g, const metrics_usage_cell *c)
{
    char abuf[32], kbuf[32];
    const char *acct = c->account_id == METRICS_USAGE_OTHER ? "other" : c->account_id <= 0 ? "none"
                     : metrics_account_name(g, c->account_id, abuf, sizeof abuf);
    const char *key = c->key_id == METRICS_USAGE_OTHER ? "other" : c->key_id <= 0 ? "none"
                    : metrics_key_name(g, c->key_id, kbuf, sizeof kbuf);
    sbuf_puts(out, "account=\"");
    metrics_label(out, acct);
    sbuf_puts(out, "\",key=\"");
    metrics_label(out, key);
    sbuf_puts(out, "\",model=\"");
    metrics_label(out, metrics_model_name(c->model));
    sbuf_puts(out, "\"");
}

/* Key-rule refusals by key and reason (bounded by the keys: a slot each). */
static void metrics_refusals_format(sbuf *out, const metrics_gauges *g)
{
    metrics_head(out, "switchyard_key_refusals_total", "counter",
                 "Requests refused by their platform key's rules (expired, model_not_allowed, over_budget, rpm), "
                 "by key and reason; each is also a row of the request log.");
    for (size_t i = 0; i <= METRICS_REFUSAL_SLOTS; i++) {
        const uint64_t *n = i < METRICS_REFUSAL_SLOTS ? M.refusals[i].n : M.refusals_other;
        int64_t id = i < METRICS_REFUSAL_SLOTS ? M.refusals[i].key_id : 0;
        if (i < METRICS_REFUSAL_SLOTS && !id)
            continue;
        char kbuf[32];
        const char *key = i == METRICS_REFUSAL_SLOTS ? "other" : id < 0 ? "none" : metrics_key_name(g, id, kbuf, sizeof kbuf);
        for (int r = 0; r < METRICS_REFUSAL_REASONS; r++) {
            if (!n[r])
                continue;
            sbuf_puts(out, "switchyard_key_refusals_total{key=\"");
            metrics_label(out, key);
            sbuf_printf(out, "\",reason=\"%s\"} %llu\n", metrics_refusal_reasons[r], (unsigned long long)n[r]);
        }
    }
}

/* Tokens by direction and cost, per (account, key, model) cell that saw usage. */
static void metrics_usage_format(sbuf *out, const metrics_gauges *g)
{
    static const char *const dirs[3] = {"input", "cached", "output"};
    metrics_head(out, "switchyard_tokens_total", "counter",
                 "Tokens reported by the upstreams, by direction (input includes cached), account, key and model.");
    for (size_t i = 0; i <= METRICS_USAGE_SLOTS; i++) {
        const metrics_usage_cell *c = i < METRICS_USAGE_SLOTS ? &M.usage[i] : &M.usage_other;
        const uint64_t v[3] = {c->input, c->cached, c->output};
        if (!c->used || !(c->input || c->output))
            continue;
        for (int d = 0; d < 3; d++) {
            sbuf_printf(out, "switchyard_tokens_total{direction=\"%s\",", dirs[d]);
            metrics_usage_labels(out, g, c);
            sbuf_printf(out, "} %llu\n", (unsigned long long)v[d]);
        }
    }
    metrics_head(out, "switchyard_cost_usd_total", "counter",
                 "Cost in USD of the requests with a known price (policies/prices.lua), by account, key and model.");
    for (size_t i = 0; i <= METRICS_USAGE_SLOTS; i++) {
        const metrics_usage_cell *c = i < METRICS_USAGE_SLOTS ? &M.usage[i] : &M.usage_other;
        if (!c->used || !(c->cost > 0))
            continue;
        sbuf_puts(out, "switchyard_cost_usd_total{");
        metrics_usage_labels(out, g, c);
        sbuf_puts(out, "} ");
        metrics_num(out, c->cost);
        sbuf_puts(out, "\n");
    }
}

void metrics_format(sbuf *out, const metrics_gauges *g)
{
    metrics_requests_format(out);
    metrics_attempts_format(out, g, 0);
    metrics_attempts_format(out, g, 1);
    metrics_head(out, "switchyard_preflight_switches_total", "counter",
                 "Streams that switched accounts inside the preflight window.");
    sbuf_printf(out, "switchyard_preflight_switches_total %llu\n", (unsigned long long)M.preflight_switches);
    metrics_head(out, "switchyard_conversation_moves_total", "counter",
                 "Attempts that took a conversation to another account than the one that holds it (its turn state or its blobs).");
    sbuf_printf(out, "switchyard_conversation_moves_total{by=\"x-codex-turn-state\"} %llu\n",
                (unsigned long long)M.conversation_moves[0]);
    sbuf_printf(out, "switchyard_conversation_moves_total{by=\"blobs\"} %llu\n",
                (unsigned long long)M.conversation_moves[1]);
    sbuf_printf(out, "switchyard_conversation_moves_total{by=\"previous_response_id\"} %llu\n",
                (unsigned long long)M.conversation_moves[2]);
    metrics_head(out, "switchyard_blobs_stripped_total", "counter",
                 "Account-bound blobs left out of a request for an account that did not mint them, by what became of them.");
    sbuf_printf(out, "switchyard_blobs_stripped_total{action=\"dropped\"} %llu\n", (unsigned long long)M.blobs_dropped);
    sbuf_printf(out, "switchyard_blobs_stripped_total{action=\"replaced\"} %llu\n", (unsigned long long)M.blobs_replaced);
    metrics_head(out, "switchyard_strip_retries_total", "counter",
                 "Requests resent to the same account without the blobs it refused.");
    sbuf_printf(out, "switchyard_strip_retries_total %llu\n", (unsigned long long)M.strip_retries);
    if (g->redis) {
        metrics_head(out, "switchyard_redis_up", "gauge",
                     "1 while the link to the pool's Redis is up (0: this instance serves on its own state).");
        sbuf_printf(out, "switchyard_redis_up %d\n", g->redis_up ? 1 : 0);
    }
    metrics_head(out, "switchyard_redis_rtt_seconds", "histogram",
                 "Round trips to Redis, measured by the link's liveness PING (one a second).");
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_REDIS_RTT_BUCKETS; i++) {
        cum += M.redis_rtt_buckets[i];
        sbuf_printf(out, "switchyard_redis_rtt_seconds_bucket{le=\"%g\"} %llu\n", metrics_redis_rtt_le[i],
                    (unsigned long long)cum);
    }
    sbuf_printf(out, "switchyard_redis_rtt_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)M.redis_rtt_count);
    sbuf_printf(out, "switchyard_redis_rtt_seconds_sum %.6f\nswitchyard_redis_rtt_seconds_count %llu\n",
                M.redis_rtt_sum, (unsigned long long)M.redis_rtt_count);
    metrics_head(out, "switchyard_redis_waits_expired_total", "counter",
                 "Waits for the pool's word that ran out (SWITCHYARD_REDIS_WAIT_MS), so the local copy decided, "
                 "by kind: ask (records), slot (concurrency), chain, limits (rate limits), rotation.");
    for (size_t i = 0; i < METRICS_REDIS_WAITS; i++)
        sbuf_printf(out, "switchyard_redis_waits_expired_total{kind=\"%s\"} %llu\n", metrics_redis_wait_kinds[i],
                    (unsigned long long)M.redis_waits_expired[i]);
    metrics_head(out, "switchyard_redis_limits_refused_total", "counter",
                 "Refused because shared_limits_fail is closed and Redis's word on a limit could not be had: "
                 "key (a request, 503 limits_unavailable), account (an attempt, the account skipped).");
    sbuf_printf(out, "switchyard_redis_limits_refused_total{kind=\"key\"} %llu\n",
                (unsigned long long)M.redis_limits_refused[METRICS_LIMITS_REFUSED_KEY]);
    sbuf_printf(out, "switchyard_redis_limits_refused_total{kind=\"account\"} %llu\n",
                (unsigned long long)M.redis_limits_refused[METRICS_LIMITS_REFUSED_ACCOUNT]);
    metrics_head(out, "switchyard_redis_resyncs_total", "counter",
                 "Resynchronisations with the pool's shared state: at a (re)connect, or when its keys were found "
                 "gone while the link stayed up (FLUSHALL, eviction, a replica promoted empty).");
    sbuf_printf(out, "switchyard_redis_resyncs_total{cause=\"connect\"} %llu\n", (unsigned long long)M.redis_resyncs[0]);
    sbuf_printf(out, "switchyard_redis_resyncs_total{cause=\"data_lost\"} %llu\n", (unsigned long long)M.redis_resyncs[1]);
    metrics_head(out, "switchyard_redis_messages_dropped_total", "counter",
                 "Messages to or from the pool that did not get through: not sent while the link was down (the "
                 "resync at the next connect makes up for them), answers lost with the link, published messages "
                 "that could not be read.");
    static const char *const drop_reasons[METRICS_REDIS_DROPS] = {"link_down", "in_flight", "unreadable"};
    for (int i = 0; i < METRICS_REDIS_DROPS; i++)
        sbuf_printf(out, "switchyard_redis_messages_dropped_total{reason=\"%s\"} %llu\n", drop_reasons[i],
                    (unsigned long long)M.redis_dropped[i]);
    metrics_head(out, "switchyard_translations_total", "counter",
                 "Attempts sent in another dialect than the client's (docs/clients.md), by client>upstream.");
    for (size_t i = 0; i < METRICS_PAIRS && M.translations[i].pair[0]; i++)
        sbuf_printf(out, "switchyard_translations_total{pair=\"%s\"} %llu\n", M.translations[i].pair,
                    (unsigned long long)M.translations[i].n);
    metrics_head(out, "switchyard_retries_total", "counter", "Attempts repeated on the same account after a delay.");
    char idbuf[32];
    for (size_t i = 0; i < METRICS_RETRY_SLOTS; i++)
        if (M.retries[i].account_id) {
            sbuf_puts(out, "switchyard_retries_total{account=\"");
            metrics_label(out, metrics_account_name(g, M.retries[i].account_id, idbuf, sizeof idbuf));
            sbuf_printf(out, "\"} %llu\n", (unsigned long long)M.retries[i].count);
        }
    metrics_head(out, "switchyard_waits_total", "counter", "Times a request waited for an account to become free.");
    sbuf_printf(out, "switchyard_waits_total %llu\n", (unsigned long long)M.waits);
    metrics_head(out, "switchyard_wait_seconds_total", "counter", "Seconds requests spent waiting for an account.");
    sbuf_puts(out, "switchyard_wait_seconds_total ");
    metrics_num(out, M.wait_seconds);
    sbuf_puts(out, "\n");
    metrics_accounts_format(out, g);
    metrics_usage_format(out, g);
    metrics_refusals_format(out, g);
    metrics_hist_format(out, "switchyard_upstream_ttfb_seconds",
                        "Upstream time to first byte (request sent to response headers).", &M.ttfb);
    metrics_hist_format(out, "switchyard_upstream_attempt_duration_seconds",
                        "Upstream attempt duration, start to end.", &M.attempt_duration);
    metrics_head(out, "switchyard_policy_fallbacks_total", "counter",
                 "Policy hook calls decided by the built-in default (error, timeout, bad result).");
    sbuf_printf(out, "switchyard_policy_fallbacks_total %llu\n", (unsigned long long)g->policy_fallbacks);
    metrics_head(out, "switchyard_policy_reloads_total", "counter", "Policy reloads by result.");
    sbuf_printf(out, "switchyard_policy_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)M.reloads[1]);
    sbuf_printf(out, "switchyard_policy_reloads_total{result=\"error\"} %llu\n", (unsigned long long)M.reloads[0]);
    metrics_head(out, "switchyard_writer_queue_depth", "gauge", "Rows waiting for the database writer.");
    sbuf_printf(out, "switchyard_writer_queue_depth{kind=\"request_logs\"} %zu\n", g->writer_pending_logs);
    sbuf_printf(out, "switchyard_writer_queue_depth{kind=\"account_states\"} %zu\n", g->writer_pending_states);
    metrics_head(out, "switchyard_dropped_log_rows_total", "counter",
                 "Request log rows dropped because the writer queue was full.");
    sbuf_printf(out, "switchyard_dropped_log_rows_total %llu\n", (unsigned long long)g->dropped_logs);
    metrics_head(out, "switchyard_writer_failed_commits_total", "counter", "Database commits that failed and were retried.");
    sbuf_printf(out, "switchyard_writer_failed_commits_total %llu\n", (unsigned long long)g->failed_commits);
    metrics_head(out, "switchyard_active_requests", "gauge", "Client requests in progress.");
    sbuf_printf(out, "switchyard_active_requests %zu\n", g->active_requests);
    metrics_head(out, "switchyard_websockets_open", "gauge", "Responses API WebSocket connections open.");
    sbuf_printf(out, "switchyard_websockets_open %zu\n", g->websockets_open);
    metrics_head(out, "switchyard_websocket_turns_total", "counter",
                 "response.create messages served over a WebSocket: by an upstream turn, or a warm-up the gateway answered.");
    sbuf_printf(out, "switchyard_websocket_turns_total{kind=\"turn\"} %llu\n", (unsigned long long)M.websocket_turns[0]);
    sbuf_printf(out, "switchyard_websocket_turns_total{kind=\"warmup\"} %llu\n", (unsigned long long)M.websocket_turns[1]);
    metrics_head(out, "switchyard_body_decodes_total", "counter",
                 "Compressed request bodies decoded (Content-Encoding zstd, gzip, deflate), whatever came of them.");
    sbuf_printf(out, "switchyard_body_decodes_total %llu\n", (unsigned long long)M.body_decodes);
    metrics_head(out, "switchyard_body_decode_slices_total", "counter",
                 "Loop turns those decodings took: a body is decoded a slice at a time, other work between.");
    sbuf_printf(out, "switchyard_body_decode_slices_total %llu\n", (unsigned long long)M.body_decode_slices);
    metrics_head(out, "switchyard_alerts_total", "counter",
                 "Alert events by what became of them: raised; of those suppressed (the same event went out within "
                 "the dedup window) and unsent (the alert policy posted it nowhere: no webhook set).");
    sbuf_printf(out, "switchyard_alerts_total{result=\"raised\"} %llu\n", (unsigned long long)g->alerts_raised);
    sbuf_printf(out, "switchyard_alerts_total{result=\"suppressed\"} %llu\n", (unsigned long long)g->alerts_suppressed);
    sbuf_printf(out, "switchyard_alerts_total{result=\"unsent\"} %llu\n", (unsigned long long)g->alerts_unsent);
    metrics_head(out, "switchyard_alert_posts_total", "counter",
                 "Alert webhook posts: sent (a 2xx), retried (tries after a failure), failed (given up after the "
                 "retries), dropped (the oldest, from a full queue).");
    sbuf_printf(out, "switchyard_alert_posts_total{result=\"sent\"} %llu\n", (unsigned long long)g->alerts_sent);
    sbuf_printf(out, "switchyard_alert_posts_total{result=\"retried\"} %llu\n", (unsigned long long)g->alerts_retried);
    sbuf_printf(out, "switchyard_alert_posts_total{result=\"failed\"} %llu\n", (unsigned long long)g->alerts_failed);
    sbuf_printf(out, "switchyard_alert_posts_total{result=\"dropped\"} %llu\n", (unsigned long long)g->alerts_dropped);
    metrics_head(out, "switchyard_account_polls_in_flight", "gauge",
                 "Usage and model polls of the accounts in flight now (bounded: accounts/account_poll.h).");
    sbuf_printf(out, "switchyard_account_polls_in_flight %zu\n", g->polls_in_flight);
    metrics_head(out, "switchyard_account_polls_in_flight_max", "gauge", "The most account polls in flight at once since start.");
    sbuf_printf(out, "switchyard_account_polls_in_flight_max %zu\n", g->polls_in_flight_max);
    metrics_head(out, "switchyard_account_polls_total", "counter",
                 "Account polls started (usage and models), and ticks that stopped at the in-flight bound with a poll due.");
    sbuf_printf(out, "switchyard_account_polls_total{result=\"started\"} %llu\n", (unsigned long long)g->polls_started);
    sbuf_printf(out, "switchyard_account_polls_total{result=\"deferred\"} %llu\n", (unsigned long long)g->polls_deferred);
    metrics_head(out, "switchyard_alert_queue_depth", "gauge", "Alert webhook posts waiting to be sent.");
    sbuf_printf(out, "switchyard_alert_queue_depth %zu\n", g->alerts_queued);
    metrics_head(out, "switchyard_uptime_seconds", "gauge", "Seconds since the gateway started.");
    sbuf_puts(out, "switchyard_uptime_seconds ");
    metrics_num(out, floor(g->uptime_s));
    sbuf_puts(out, "\n");
}
