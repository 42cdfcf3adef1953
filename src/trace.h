/* trace.h: gateway-trace.log, one line per routing event (CANDIDATE_POOL,
 * CANDIDATE_START, CANDIDATE_SKIP, REQUEST_FINAL; TOKEN_REFRESH from oauth.c) as space-separated
 * key=value fields after a timestamp and the event name. Lines are queued
 * and appended by a background thread so the loop never waits on disk.
 * Callers pass account names and reasons only: never a token or key. */
#ifndef SY_TRACE_H
#define SY_TRACE_H

typedef struct trace trace;

trace *trace_open(const char *path);      /* NULL on failure (logged) */
void trace_close(trace *t);               /* flushes what is queued */
/* fmt produces the fields; the timestamp and event name are prepended.
 * Called from one thread (the loop): the timestamp cache is not shared. */
void trace_event(trace *t, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Path of gateway-trace.log beside the database at db_path. */
void trace_path_for_db(const char *db_path, char *out, unsigned long n);

#endif
