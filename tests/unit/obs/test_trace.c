/* test_trace.c: the trace thread writes each line as vsnprintf would have
 * formatted it on the caller's side (the loop only packs the arguments). */
#include "check.h"
#include "obs/trace.h"
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];
static char expect[1 << 16];
static size_t expect_len;

/* Traces one line and notes the fields it must have. */
static void __attribute__((format(printf, 3, 4))) both(trace *t, const char *event, const char *fmt, ...)
{
    char fields[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof fields, fmt, ap);
    va_end(ap);
    /* the line is cut at 4094 bytes; the timestamp is 25 */
    size_t elen = strnlen(event, 64), head = 25 + elen + 1, n = strlen(fields);
    if (head + n > 4094)
        n = 4094 - head;
    expect_len += (size_t)snprintf(expect + expect_len, sizeof expect - expect_len, "%.*s %.*s\n", (int)elen, event,
                                   (int)n, fields);
}

static char *slurp(size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void test_packed_lines_read_as_printf_wrote_them(void)
{
    snprintf(path, sizeof path, "/tmp/test_trace.%d.log", (int)getpid());
    unlink(path);
    trace *t = trace_open(path);
    CHECK(t != NULL);
    char longs[5000];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    const char *volatile null = NULL; /* glibc prints (null); the trace must too */
#define BOTH(ev, ...) do { both(t, ev, __VA_ARGS__); trace_event(t, ev, __VA_ARGS__); } while (0)
    BOTH("REQUEST_FINAL", "req=%llu account=%s status=%d attempts=%d latency_ms=%.1f class=%s%s",
         12345ULL, "acct-a", 200, 1, 3.25, "-", "");
    BOTH("CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\" cooldown_s=%.0f", ULLONG_MAX, "b", "cooling down", 44.5);
    BOTH("X", "neg=%d min=%d big=%zu pct=%% f=%.1f f0=%.0f tiny=%.1f", -7, INT_MIN, (size_t)SIZE_MAX, -0.05, 1e20,
         0.25);
    BOTH("NULLS", "s=%s", null);
    BOTH("LONG", "a=%s b=%s", longs, "tail");
    BOTH("LONGER", "a=%s b=%s c=%s", longs, longs, "tail"); /* more than a record holds: formatted here */
    BOTH("TIES", "a=%.1f b=%.1f c=%.2f d=%.0f e=%.3f", 0.15, 12.35, 2.675, 2.5, -1234.5675);
    BOTH("HEX", "not packed: %x %5d", 255u, 42); /* formatted on the caller's side */
    BOTH("AN_EVENT_NAME_LONGER_THAN_SIXTY_FOUR_CHARACTERS_IS_CUT_THERE_XXXXXXXXXXXXXXXX", "k=%s", "v");
#undef BOTH
    trace_close(t);
    size_t len;
    char *got = slurp(&len);
    /* drop the 25-byte timestamps */
    char stripped[1 << 16];
    size_t sl = 0;
    for (char *line = got; *line;) {
        char *nl = strchr(line, '\n');
        CHECK(nl != NULL);
        if (!nl)
            break;
        CHECK(nl - line >= 25 && line[4] == '-' && line[10] == 'T' && line[23] == 'Z' && line[24] == ' ');
        memcpy(stripped + sl, line + 25, (size_t)(nl + 1 - line - 25));
        sl += (size_t)(nl + 1 - line - 25);
        line = nl + 1;
    }
    stripped[sl] = '\0';
    /* the expected lines were cut as if their timestamp were there */
    CHECK_EQ_INT(sl, expect_len);
    CHECK_EQ_STR(stripped, expect);
    unlink(path);
}

/* Waits up to 5 s for the file to hold n lines; returns the count seen. */
static int wait_lines(int n)
{
    int seen = 0;
    for (int i = 0; i < 500 && seen < n; i++) {
        size_t len;
        char *text = slurp(&len);
        seen = 0;
        for (size_t k = 0; k < len; k++)
            seen += text[k] == '\n';
        if (seen < n)
            usleep(10000);
    }
    return seen;
}

/* The thread sleeps when nothing is queued and must wake for the next line:
 * each line reaches the file while the trace stays open. */
static void test_lines_reach_the_file_while_open_after_idle_spells(void)
{
    snprintf(path, sizeof path, "/tmp/test_trace.%d.log", (int)getpid());
    unlink(path);
    trace *t = trace_open(path);
    CHECK(t != NULL);
    for (int i = 1; i <= 3; i++) {
        trace_event(t, "E", "n=%d", i);
        CHECK_EQ_INT(wait_lines(i), i);
        usleep(60000); /* past two gathering windows: the thread goes idle */
    }
    for (int i = 0; i < 1000; i++) /* and a burst, as a busy gateway makes */
        trace_event(t, "B", "n=%d", i);
    CHECK_EQ_INT(wait_lines(1003), 1003);
    trace_close(t);
    unlink(path);
}

int main(void)
{
    RUN(test_packed_lines_read_as_printf_wrote_them);
    RUN(test_lines_reach_the_file_while_open_after_idle_spells);
    return check_summary();
}
