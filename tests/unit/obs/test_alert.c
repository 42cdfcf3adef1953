/* test_alert.c: the alert sender (obs/alert.c) against a tiny webhook
 * receiver in a thread of this test: an event is posted once within the
 * dedup window, a failing webhook is retried and then given up, a full
 * queue drops its oldest post, and nothing of it waits on the caller. */
#include "check.h"
#include "obs/alert.h"
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------- the receiver: answers every request with `status` ---------- */

typedef struct receiver {
    int fd, port, status;
    int delay_ms;          /* before answering */
    volatile int hits;
    char last[4096];       /* the last request, head and body */
    pthread_t t;
    volatile int stop;
} receiver;

static void *receiver_run(void *ud)
{
    receiver *r = ud;
    while (!r->stop) {
        int c = accept(r->fd, NULL, NULL);
        if (c < 0)
            continue;
        char buf[4096];
        size_t n = 0;
        struct timeval tv = {1, 0};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (;;) { /* the head, then Content-Length bytes of body */
            ssize_t got = recv(c, buf + n, sizeof buf - 1 - n, 0);
            if (got <= 0)
                break;
            n += (size_t)got;
            buf[n] = '\0';
            char *end = strstr(buf, "\r\n\r\n");
            char *cl = strcasestr(buf, "content-length:");
            if (end && (!cl || (size_t)(end + 4 - buf) + (size_t)atol(cl + 15) <= n))
                break;
        }
        buf[n] = '\0';
        memcpy(r->last, buf, n + 1);
        if (r->delay_ms)
            usleep((useconds_t)r->delay_ms * 1000);
        char reply[128];
        int len = snprintf(reply, sizeof reply, "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                           r->status);
        if (send(c, reply, (size_t)len, MSG_NOSIGNAL) < 0)
            perror("send");
        close(c);
        __atomic_add_fetch(&r->hits, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void receiver_start(receiver *r, int status)
{
    memset(r, 0, sizeof *r);
    r->status = status;
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    struct timeval tv = {0, 100000};
    setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv); /* accept wakes to see stop */
    if (bind(r->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(r->fd, 16) != 0 ||
        getsockname(r->fd, (struct sockaddr *)&a, &al) != 0)
        abort();
    r->port = ntohs(a.sin_port);
    pthread_create(&r->t, NULL, receiver_run, r);
}

static void receiver_stop(receiver *r)
{
    r->stop = 1;
    pthread_join(r->t, NULL);
    close(r->fd);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits up to 5 s for cond over the sender's stats. */
#define WAIT_FOR(as, st, cond) do { double _t = mono(); \
    do { alert_stats_get(as, &st); if (cond) break; usleep(10000); } while (mono() - _t < 5); } while (0)

static alert_config quick(void)
{
    alert_config c = {.dedup_s = 600, .backoff_ms = 20, .retries = 3, .timeout_ms = 2000, .queue_max = 8};
    return c;
}

static void url_of(const receiver *r, char *out, size_t n) { snprintf(out, n, "http://127.0.0.1:%d/hook/SECRETPATH", r->port); }

/* ---------- cases ---------- */

static void test_an_event_posts_a_slack_body_once_within_the_dedup_window(void)
{
    receiver r;
    receiver_start(&r, 200);
    char url[128];
    url_of(&r, url, sizeof url);
    alert_sender *as = alert_new(&(alert_config){quick().dedup_s, 20, 3, 2000, 8});
    alert_set_webhook(as, url);
    CHECK_EQ_INT(alert_raise(as, NULL, "account_held", "k1", "key_refused", 1000, "account %s is held", "k1"), 1);
    CHECK_EQ_INT(alert_raise(as, NULL, "account_held", "k1", "key_refused", 1300, "again"), 0); /* within 10 min */
    CHECK_EQ_INT(alert_raise(as, NULL, "account_held", "k2", "key_refused", 1300, "another account"), 1);
    CHECK_EQ_INT(alert_raise(as, NULL, "account_held", "k1", "key_refused", 1601, "after the window"), 1);
    alert_stats st;
    WAIT_FOR(as, st, st.sent == 3);
    CHECK_EQ_INT(st.sent, 3);
    CHECK_EQ_INT(st.raised, 4);
    CHECK_EQ_INT(st.suppressed, 1);
    CHECK_EQ_INT(r.hits, 3);
    CHECK(strstr(r.last, "POST /hook/SECRETPATH HTTP/1.1") != NULL);
    CHECK(strcasestr(r.last, "content-type: application/json") != NULL);
    CHECK(strstr(r.last, "{\"text\":\"switchyard: after the window\"}") != NULL);
    alert_free(as);
    receiver_stop(&r);
}

static void test_no_webhook_posts_nothing(void)
{
    alert_sender *as = alert_new(&(alert_config){600, 20, 3, 2000, 8});
    CHECK_EQ_INT(alert_raise(as, NULL, "breaker_open", "a", "", 1000, "x"), 0);
    alert_stats st;
    alert_stats_get(as, &st);
    CHECK_EQ_INT(st.raised, 1);
    CHECK_EQ_INT(st.queued + st.sent, 0);
    alert_free(as);
    CHECK_EQ_INT(alert_raise(NULL, NULL, "breaker_open", "a", "", 1000, "x"), 0); /* no sender: nothing */
}

/* Events posted nowhere (no webhook yet) are listed unsent, a storm as one
 * row, and suppress nothing: the same event once a webhook is set goes out
 * at once, within the window. */
static void test_unsent_events_fold_and_a_new_webhook_sends_the_next_at_once(void)
{
    receiver r;
    receiver_start(&r, 200);
    char url[128];
    url_of(&r, url, sizeof url);
    alert_sender *as = alert_new(&(alert_config){600, 20, 3, 2000, 8});
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(alert_raise(as, NULL, "pool_exhausted", "pool", "usage_limit", 1000 + i, "storm"), 0);
    alert_entry list[4];
    CHECK_EQ_INT(alert_list(as, list, 4, 0), 1);
    CHECK_EQ_INT(list[0].outcome, ALERT_UNSENT);
    CHECK_EQ_INT(list[0].count, 3);
    alert_set_webhook(as, url);
    CHECK_EQ_INT(alert_raise(as, NULL, "pool_exhausted", "pool", "usage_limit", 1010, "after the webhook"), 1);
    CHECK_EQ_INT(alert_raise(as, NULL, "pool_exhausted", "pool", "usage_limit", 1020, "again"), 0); /* it went out */
    alert_stats st;
    WAIT_FOR(as, st, st.sent == 1);
    CHECK_EQ_INT(st.unsent, 3);
    CHECK_EQ_INT(st.suppressed, 1);
    CHECK_EQ_INT(alert_list(as, list, 4, 0), 3);
    CHECK_EQ_INT(list[0].outcome, ALERT_SUPPRESSED);
    CHECK_EQ_INT(list[1].outcome, ALERT_SENT);
    CHECK_EQ_INT(list[2].outcome, ALERT_UNSENT);
    alert_free(as);
    receiver_stop(&r);
}

static void test_a_failing_webhook_is_retried_then_given_up(void)
{
    receiver r;
    receiver_start(&r, 500);
    char url[128];
    url_of(&r, url, sizeof url);
    alert_sender *as = alert_new(&(alert_config){600, 20, 3, 2000, 8});
    alert_set_webhook(as, url);
    alert_raise(as, NULL, "db_degraded", "database", "writer_failing", 1000, "the writer fails");
    alert_stats st;
    WAIT_FOR(as, st, st.failed == 1);
    CHECK_EQ_INT(st.failed, 1);
    CHECK_EQ_INT(st.retried, 3);
    CHECK_EQ_INT(st.sent, 0);
    CHECK_EQ_INT(r.hits, 4); /* the first try and 3 retries */
    alert_free(as);
    receiver_stop(&r);
}

static void test_a_full_queue_drops_its_oldest_and_raising_never_waits(void)
{
    receiver r;
    receiver_start(&r, 200);
    r.delay_ms = 300; /* a slow webhook */
    char url[128];
    url_of(&r, url, sizeof url);
    alert_sender *as = alert_new(&(alert_config){600, 20, 0, 5000, 2});
    alert_set_webhook(as, url);
    double t0 = mono();
    for (int i = 0; i < 6; i++) {
        char subject[16];
        snprintf(subject, sizeof subject, "a%d", i);
        alert_raise(as, NULL, "breaker_open", subject, "", 1000, "account %s", subject);
    }
    CHECK(mono() - t0 < 0.1); /* six events, a slow webhook: the caller never waited */
    alert_stats st;
    alert_stats_get(as, &st);
    CHECK(st.queued <= 2);
    CHECK(st.dropped >= 3); /* the worker took one at most; 2 wait; the rest were dropped */
    WAIT_FOR(as, st, st.queued == 0 && st.sent + st.dropped == 6);
    CHECK_EQ_INT(st.sent + st.dropped, 6);
    CHECK(strstr(r.last, "account a5") != NULL); /* the newest was kept */
    alert_free(as);
    receiver_stop(&r);
}

static void test_stopping_aborts_a_post_in_flight(void)
{
    receiver r;
    receiver_start(&r, 200);
    r.delay_ms = 3000;
    char url[128];
    url_of(&r, url, sizeof url);
    alert_sender *as = alert_new(&(alert_config){600, 20, 3, 10000, 8});
    alert_set_webhook(as, url);
    alert_raise(as, NULL, "breaker_open", "a", "", 1000, "x");
    usleep(200000);
    double t0 = mono();
    alert_free(as);
    CHECK(mono() - t0 < 2.0);
    receiver_stop(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(test_an_event_posts_a_slack_body_once_within_the_dedup_window);
    RUN(test_no_webhook_posts_nothing);
    RUN(test_unsent_events_fold_and_a_new_webhook_sends_the_next_at_once);
    RUN(test_a_failing_webhook_is_retried_then_given_up);
    RUN(test_a_full_queue_drops_its_oldest_and_raising_never_waits);
    RUN(test_stopping_aborts_a_post_in_flight);
    curl_global_cleanup();
    return check_summary();
}
