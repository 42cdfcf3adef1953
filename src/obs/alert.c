/* alert.c: the alert sender (see alert.h): the dedup window and the hook
 * call on the loop thread, a bounded queue, and one worker thread that
 * POSTs each queued post with a plain libcurl easy handle (blocking there,
 * never on the loop), retrying with a doubling backoff. A webhook is one
 * request now and then: a thread is simpler than a transfer on the loop's
 * multi handle and cannot slow a request down whatever the webhook does. */
#include "obs/alert.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ALERT_REPLY_MAX 4096 /* bytes of a webhook's answer kept (for the log) */

typedef struct alert_item {
    policy_alert_post post;
    uint64_t event;            /* the listed event it belongs to */
    struct alert_item *next;
} alert_item;

typedef struct alert_seen {
    uint64_t hash; /* of kind, subject and state; 0 free */
    double at;
    /* unsent: the hook posted it nowhere, under this policy engine and
     * webhook setting (a storm then asks the hook once per window, as one
     * that went out does; a new webhook or policy asks again at once) */
    int unsent;
    uint64_t policy_gen, webhook_gen;
} alert_seen;

struct alert_sender {
    alert_config cfg;
    char webhook[POLICY_ALERT_URL_MAX + 1];
    uint64_t webhook_gen;                  /* moves when the webhook setting changes */
    alert_seen seen[ALERT_DEDUP_SLOTS];    /* loop thread only */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    alert_item *head, *tail;               /* under mu */
    size_t queued;
    int stop;                              /* under mu; read unlocked by the transfer's progress callback */
    alert_stats stats;                     /* under mu */
    alert_entry log[ALERT_LOG_MAX];        /* under mu: a ring, event id % ALERT_LOG_MAX */
    uint64_t last_id;                      /* under mu */
};

/* src into dst (n bytes), cut on a character boundary: the list is JSON. */
static void alert_copy(char *dst, size_t n, const char *src)
{
    size_t len = sbuf_utf8_cut(src, strlen(src), n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* The listed event id while it is still in the ring, else NULL. Under mu. */
static alert_entry *alert_entry_find(alert_sender *as, uint64_t id)
{
    alert_entry *e = id ? &as->log[id % ALERT_LOG_MAX] : NULL;
    return e && e->id == id ? e : NULL;
}

/* One post of event id finished: sent (err NULL), failed or dropped. */
static void alert_entry_post_done(alert_sender *as, uint64_t id, alert_outcome how, const char *err)
{
    alert_entry *e = alert_entry_find(as, id);
    if (!e)
        return;
    e->posts_done++;
    if (how != ALERT_SENT && e->outcome != ALERT_FAILED) {
        e->outcome = how;
        alert_copy(e->detail, sizeof e->detail, err ? err : "");
    }
    if (e->posts_done >= e->posts && e->outcome == ALERT_QUEUED)
        e->outcome = ALERT_SENT;
}

/* ---------- the worker ---------- */

static size_t alert_discard(char *p, size_t size, size_t n, void *ud)
{
    sbuf *reply = ud;
    if (reply->len < ALERT_REPLY_MAX)
        sbuf_append(reply, p, size * n < ALERT_REPLY_MAX - reply->len ? size * n : ALERT_REPLY_MAX - reply->len);
    return size * n;
}

/* Aborts a POST in flight when the gateway stops. */
static int alert_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    alert_sender *as = ud;
    return __atomic_load_n(&as->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

/* The URL's scheme and host only, for the log: a webhook URL's path is
 * often its secret (Slack's, Discord's). */
static void alert_url_origin(const char *url, char *out, size_t n)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t len = strcspn(h, "/?#");
    snprintf(out, n, "%.*s%.*s", (int)(h - url), url, (int)(len < 200 ? len : 200), h);
}

/* One try: 0 when the webhook answered 2xx; else why into err. */
static int alert_post_once(alert_sender *as, const policy_alert_post *p, char *err, size_t errlen)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "cannot make a transfer");
        return -1;
    }
    struct curl_slist *hs = NULL;
    int has_type = 0;
    for (const char *h = p->headers; h && *h;) {
        const char *nl = strchr(h, '\n');
        size_t len = nl ? (size_t)(nl - h) : strlen(h);
        char line[1200];
        snprintf(line, sizeof line, "%.*s", (int)len, h);
        has_type |= strncasecmp(line, "content-type:", 13) == 0;
        hs = curl_slist_append(hs, line);
        h = nl ? nl + 1 : h + len;
    }
    if (!has_type)
        hs = curl_slist_append(hs, "Content-Type: application/json");
    hs = curl_slist_append(hs, "Expect:"); /* no 100-continue wait */
    sbuf reply = SBUF_INIT;
    curl_easy_setopt(c, CURLOPT_URL, p->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, p->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)p->body_len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "switchyard-alert");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, as->cfg.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, as->cfg.timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, alert_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, alert_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, as);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hs);
    sbuf_free(&reply);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s", curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status > 299) {
        snprintf(err, errlen, "HTTP %ld", status);
        return -1;
    }
    return 0;
}

/* Waits ms unless the gateway stops first; 1 when it stops. Under mu. */
static int alert_sleep_locked(alert_sender *as, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    while (!as->stop)
        if (pthread_cond_timedwait(&as->cv, &as->mu, &ts) == ETIMEDOUT)
            break;
    return as->stop;
}

static void *alert_worker(void *ud)
{
    alert_sender *as = ud;
    pthread_mutex_lock(&as->mu);
    for (;;) {
        while (!as->head && !as->stop)
            pthread_cond_wait(&as->cv, &as->mu);
        if (as->stop)
            break;
        alert_item *it = as->head;
        as->head = it->next;
        if (!as->head)
            as->tail = NULL;
        as->queued--;
        long wait = as->cfg.backoff_ms;
        int sent = 0, stopped = 0;
        char err[256] = "";
        for (int attempt = 0; attempt <= as->cfg.retries && !stopped; attempt++) {
            if (attempt) {
                as->stats.retried++;
                if ((stopped = alert_sleep_locked(as, wait)))
                    break;
                wait = wait < 600000 ? wait * 2 : wait;
            }
            pthread_mutex_unlock(&as->mu);
            sent = alert_post_once(as, &it->post, err, sizeof err) == 0;
            pthread_mutex_lock(&as->mu);
            stopped = as->stop;
            if (sent)
                break;
        }
        if (sent) {
            as->stats.sent++;
            alert_entry_post_done(as, it->event, ALERT_SENT, NULL);
        } else if (!stopped) {
            as->stats.failed++;
            char origin[256], why[600];
            alert_url_origin(it->post.url, origin, sizeof origin);
            log_warn("alert: the webhook at %s failed %d times (%s); this alert is dropped", origin,
                     as->cfg.retries + 1, err);
            snprintf(why, sizeof why, "%s at %s after %d tries", err, origin, as->cfg.retries + 1);
            alert_entry_post_done(as, it->event, ALERT_FAILED, why);
        }
        policy_alert_post_free(&it->post);
        free(it);
    }
    pthread_mutex_unlock(&as->mu);
    return NULL;
}

/* ---------- the loop's side ---------- */

alert_sender *alert_new(const alert_config *cfg)
{
    alert_sender *as = calloc(1, sizeof *as);
    if (!as)
        return NULL;
    as->cfg = *cfg;
    if (as->cfg.retries < 0)
        as->cfg.retries = 0;
    if (as->cfg.backoff_ms < 1)
        as->cfg.backoff_ms = 1;
    if (as->cfg.timeout_ms < 1)
        as->cfg.timeout_ms = ALERT_TIMEOUT_MS;
    if (as->cfg.queue_max < 1)
        as->cfg.queue_max = 1;
    pthread_mutex_init(&as->mu, NULL);
    pthread_cond_init(&as->cv, NULL);
    if (pthread_create(&as->thread, NULL, alert_worker, as) != 0) {
        log_error("alert: cannot start the sender thread; alerts are off");
        pthread_cond_destroy(&as->cv);
        pthread_mutex_destroy(&as->mu);
        free(as);
        return NULL;
    }
    return as;
}

void alert_free(alert_sender *as)
{
    if (!as)
        return;
    pthread_mutex_lock(&as->mu);
    __atomic_store_n(&as->stop, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&as->cv);
    pthread_mutex_unlock(&as->mu);
    pthread_join(as->thread, NULL);
    while (as->head) {
        alert_item *it = as->head;
        as->head = it->next;
        policy_alert_post_free(&it->post);
        free(it);
    }
    pthread_cond_destroy(&as->cv);
    pthread_mutex_destroy(&as->mu);
    free(as);
}

void alert_set_webhook(alert_sender *as, const char *url)
{
    if (!as || strcmp(as->webhook, url ? url : "") == 0)
        return;
    snprintf(as->webhook, sizeof as->webhook, "%s", url ? url : "");
    as->webhook_gen++;
}

/* FNV-1a over kind, subject and state with separators; never 0. */
static uint64_t alert_key(const char *kind, const char *subject, const char *state)
{
    uint64_t h = 1469598103934665603ULL;
    const char *parts[] = {kind, subject, state};
    for (int i = 0; i < 3; i++) {
        for (const char *s = parts[i] ? parts[i] : ""; *s; s++)
            h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        h = (h ^ 0x1f) * 1099511628211ULL;
    }
    return h ? h : 1;
}

/* The event with this key seen within the dedup window, or NULL. */
static const alert_seen *alert_seen_recent(const alert_sender *as, uint64_t key, double now)
{
    for (size_t i = 0; i < ALERT_DEDUP_SLOTS && as->seen[i].hash; i++)
        if (as->seen[i].hash == key)
            return now >= as->seen[i].at && now - as->seen[i].at < as->cfg.dedup_s ? &as->seen[i] : NULL;
    return NULL;
}

/* Remembers an event with this key now (its slot, a free one or the
 * oldest one): what became of it, as *seen says. */
static void alert_seen_note(alert_sender *as, const alert_seen *seen)
{
    alert_seen *slot = &as->seen[0];
    for (size_t i = 0; i < ALERT_DEDUP_SLOTS; i++) {
        alert_seen *s = &as->seen[i];
        if (s->hash == seen->hash || !s->hash) {
            slot = s;
            break;
        }
        if (s->at < slot->at)
            slot = s;
    }
    *slot = *seen;
}

static void alert_enqueue(alert_sender *as, policy_alert_post *post, uint64_t event)
{
    alert_item *it = calloc(1, sizeof *it);
    if (!it) {
        policy_alert_post_free(post);
        return;
    }
    it->post = *post;
    it->event = event;
    memset(post, 0, sizeof *post);
    pthread_mutex_lock(&as->mu);
    while (as->queued >= as->cfg.queue_max && as->head) { /* full: the oldest goes */
        alert_item *old = as->head;
        as->head = old->next;
        if (!as->head)
            as->tail = NULL;
        as->queued--;
        as->stats.dropped++;
        alert_entry_post_done(as, old->event, ALERT_DROPPED, "dropped from a full queue");
        policy_alert_post_free(&old->post);
        free(old);
    }
    if (as->tail)
        as->tail->next = it;
    else
        as->head = it;
    as->tail = it;
    as->queued++;
    pthread_cond_signal(&as->cv);
    pthread_mutex_unlock(&as->mu);
}

/* Lists an event (under mu): folds a repeat of the newest event with the
 * same key and outcome into it, else takes the next slot of the ring.
 * Returns the entry, and *fresh whether it is new. */
static alert_entry *alert_entry_add(alert_sender *as, const char *kind, const char *subject, const char *state,
                                    const char *text, alert_outcome outcome, double now, int *fresh)
{
    alert_entry *e = alert_entry_find(as, as->last_id);
    if (e && e->outcome == outcome && (outcome == ALERT_SUPPRESSED || outcome == ALERT_UNSENT) &&
        strcmp(e->kind, kind) == 0 && strcmp(e->subject, subject) == 0 && strcmp(e->state, state) == 0) {
        e->count++;
        e->last_at = now;
        alert_copy(e->text, sizeof e->text, text);
        *fresh = 0;
        return e;
    }
    e = &as->log[++as->last_id % ALERT_LOG_MAX];
    memset(e, 0, sizeof *e);
    e->id = as->last_id;
    e->at = e->last_at = now;
    e->count = 1;
    e->outcome = outcome;
    alert_copy(e->kind, sizeof e->kind, kind);
    alert_copy(e->subject, sizeof e->subject, subject);
    alert_copy(e->state, sizeof e->state, state);
    alert_copy(e->text, sizeof e->text, text);
    *fresh = 1;
    return e;
}

/* Raises one event: suppressed when it went out within the window; else
 * the hook's posts are queued, and only then does it count for dedup (an
 * event no one could be told of suppresses nothing). An event the hook
 * posted nowhere within the window, under the same policy and webhook, is
 * unsent again without asking the hook. Returns its id. */
static uint64_t alert_raise_text(alert_sender *as, policy_engine *pe, const char *kind, const char *subject,
                                 const char *state, double now, int dedup, const char *text, size_t *queued)
{
    alert_seen now_seen = {alert_key(kind, subject, state), now, 0, policy_generation(pe), as->webhook_gen};
    const alert_seen *seen = dedup && as->cfg.dedup_s > 0 ? alert_seen_recent(as, now_seen.hash, now) : NULL;
    int dup = seen && !seen->unsent;
    int still_unsent = seen && seen->unsent && seen->policy_gen == now_seen.policy_gen &&
                       seen->webhook_gen == now_seen.webhook_gen;
    policy_alert_post posts[POLICY_ALERT_POSTS];
    size_t n = 0;
    if (!dup && !still_unsent) {
        policy_alert_event ev = {kind, subject, state, text, as->webhook, now};
        n = policy_alert(pe, &ev, posts);
        now_seen.unsent = n == 0;
        if (dedup)
            alert_seen_note(as, &now_seen);
    }
    alert_outcome outcome = dup ? ALERT_SUPPRESSED : n ? ALERT_QUEUED : ALERT_UNSENT;
    int fresh;
    pthread_mutex_lock(&as->mu);
    as->stats.raised++;
    as->stats.suppressed += dup;
    as->stats.unsent += !dup && !n;
    alert_entry *e = alert_entry_add(as, kind, subject, state, text, outcome, now, &fresh);
    e->posts = (int)n;
    uint64_t id = e->id;
    pthread_mutex_unlock(&as->mu);
    /* the log: once per listed event, not per repeat of a storm; the text
     * is in the list (the place that raised it has logged what happened) */
    if (fresh && outcome == ALERT_QUEUED)
        log_info("alert %s (%s%s%s) raised: posted to %zu webhook(s)", kind, subject, *state ? ", " : "", state, n);
    else if (fresh && outcome == ALERT_UNSENT)
        log_info("alert %s (%s%s%s) raised: not sent, no webhook is set (alert_webhook_url)", kind, subject,
                 *state ? ", " : "", state);
    else if (fresh)
        log_debug("alert %s (%s%s%s) suppressed: the same went out within %.0f s", kind, subject, *state ? ", " : "",
                  state, as->cfg.dedup_s);
    for (size_t i = 0; i < n; i++)
        alert_enqueue(as, &posts[i], id);
    if (queued)
        *queued = n;
    return id;
}

size_t alert_raise(alert_sender *as, policy_engine *pe, const char *kind, const char *subject, const char *state,
                   double now, const char *fmt, ...)
{
    if (!as)
        return 0;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = 0;
    alert_raise_text(as, pe, kind, subject ? subject : "", state ? state : "", now, 1, text, &n);
    return n;
}

uint64_t alert_test(alert_sender *as, policy_engine *pe, double now)
{
    if (!as)
        return 0;
    return alert_raise_text(as, pe, "test", "operator", "", now, 0,
                            "a test alert, sent by the operator (`switchyard alerts test`)", NULL);
}

size_t alert_list(alert_sender *as, alert_entry *out, size_t max, uint64_t id_only)
{
    size_t n = 0;
    if (!as)
        return 0;
    pthread_mutex_lock(&as->mu);
    if (id_only) {
        alert_entry *e = alert_entry_find(as, id_only);
        if (e && max)
            out[n++] = *e;
    } else {
        for (uint64_t id = as->last_id; id > 0 && n < max && as->last_id - id < ALERT_LOG_MAX; id--)
            out[n++] = as->log[id % ALERT_LOG_MAX];
    }
    pthread_mutex_unlock(&as->mu);
    return n;
}

const char *alert_outcome_name(alert_outcome o)
{
    static const char *names[] = {"unsent", "suppressed", "queued", "sent", "failed", "dropped"};
    return (unsigned)o < sizeof names / sizeof *names ? names[o] : "unknown";
}

int alert_has_webhook(alert_sender *as) { return as && as->webhook[0]; }

void alert_stats_get(alert_sender *as, alert_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!as)
        return;
    pthread_mutex_lock(&as->mu);
    *out = as->stats;
    out->queued = as->queued;
    pthread_mutex_unlock(&as->mu);
}
