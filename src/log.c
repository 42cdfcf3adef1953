/* log.c: leveled logging to stderr, and redaction of secret-looking text. */
#include "log.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

void log_msg(int level, const char *fmt, ...)
{
    if (level < log_threshold)
        return;
    char ts[32];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03ldZ %-5s %s\n", ts, now.tv_nsec / 1000000, level_names[level], line);
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
