/* trace.h: gateway-trace.log, one line per routing event (CANDIDATE_POOL,
 * CANDIDATE_START, CANDIDATE_SKIP, REQUEST_FINAL; TOKEN_REFRESH from oauth.c) as space-separated
 * key=value fields after a timestamp and the event name. Lines are queued
 * and appended by a background thread so the loop never waits on disk.
 * Callers pass account names and reasons only: never a token or key.
 * String arguments are written escaped (text_escape: control characters,
 * invalid UTF-8 and '"' as \xNN), so one line is one event whatever the
 * values hold. */
#ifndef SY_TRACE_H
#define SY_TRACE_H

typedef struct trace trace;

trace *trace_open(const char *path);      /* NULL on failure (logged) */
void trace_close(trace *t);               /* flushes what is queued */
/* Rotation: once the file would grow past max_bytes (0: never) it becomes
 * path.1 (path.1 becomes path.2, ..., the one past `files` is replaced) and
 * a new file is started; done by the trace thread between two writes. A
 * trace of 7 MB a minute under load otherwise filled the disk. */
void trace_rotation(trace *t, long long max_bytes, int files);
/* Bytes of trace on disk (the live file and the rotated ones kept) as of
 * the trace thread's last write; -1 without a trace. */
long long trace_bytes(trace *t);
/* What a trace_event call site keeps between calls: its format, parsed on
 * the first call. trace_event gives each call site its own. */
typedef struct trace_site {
    int state;       /* 0: not parsed yet; 1: arguments packed (conv); -1: formatted by the caller */
    unsigned char n; /* conversions that take an argument */
    char conv[16];   /* their letters: 's' 'd' 'u' (%llu) 'z' (%zu) 'f' (%.Nf) */
} trace_site;

void trace_event_at(trace *t, trace_site *site, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* trace_event(t, event, fmt, ...): fmt produces the fields; the timestamp
 * and event name are prepended. The event and the format must be string
 * literals (the line keeps them by pointer until it is written; anything
 * else does not compile). Called from one thread (the loop): the call
 * site's cache and the timestamp cache are not shared. */
#define trace_event(t, event, ...)                                                                        \
    do {                                                                                                  \
        static trace_site trace_site_;                                                                    \
        trace_event_at((t), &trace_site_, "" event, "" __VA_ARGS__);                                      \
    } while (0)
/* Path of gateway-trace.log beside the database at db_path. */
void trace_path_for_db(const char *db_path, char *out, unsigned long n);

#endif
