/* store_runfile.h: the file beside the database that says which gateway
 * serves it (<db>-gateway.json): `serve` writes it once it listens and
 * marks it stopped at its exit; `status` and `codex attach|status` read it
 * to find the running gateway instead of guessing the default address.
 * A small JSON document, replaced atomically (base/safe_file.h), mode 0600. */
#ifndef SY_STORE_RUNFILE_H
#define SY_STORE_RUNFILE_H
#include <stddef.h>

#define STORE_RUNFILE_URL_MAX 300
#define STORE_RUNFILE_INSTANCE 24 /* 23 base62 characters and the NUL */

typedef struct store_runfile {
    long pid;
    char url[STORE_RUNFILE_URL_MAX];       /* the gateway listener, http://host:port (no trailing slash) */
    char admin_url[STORE_RUNFILE_URL_MAX]; /* the admin listener, "" when the admin surface is on url */
    char instance[STORE_RUNFILE_INSTANCE]; /* random per start; /health says it (http/health.h) */
    double started_at, stopped_at;         /* unix seconds; stopped_at 0: not stopped cleanly */
} store_runfile;

/* <db>-gateway.json into out; -1 when it does not fit. */
int store_runfile_path(const char *db, char *out, size_t n);
/* Writes r for the database db; -1 with err. */
int store_runfile_write(const char *db, const store_runfile *r, char *err, size_t errlen);
/* Reads the file of db into r: 1 read, 0 there is none, -1 unreadable or
 * not one of ours (err says why). */
int store_runfile_read(const char *db, store_runfile *r, char *err, size_t errlen);
/* Sets stopped_at (at the gateway's exit) when the file still names
 * instance: a second gateway started on the same database since keeps its
 * own. 0 done or nothing to do, -1 with err. */
int store_runfile_stopped(const char *db, const char *instance, double when, char *err, size_t errlen);

#endif
