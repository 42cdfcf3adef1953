/* store_writer.c: the writer thread (see store.h): the queues the loop
 * puts account state, request logs, response owners, conversation turns,
 * logins and admin changes on (never blocking on disk), the thread that gathers them for a
 * group-commit window and hands each batch to store_writer_commit.c, the
 * eventfd that tells the loop a login is durable, sync, stop and the
 * queue's stats. */
#include "store/store_internal.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STORE_LOG_QUEUE_MAX 100000 /* pending request logs before the oldest are dropped */
#define STORE_BATCH_MAX 2000       /* request logs per writer transaction */
#define STORE_GROUP_MS 50          /* group-commit window: at most 20 fsyncs a second, lock free in between */
#define STORE_OWNER_QUEUE_MAX 100000  /* pending response owners before the oldest are dropped */
#define STORE_CONV_BATCH_MAX 256      /* conversation turns per writer transaction */
#define STORE_CONV_BATCH_BYTES ((size_t)16 << 20) /* and their bytes (at least one turn) */

/* ---------- the thread: batches off the queue ---------- */

static int writer_has_work(const store_writer *w)
{
    return w->head || w->n_states || w->owners_head || w->n_ops || w->logins_head || w->conv_head ||
           w->conv_sweep_wake || w->log_sweep_wake;
}

/* Moves up to STORE_BATCH_MAX logs into the batch (lock held; the whole
 * list at once when it fits, so the loop's puts rarely find the lock
 * taken). */
static void writer_take_logs(store_writer *w, writer_batch *b)
{
    if (w->n_logs <= STORE_BATCH_MAX) {
        b->logs = w->head;
        b->n_logs = w->n_logs;
        w->head = w->tail = NULL;
        w->n_logs = 0;
        return;
    }
    log_item **tailp = &b->logs;
    while (w->head && b->n_logs < STORE_BATCH_MAX) {
        *tailp = w->head;
        tailp = &w->head->next;
        w->head = w->head->next;
        b->n_logs++;
        w->n_logs--;
    }
    *tailp = NULL;
    if (!w->head)
        w->tail = NULL;
}

/* Moves up to STORE_BATCH_MAX owners into the batch (lock held), as
 * writer_take_logs. */
static void writer_take_owners(store_writer *w, writer_batch *b)
{
    if (w->n_owners <= STORE_BATCH_MAX) {
        b->owners = w->owners_head;
        b->n_owners = w->n_owners;
        w->owners_head = w->owners_tail = NULL;
        w->n_owners = 0;
        return;
    }
    owner_item **tailp = &b->owners;
    while (w->owners_head && b->n_owners < STORE_BATCH_MAX) {
        *tailp = w->owners_head;
        tailp = &w->owners_head->next;
        w->owners_head = w->owners_head->next;
        b->n_owners++;
        w->n_owners--;
    }
    *tailp = NULL;
    if (!w->owners_head)
        w->owners_tail = NULL;
}

/* Moves conversation turns into the batch (lock held): up to
 * STORE_CONV_BATCH_MAX of them and STORE_CONV_BATCH_BYTES, at least one,
 * so one commit writes a bounded amount. */
static void writer_take_convs(store_writer *w, writer_batch *b)
{
    conv_item **tailp = &b->convs;
    size_t bytes = 0;
    while (w->conv_head && b->n_convs < STORE_CONV_BATCH_MAX &&
           (b->n_convs == 0 || bytes + w->conv_head->size <= STORE_CONV_BATCH_BYTES)) {
        conv_item *c = w->conv_head;
        *tailp = c;
        tailp = &c->next;
        w->conv_head = c->next;
        bytes += c->size;
        w->conv_bytes -= c->size;
        b->n_convs++;
        w->n_convs--;
    }
    *tailp = NULL;
    if (!w->conv_head)
        w->conv_tail = NULL;
    b->conv_limits = w->conv_limits;
    b->conv_sweep = w->conv_sweep_wake;
    w->conv_sweep_wake = 0;
    b->log_limits = w->log_limits;
    b->log_sweep = w->log_sweep_wake;
    w->log_sweep_wake = 0;
}

/* Takes all coalesced states and up to STORE_BATCH_MAX logs and owners
 * (lock held). */
static void writer_take(store_writer *w, writer_batch *b)
{
    memset(b, 0, sizeof *b);
    b->states = w->states;
    b->n_states = w->n_states;
    w->states = NULL;
    w->n_states = w->cap_states = 0;
    memcpy(b->ops, w->ops, w->n_ops * sizeof *w->ops);
    b->n_ops = w->n_ops;
    w->n_ops = 0;
    b->logins = w->logins_head;
    b->n_logins = w->n_logins;
    w->logins_head = w->logins_tail = NULL;
    w->n_logins = 0;
    writer_take_logs(w, b);
    writer_take_owners(w, b);
    writer_take_convs(w, b);
    /* Every state is in the batch and the queues are in seq order, so the
     * batch covers everything queued before the first item still waiting. */
    uint64_t next = w->queued_seq + 1;
    if (w->head && w->head->seq < next)
        next = w->head->seq;
    if (w->owners_head && w->owners_head->seq < next)
        next = w->owners_head->seq;
    if (w->conv_head && w->conv_head->seq < next)
        next = w->conv_head->seq;
    b->seq = next - 1;
}

static void writer_import_free(import_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < sizeof j->owned / sizeof *j->owned; i++)
        sbuf_secret_free(j->owned[i]); /* tokens among them: wiped whichever they are */
    free(j);
}

static void writer_login_free(login_item *l)
{
    writer_import_free(l->import);
    sbuf_secret_free(l->access_token);
    sbuf_secret_free(l->refresh_token);
    sbuf_secret_free(l->id_token);
    sbuf_secret_free(l->expect_refresh);
    free(l->email);
    free(l->plan_type);
    free(l->chatgpt_account_id);
    free(l->login_error);
    sbuf_secret_free(l->expect_token);
    free(l->hold);
    free(l->hold_detail);
    free(l->models_ids);
    free(l->models_codex);
    if (l->call_free)
        l->call_free(l->call_arg);
    free(l);
}

static void writer_batch_free(writer_batch *b)
{
    for (login_item *l = b->logins, *next; l; l = next) {
        next = l->next;
        writer_login_free(l);
    }
    for (log_item *it = b->logs, *next; it; it = next) {
        next = it->next;
        free(it->rl.attempts_json);
        free(it->rl.error_message);
        free(it);
    }
    for (owner_item *o = b->owners, *next; o; o = next) {
        next = o->next;
        free(o);
    }
    for (conv_item *c = b->convs, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(b->states);
}

static int writer_window_open(const store_writer *w)
{
    return !w->stop && !w->sync_waiters && !w->n_logins && w->n_logs < STORE_BATCH_MAX &&
           w->n_owners < STORE_BATCH_MAX && w->n_convs < STORE_CONV_BATCH_MAX && w->conv_bytes < STORE_CONV_BATCH_BYTES;
}

/* After the first item arrives, gathers more for up to STORE_GROUP_MS (lock
 * held): one transaction and one fsync per window instead of per request,
 * and the write lock stays free most of the time for the CLI. */
static void writer_gather(store_writer *w)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += STORE_GROUP_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (writer_window_open(w))
        if (pthread_cond_timedwait(&w->work_cv, &w->mu, &until) == ETIMEDOUT)
            break;
}

/* Waits for work or stop, and wakes every STORE_WATCH_S for the watch of
 * the database file (lock held). */
static void writer_wait_work(store_writer *w)
{
    w->idle = 1;
    while (!writer_has_work(w) && !w->stop) {
        if (!w->path) {
            pthread_cond_wait(&w->work_cv, &w->mu);
            continue;
        }
        double due = w->watch_due;
        struct timespec until = {(time_t)due, (long)((due - (double)(time_t)due) * 1e9)};
        if (pthread_cond_timedwait(&w->work_cv, &w->mu, &until) == ETIMEDOUT)
            break;
    }
    w->idle = 0;
}

/* What the batch's imports did, kept by ticket for store_writer_import_result (under mu). */
static void writer_imports_publish(store_writer *w, const writer_batch *b)
{
    for (const login_item *l = b->logins; l; l = l->next) {
        if (!l->import)
            continue;
        size_t i = w->imports_next++ % STORE_IMPORT_RESULTS;
        w->imports[i].seq = l->seq;
        w->imports[i].outcome = l->import->outcome;
        memcpy(w->imports[i].name, l->import->name, sizeof w->imports[i].name);
        memcpy(w->imports[i].err, l->import->err, sizeof w->imports[i].err);
    }
}

static void *writer_main(void *arg)
{
    store_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        writer_wait_work(w);
        pthread_mutex_unlock(&w->mu);
        store_writer_watch(w); /* when due: a stat and a read of 16 bytes, off the loop */
        pthread_mutex_lock(&w->mu);
        if (!writer_has_work(w)) {
            if (w->stop)
                break; /* stop requested and the queue is drained */
            continue;
        }
        writer_gather(w);
        writer_batch b;
        writer_take(w, &b);
        pthread_mutex_unlock(&w->mu);
        store_writer_commit_retry(w, &b);
        pthread_mutex_lock(&w->mu);
        writer_imports_publish(w, &b);
        pthread_mutex_unlock(&w->mu);
        writer_batch_free(&b);
        pthread_mutex_lock(&w->mu);
        w->committed_seq = b.seq;
        pthread_cond_broadcast(&w->done_cv);
        if (b.n_logins && w->notify_fd >= 0) {
            uint64_t one = 1;
            if (write(w->notify_fd, &one, sizeof one) < 0 && errno != EAGAIN)
                log_warn("store: cannot signal a committed login: %s", strerror(errno));
        }
    }
    w->committed_seq = w->queued_seq;
    pthread_cond_broadcast(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---------- start / stop ---------- */

void store_writer_init(store_writer *w)
{
    memset(w, 0, sizeof *w);
    w->notify_fd = -1;
    w->conv_limits = (store_conversation_limits){STORE_CONV_MAX_ROWS_DEFAULT, STORE_CONV_MAX_BYTES_DEFAULT,
                                                 STORE_CONV_MAX_DAYS_DEFAULT};
    /* no retention until the gateway's settings give it (config_from_store):
     * a CLI command or a test opening the store never deletes a row */
    w->log_limits = (store_log_limits){0, 0};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the group window must not jump with the wall clock */
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->done_cv, NULL);
}

/* Signals go to the loop thread (SIGHUP reload, SIGTERM), never here. */
static int writer_spawn(store_writer *w)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int store_writer_start(store *s, char *err, size_t errlen)
{
    store_writer *w = &s->w;
    if (w->running) {
        store_errf(err, errlen, "writer already running");
        return -1;
    }
    if (!sqlite3_threadsafe()) { /* two threads use two connections of one library */
        store_errf(err, errlen, "sqlite3 was built without thread support");
        return -1;
    }
    if (store_writer_prepare(w, s->path, err, errlen) != 0) {
        store_writer_conn_close(w);
        return -1;
    }
    w->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->notify_fd < 0) {
        store_errf(err, errlen, "cannot create the writer's eventfd: %s", strerror(errno));
        store_writer_conn_close(w);
        return -1;
    }
    int rc = writer_spawn(w);
    if (rc != 0) {
        store_errf(err, errlen, "cannot start writer thread: %s", strerror(rc));
        store_writer_conn_close(w);
        return -1;
    }
    w->running = 1;
    return 0;
}

void store_writer_stop(store_writer *w)
{
    if (!w->running)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->running = 0;
    store_writer_conn_close(w);
    if (w->notify_fd >= 0)
        close(w->notify_fd);
    w->notify_fd = -1;
}

/* Frees whatever was queued but never written (writer never started). */
void store_writer_discard(store_writer *w)
{
    writer_batch lb = {.logins = w->logins_head};
    if (w->logins_head)
        log_warn("store: closing with %zu refreshed logins never written (writer not started)", w->n_logins);
    writer_batch_free(&lb);
    w->logins_head = w->logins_tail = NULL;
    w->n_logins = 0;
    if (w->head || w->n_states || w->owners_head || w->conv_head)
        log_warn("store: closing with %zu request logs, %zu state updates, %zu response owners and %zu conversation"
                 " turns never written (writer not started)", w->n_logs, w->n_states, w->n_owners, w->n_convs);
    writer_batch b = {.logs = w->head, .states = w->states, .owners = w->owners_head, .convs = w->conv_head};
    writer_batch_free(&b);
    w->head = w->tail = NULL;
    w->owners_head = w->owners_tail = NULL;
    w->conv_head = w->conv_tail = NULL;
    w->states = NULL;
    w->n_logs = w->n_states = w->cap_states = w->n_owners = w->n_ops = w->n_convs = w->conv_bytes = 0;
}

/* ---------- puts (the loop's side) ---------- */

/* Whether a put must wake the writer (lock held): when it waits for a
 * first item (once per idle spell), or when full, a batch that cuts its
 * gathering window short; else it is gathering or committing and looks
 * again. The caller signals after unlocking: woken under the lock, the
 * writer would only block on it (two more futex calls, one on the loop). */
static int writer_wake_due(store_writer *w, int full)
{
    int wake = w->idle || full;
    w->idle = 0;
    return wake;
}

void store_writer_put_state(store *s, const account_state *st)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    size_t i = 0;
    while (i < w->n_states && w->states[i].account_id != st->account_id)
        i++;
    void *states = w->states;
    if (i == w->n_states && store_grow(&states, &w->cap_states, w->n_states, sizeof *w->states) != 0) {
        pthread_mutex_unlock(&w->mu);
        log_error("store: out of memory; dropped a state update");
        return;
    }
    w->states = states;
    if (i == w->n_states)
        w->n_states++;
    w->states[i] = *st;
    w->states[i].last_error[sizeof w->states[i].last_error - 1] = '\0';
    w->queued_seq++;
    int wake = writer_wake_due(w, 0);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
}

static void store_log_terminate(request_log *r)
{
    r->endpoint[sizeof r->endpoint - 1] = '\0';
    r->model[sizeof r->model - 1] = '\0';
    r->upstream_model[sizeof r->upstream_model - 1] = '\0';
    r->account_name[sizeof r->account_name - 1] = '\0';
    r->route_strategy[sizeof r->route_strategy - 1] = '\0';
    r->error_class[sizeof r->error_class - 1] = '\0';
    if (r->error_message) { /* the bound the retention's size counts on, whoever filled it */
        size_t n = strlen(r->error_message);
        r->error_message[sbuf_utf8_cut(r->error_message, n, STORE_LOG_MESSAGE_MAX)] = '\0';
    }
}

/* Drops the oldest queued log (lock held); returns the new dropped total. */
static uint64_t writer_drop_oldest(store_writer *w)
{
    log_item *old = w->head;
    w->head = old->next;
    if (!w->head)
        w->tail = NULL;
    w->n_logs--;
    free(old->rl.attempts_json);
    free(old->rl.error_message);
    free(old);
    return ++w->dropped_logs;
}

void store_writer_put_log(store *s, const request_log *rl)
{
    store_writer *w = &s->w;
    log_item *it = malloc(sizeof *it);
    if (!it) {
        log_error("store: out of memory; dropped a request log");
        free(rl->attempts_json);
        free(rl->error_message);
        return;
    }
    it->next = NULL;
    it->rl = *rl;
    store_log_terminate(&it->rl);
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    if (w->n_logs >= STORE_LOG_QUEUE_MAX)
        dropped = writer_drop_oldest(w);
    it->seq = ++w->queued_seq;
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->n_logs++;
    int wake = writer_wake_due(w, w->n_logs == STORE_BATCH_MAX);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
    if (dropped == 1 || (dropped && dropped % 10000 == 0)) /* one line per 10000, not a flood */
        log_error("store: writer queue full (%d request logs); dropped the oldest (%llu dropped so far)",
                  STORE_LOG_QUEUE_MAX, (unsigned long long)dropped);
}

/* Drops the oldest queued owner (lock held); returns the new dropped total. */
static uint64_t writer_drop_oldest_owner(store_writer *w)
{
    owner_item *old = w->owners_head;
    w->owners_head = old->next;
    if (!w->owners_head)
        w->owners_tail = NULL;
    w->n_owners--;
    free(old);
    return ++w->dropped_owners;
}

static owner_item *writer_owner_new(const char *response_id, int64_t account_id)
{
    size_t len = strlen(response_id);
    owner_item *o = malloc(sizeof *o + len + 1);
    if (!o)
        return NULL;
    o->next = NULL;
    o->account_id = account_id;
    o->created_at = store_writer_clock(CLOCK_REALTIME);
    memcpy(o->response_id, response_id, len + 1);
    return o;
}

void store_writer_put_owner(store *s, const char *response_id, int64_t account_id)
{
    store_writer *w = &s->w;
    if (!response_id || !*response_id || strlen(response_id) > STORE_OWNER_ID_MAX || account_id <= 0)
        return;
    owner_item *o = writer_owner_new(response_id, account_id);
    if (!o) {
        log_error("store: out of memory; dropped a response owner");
        return;
    }
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    if (w->n_owners >= STORE_OWNER_QUEUE_MAX)
        dropped = writer_drop_oldest_owner(w);
    o->seq = ++w->queued_seq;
    if (w->owners_tail)
        w->owners_tail->next = o;
    else
        w->owners_head = o;
    w->owners_tail = o;
    w->n_owners++;
    int wake = writer_wake_due(w, w->n_owners == STORE_BATCH_MAX);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
    if (dropped == 1 || (dropped && dropped % 10000 == 0))
        log_error("store: writer queue full (%d response owners); dropped the oldest (%llu dropped so far)",
                  STORE_OWNER_QUEUE_MAX, (unsigned long long)dropped);
}

/* ---------- conversations ---------- */

/* 1 when id could be a stored response id: 1 to STORE_CONV_ID_MAX bytes. */
static int writer_conv_id_ok(const char *id)
{
    return id && *id && strlen(id) <= STORE_CONV_ID_MAX;
}

/* One allocation holding the item and its strings; NULL without memory. */
static conv_item *writer_conv_new(int del, const char *id, int64_t account_id, const char *prev, const char *in,
                                  size_t in_len, const char *out, size_t out_len)
{
    size_t id_len = strlen(id), prev_len = prev ? strlen(prev) + 1 : 0;
    size_t size = sizeof(conv_item) + id_len + 1 + prev_len + (del ? 0 : in_len + 1 + out_len + 1);
    conv_item *c = malloc(size);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    c->del = del;
    c->account_id = account_id;
    c->created_at = store_writer_clock(CLOCK_REALTIME);
    c->size = size;
    memcpy(c->response_id, id, id_len + 1);
    char *p = c->response_id + id_len + 1;
    if (prev) {
        memcpy(p, prev, prev_len);
        c->prev = p;
        p += prev_len;
    }
    if (!del) {
        memcpy(p, in, in_len);
        p[in_len] = '\0';
        c->input = p;
        c->input_len = in_len;
        p += in_len + 1;
        memcpy(p, out, out_len);
        p[out_len] = '\0';
        c->output = p;
        c->output_len = out_len;
    }
    return c;
}

/* Drops the oldest queued conversation item (lock held). */
static void writer_drop_oldest_conv(store_writer *w)
{
    conv_item *old = w->conv_head;
    w->conv_head = old->next;
    if (!w->conv_head)
        w->conv_tail = NULL;
    w->n_convs--;
    w->conv_bytes -= old->size;
    w->dropped_convs++;
    free(old);
}

static void writer_conv_dropped_log(uint64_t dropped, const char *why)
{
    if (dropped == 1 || (dropped && dropped % 1000 == 0)) /* one line per 1000, not a flood */
        log_error("store: %s; dropped a conversation turn (%llu dropped so far)", why, (unsigned long long)dropped);
}

/* Queues c (taking it), dropping the oldest while the queue is over its
 * bounds. */
static void writer_conv_queue(store_writer *w, conv_item *c)
{
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    uint64_t before = w->dropped_convs;
    while (w->conv_head && (w->n_convs >= STORE_CONV_QUEUE_MAX || w->conv_bytes + c->size > STORE_CONV_QUEUE_BYTES))
        writer_drop_oldest_conv(w);
    if (w->dropped_convs != before)
        dropped = w->dropped_convs;
    c->seq = ++w->queued_seq;
    if (w->conv_tail)
        w->conv_tail->next = c;
    else
        w->conv_head = c;
    w->conv_tail = c;
    w->n_convs++;
    w->conv_bytes += c->size;
    int wake = writer_wake_due(w, w->n_convs == STORE_CONV_BATCH_MAX || w->conv_bytes >= STORE_CONV_BATCH_BYTES);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
    writer_conv_dropped_log(dropped, "writer queue of conversation turns full");
}

void store_writer_put_conversation(store *s, const char *response_id, int64_t account_id,
                                   const char *previous_response_id, const char *input_json, size_t input_len,
                                   const char *output_json, size_t output_len)
{
    store_writer *w = &s->w;
    const char *prev = previous_response_id && *previous_response_id ? previous_response_id : NULL;
    if (!writer_conv_id_ok(response_id) || account_id <= 0 || !input_json || !output_json ||
        (prev && !writer_conv_id_ok(prev)))
        return;
    pthread_mutex_lock(&w->mu);
    store_conversation_limits l = w->conv_limits;
    int too_big = input_len > STORE_CONV_TURN_MAX || output_len > STORE_CONV_TURN_MAX - input_len ||
                  (int64_t)(input_len + output_len) > l.max_bytes;
    uint64_t dropped = too_big && l.max_rows > 0 && l.max_bytes > 0 ? ++w->dropped_convs : 0;
    pthread_mutex_unlock(&w->mu);
    if (l.max_rows <= 0 || l.max_bytes <= 0)
        return; /* recording is off */
    if (too_big) {
        writer_conv_dropped_log(dropped, "a conversation turn is larger than the retention keeps");
        return;
    }
    conv_item *c = writer_conv_new(0, response_id, account_id, prev, input_json, input_len, output_json, output_len);
    if (!c) {
        log_error("store: out of memory; dropped a conversation turn");
        return;
    }
    writer_conv_queue(w, c);
}

int store_conversation_delete(store *s, const char *response_id)
{
    if (!writer_conv_id_ok(response_id))
        return -1;
    conv_item *c = writer_conv_new(1, response_id, 0, NULL, NULL, 0, NULL, 0);
    if (!c) {
        log_error("store: out of memory; a conversation turn was not deleted");
        return -1;
    }
    writer_conv_queue(&s->w, c);
    return 0;
}

void store_conversation_limits_set(store *s, const store_conversation_limits *l)
{
    store_writer *w = &s->w;
    store_conversation_limits v = {l->max_rows < 0 ? 0 : l->max_rows, l->max_bytes < 0 ? 0 : l->max_bytes,
                                   l->max_days < 1 ? 1 : l->max_days};
    pthread_mutex_lock(&w->mu);
    int changed = memcmp(&v, &w->conv_limits, sizeof v) != 0;
    if (changed)
        w->conv_limits = v;
    pthread_mutex_unlock(&w->mu);
    if (changed)
        store_conversation_sweep_now(s);
}

void store_conversation_sweep_now(store *s)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    w->conv_sweep_wake = 1;
    w->queued_seq++; /* a store_writer_sync now waits for the sweep */
    int wake = writer_wake_due(w, 0);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
}

void store_log_limits_set(store *s, const store_log_limits *l)
{
    store_writer *w = &s->w;
    store_log_limits v = {l->max_rows < 1 ? 1 : l->max_rows, l->max_days < 1 ? 1 : l->max_days};
    pthread_mutex_lock(&w->mu);
    int changed = memcmp(&v, &w->log_limits, sizeof v) != 0, wake = 0;
    if (changed) {
        w->log_limits = v;
        w->log_sweep_wake = 1;
        w->queued_seq++; /* a store_writer_sync now waits for the sweep */
        wake = writer_wake_due(w, 0);
    }
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
}

void store_conversation_limits_get(store *s, store_conversation_limits *out)
{
    pthread_mutex_lock(&s->w.mu);
    *out = s->w.conv_limits;
    pthread_mutex_unlock(&s->w.mu);
}

int store_writer_put_admin_ops(store *s, const store_admin_op *ops, size_t n)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    /* all or none: the batch takes the queued changes whole, so the ops of
     * one call commit in one transaction */
    int ok = n <= STORE_OPS_MAX - w->n_ops;
    for (size_t i = 0; ok && i < n; i++) {
        w->ops[w->n_ops] = ops[i];
        w->ops[w->n_ops].key[sizeof ops[i].key - 1] = '\0';
        w->ops[w->n_ops].text[sizeof ops[i].text - 1] = '\0';
        w->n_ops++;
    }
    if (ok && n) {
        w->pinned_seq = ++w->queued_seq; /* applied by the loop already: a reload must not undo it */
        if (w->idle)
            pthread_cond_signal(&w->work_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

int store_writer_put_admin(store *s, const store_admin_op *op) { return store_writer_put_admin_ops(s, op, 1); }

/* Queues a login item: committed without the group window. Its ticket. */
static uint64_t writer_login_queue(store_writer *w, login_item *it)
{
    pthread_mutex_lock(&w->mu);
    uint64_t seq = it->seq = ++w->queued_seq;
    if (w->logins_tail)
        w->logins_tail->next = it;
    else
        w->logins_head = it;
    w->logins_tail = it;
    w->n_logins++;
    pthread_cond_signal(&w->work_cv); /* idle or gathering: a login does not wait for the window */
    pthread_mutex_unlock(&w->mu);
    return seq;
}

uint64_t store_writer_put_hold(store *s, const store_hold *h)
{
    if (!h->account_id || !h->state || !*h->state || !h->expect_token)
        return 0;
    login_item *it = calloc(1, sizeof *it);
    if (!it)
        return 0;
    it->account_id = h->account_id;
    it->hold = strndup(h->state, STORE_HOLD_STATE_MAX);
    it->hold_detail = h->detail ? strndup(h->detail, STORE_HOLD_DETAIL_MAX) : NULL;
    it->expect_token = store_strdup(h->expect_token);
    it->expect_gen = h->expect_gen;
    it->hold_since = store_now();
    if (!it->hold || (h->detail && !it->hold_detail)) {
        writer_login_free(it);
        return 0;
    }
    uint64_t seq = writer_login_queue(&s->w, it);
    pthread_mutex_lock(&s->w.mu);
    if (seq > s->w.pinned_seq) /* the loop holds the account already: a reload must not undo it */
        s->w.pinned_seq = seq;
    pthread_mutex_unlock(&s->w.mu);
    return seq;
}

uint64_t store_writer_put_models(store *s, int64_t account_id, const char *ids, const char *codex)
{
    login_item *it = account_id ? calloc(1, sizeof *it) : NULL;
    if (!it)
        return 0;
    it->account_id = account_id;
    it->models = 1;
    it->models_ids = store_strdup(ids);
    it->models_codex = store_strdup(codex);
    return writer_login_queue(&s->w, it);
}

uint64_t store_writer_put_call(store *s, int (*call)(sqlite3 *db, void *arg), void *arg, void (*free_fn)(void *arg))
{
    login_item *it = call ? calloc(1, sizeof *it) : NULL;
    if (!it) {
        if (free_fn)
            free_fn(arg);
        return 0;
    }
    it->call = call;
    it->call_arg = arg;
    it->call_free = free_fn;
    return writer_login_queue(&s->w, it);
}

uint64_t store_writer_put_import(store *s, const account_new *a, const char *label)
{
    login_item *it = calloc(1, sizeof *it);
    import_job *j = it ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        free(it);
        return 0;
    }
    it->import = j;
    j->a = *a;
    const char **strs[] = {&j->a.name, &j->a.base_url, &j->a.token, &j->a.chatgpt_account_id, &j->a.model_map,
                           &j->a.login.refresh_token, &j->a.login.id_token, &j->a.login.email,
                           &j->a.login.plan_type, &j->a.budget_period, &j->a.models};
    _Static_assert(sizeof strs / sizeof *strs == sizeof j->owned / sizeof *j->owned, "every string is owned");
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        if (!*strs[i])
            continue;
        j->owned[i] = strdup(*strs[i]);
        if (!j->owned[i]) {
            writer_login_free(it);
            return 0;
        }
        *strs[i] = j->owned[i];
    }
    snprintf(j->label, sizeof j->label, "%s", label ? label : "the entry");
    return writer_login_queue(&s->w, it);
}

store_import_outcome store_writer_import_result(store *s, uint64_t ticket, char *name, size_t namelen, char *err,
                                                size_t errlen)
{
    store_writer *w = &s->w;
    store_import_outcome r = STORE_IMPORT_UNKNOWN;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; ticket && i < STORE_IMPORT_RESULTS; i++)
        if (w->imports[i].seq == ticket) {
            r = (store_import_outcome)w->imports[i].outcome;
            snprintf(name, namelen, "%s", w->imports[i].name);
            snprintf(err, errlen, "%s", w->imports[i].err);
        }
    pthread_mutex_unlock(&w->mu);
    return r;
}

uint64_t store_writer_put_login(store *s, const store_login *l)
{
    store_writer *w = &s->w;
    login_item *it = calloc(1, sizeof *it);
    if (!it || !l->account_id || (!l->login_error && !l->access_token)) {
        free(it);
        return 0;
    }
    it->account_id = l->account_id;
    it->access_token = store_strdup(l->access_token);
    it->refresh_token = store_strdup(l->refresh_token);
    it->id_token = store_strdup(l->id_token);
    it->email = store_strdup(l->email);
    it->plan_type = store_strdup(l->plan_type);
    it->chatgpt_account_id = store_strdup(l->chatgpt_account_id);
    it->token_expires_at = l->token_expires_at;
    it->last_refresh_at = l->last_refresh_at;
    it->login_error = store_strdup(l->login_error);
    it->expect_refresh = store_strdup(l->expect_refresh);
    return writer_login_queue(w, it);
}

/* ---------- commits, sync and stats ---------- */

uint64_t store_writer_committed(store *s)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    uint64_t c = w->committed_seq;
    pthread_mutex_unlock(&w->mu);
    return c;
}

uint64_t store_writer_queued(store *s)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    uint64_t q = w->running ? w->queued_seq : 0;
    pthread_mutex_unlock(&w->mu);
    return q;
}

int store_writer_notify_fd(store *s) { return s->w.notify_fd; }

int store_writer_unwritten_changes(store *s)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    int pinned = w->running && w->committed_seq < w->pinned_seq;
    pthread_mutex_unlock(&w->mu);
    return pinned;
}

void store_writer_sync(store *s)
{
    store_writer *w = &s->w;
    if (!w->running)
        return; /* nothing would ever commit; blocking forever helps no one */
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->queued_seq;
    w->sync_waiters++;
    pthread_cond_signal(&w->work_cv); /* cut a gathering window short */
    while (w->committed_seq < target)
        pthread_cond_wait(&w->done_cv, &w->mu);
    w->sync_waiters--;
    pthread_mutex_unlock(&w->mu);
}

void store_writer_stats_get(store *s, store_writer_stats *out)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    out->pending_logs = w->n_logs;
    out->pending_states = w->n_states;
    out->pending_changes = w->n_ops;
    out->dropped_logs = w->dropped_logs;
    out->failed_commits = w->failed_commits;
    out->pending_owners = w->n_owners;
    out->dropped_owners = w->dropped_owners;
    out->pending_conversations = w->n_convs;
    out->dropped_conversations = w->dropped_convs;
    out->swept_conversations = w->swept_convs;
    out->swept_logs = w->swept_logs;
    out->conversation_sweeps = w->conv_sweeps;
    out->failing = w->failing;
    out->idle = w->idle && !writer_has_work(w);
    snprintf(out->last_error, sizeof out->last_error, "%s", w->last_error);
    snprintf(out->file_problem, sizeof out->file_problem, "%s", w->file_problem);
    out->db_bytes = w->db_bytes;
    out->wal_bytes = w->wal_bytes;
    out->disk_free_bytes = w->disk_free_bytes;
    pthread_mutex_unlock(&w->mu);
}
