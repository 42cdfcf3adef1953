/* log.c: leveled logging to stderr, rate limiting of repeated lines, and
 * redaction of secret-looking text. */
#include "base/log.h"
#include "base/text.h"
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int log_threshold = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(int level) { log_threshold = level; }

int log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

/* Rate limit: each call site (its format string) may write LOG_BURST lines
 * per LOG_WINDOW_S seconds; further lines in that window are counted and
 * reported as one line when the site next writes. A fault that repeats on
 * every loop turn (accept() failing, a disk that stays full) then costs at
 * most 10 lines a second instead of filling the disk; an operator's burst
 * of SIGHUPs still gets a line each. Debug lines are not
 * limited: they are asked for. */
#define LOG_SITES 128
#define LOG_BURST 100
#define LOG_WINDOW_S 10

typedef struct log_site {
    const char *fmt;
    time_t window_start;
    unsigned written;
    unsigned long suppressed;
} log_site;

static log_site log_sites[LOG_SITES];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long log_suppressed_total;

/* 1 if this line may be written; *held receives the lines suppressed since
 * the site last wrote (to be reported with this one). */
static int log_admit(const char *fmt, time_t now, unsigned long *held)
{
    uintptr_t h = (uintptr_t)fmt;
    h ^= h >> 7;
    size_t i = (size_t)(h % LOG_SITES);
    *held = 0;
    pthread_mutex_lock(&log_mu);
    log_site *s = &log_sites[i];
    if (s->fmt != fmt) { /* a new site (or a collision: the newcomer takes the slot) */
        s->fmt = fmt;
        s->window_start = now;
        s->written = 0;
        s->suppressed = 0;
    }
    if (now - s->window_start >= LOG_WINDOW_S) {
        s->window_start = now;
        s->written = 0;
    }
    int ok = s->written < LOG_BURST;
    if (ok) {
        s->written++;
        *held = s->suppressed;
        s->suppressed = 0;
    } else {
        s->suppressed++;
        log_suppressed_total++;
    }
    pthread_mutex_unlock(&log_mu);
    return ok;
}

unsigned long log_suppressed(void)
{
    pthread_mutex_lock(&log_mu);
    unsigned long n = log_suppressed_total;
    pthread_mutex_unlock(&log_mu);
    return n;
}

void log_msg(int level, const char *fmt, ...)
{
    if (level < log_threshold)
        return;
    char ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    unsigned long held = 0;
    if (level > LOG_DEBUG && !log_admit(fmt, now.tv_sec, &held))
        return;
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one message, one line: the values in it (names, models, what an
     * upstream said) have their control characters escaped */
    sbuf esc = SBUF_INIT;
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    text_escape(&esc, line, len, NULL);
    const char *text = esc.p ? esc.p : "";
    if (held)
        fprintf(stderr, "%s.%03ldZ %-5s %s (and %lu more like it, not shown)\n", ts, now.tv_nsec / 1000000,
                level_names[level], text, held);
    else
        fprintf(stderr, "%s.%03ldZ %-5s %s\n", ts, now.tv_nsec / 1000000, level_names[level], text);
    sbuf_free(&esc);
}

/* A run of key-ish characters long enough to be a credential. */
static size_t secret_run(const char *s)
{
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '-' || s[n] == '_' || s[n] == '.')
        n++;
    return n;
}

void log_redact(char *dst, size_t n, const char *src)
{
    size_t o = 0;
    if (n == 0)
        return;
    while (*src && o + 1 < n) {
        size_t run = secret_run(src);
        int looks_key = run >= 24 || (run >= 16 && (strncmp(src, "sk-", 3) == 0 || strncmp(src, "sy-", 3) == 0));
        if (looks_key) {
            const char *r = "[redacted]";
            for (; *r && o + 1 < n; r++)
                dst[o++] = *r;
            src += run;
        } else if (run) {
            for (size_t i = 0; i < run && o + 1 < n; i++)
                dst[o++] = *src++;
        } else {
            dst[o++] = *src++;
        }
    }
    dst[o] = '\0';
}

/* ---------- error messages kept in the request log ---------- */

/* 1 when the run at s (ASCII key-ish characters) is a keyword after which
 * the next run is a credential whatever it looks like. */
static int log_auth_word(const char *s, size_t run)
{
    static const char *const words[] = {"bearer", "basic", "authorization", "api-key", "x-api-key", "apikey"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == run && strncasecmp(s, words[i], run) == 0)
            return 1;
    return 0;
}

/* Whether a run that long is a word-like name and not a credential: every
 * piece between - _ . is lower-case letters, at most 12 digits, or at most
 * 3 characters. Codes, model names and dates pass
 * ("unsupported_country_region_territory", "o3-deep-research-2025-06-26");
 * a random token of 24 characters or more almost never does. */
static int log_run_wordlike(const char *s, size_t run)
{
    size_t i = 0;
    while (i < run) {
        size_t j = i, lower = 0, digit = 0;
        for (; j < run && s[j] != '-' && s[j] != '_' && s[j] != '.'; j++) {
            lower += s[j] >= 'a' && s[j] <= 'z';
            digit += s[j] >= '0' && s[j] <= '9';
        }
        size_t len = j - i;
        if (!(len <= 3 || lower == len || (digit == len && len <= 12)))
            return 0;
        i = j + 1;
    }
    return 1;
}

static int log_run_secret(const char *s, size_t run)
{
    /* a key, or the start of one that the sender masked ("sk-abc12****"),
     * at the run's start or after a separator ("org_sk-..."; not "task-") */
    for (size_t i = 0; i + 6 <= run; i++)
        if ((i == 0 || s[i - 1] == '-' || s[i - 1] == '_' || s[i - 1] == '.') &&
            (strncmp(s + i, "sk-", 3) == 0 || strncmp(s + i, "sy-", 3) == 0))
            return 1;
    return run >= 24 && !log_run_wordlike(s, run);
}

/* Appends the len bytes at src to dst[*o..] while they fit below max - 1;
 * returns 0 when they did not (dst is full). */
static int log_put(char *dst, size_t max, size_t *o, const char *src, size_t len)
{
    if (*o + len + 1 > max)
        return 0;
    memcpy(dst + *o, src, len);
    *o += len;
    return 1;
}

size_t log_redact_message(char *dst, size_t max, const char *s, size_t n)
{
    if (max == 0)
        return 0;
    size_t o = 0;
    int cut = n > LOG_MESSAGE_IN, armed = 0, space = 0;
    if (cut)
        n = LOG_MESSAGE_IN;
    for (size_t i = 0; s && i < n;) {
        if (n - i >= 10 && memcmp(s + i, "[redacted]", 10) == 0) { /* redacted before (the account's scrub) */
            if ((space && !log_put(dst, max, &o, " ", 1)) || !log_put(dst, max, &o, s + i, 10))
                break;
            space = armed = 0;
            i += 10;
            continue;
        }
        size_t run = 0;
        while (i + run < n && (isalnum((unsigned char)s[i + run]) || s[i + run] == '-' || s[i + run] == '_' ||
                               s[i + run] == '.'))
            run++;
        while (run && s[i + run - 1] == '.') /* a sentence's full stop is not the word's */
            run--;
        if (run && cut && i + run == n)
            break; /* the input was cut inside this run: it may be half a credential */
        size_t k = run ? run : sbuf_utf8_len(s + i, n - i);
        int blank = !run && (k == 0 ? 0 : k == 1 ? (unsigned char)s[i] <= 0x20 || s[i] == 0x7f
                                                 : k == 2 && (unsigned char)s[i] == 0xC2 && (unsigned char)s[i + 1] < 0xA0);
        if (blank) {
            space = o > 0;
            i += k;
            continue;
        }
        if (space && !log_put(dst, max, &o, " ", 1))
            break;
        space = 0;
        if (run) {
            int word = log_auth_word(s + i, run); /* "Authorization: Bearer X": X is the value */
            int secret = !word && (armed || log_run_secret(s + i, run));
            armed = word;
            if (secret && !log_put(dst, max, &o, "[redacted]", 10))
                break;
            if (!secret && !log_put(dst, max, &o, s + i, run)) {
                /* a word that does not fit is left out (half of "Bearer" would
                 * read as another word), unless it is all there is */
                if (o == 0)
                    log_put(dst, max, &o, s + i, max - 1);
                break;
            }
        } else if (!log_put(dst, max, &o, k ? s + i : "?", k ? k : 1)) {
            break;
        }
        i += k ? k : 1;
    }
    while (o > 0 && dst[o - 1] == ' ')
        o--;
    dst[o] = '\0';
    return o;
}
