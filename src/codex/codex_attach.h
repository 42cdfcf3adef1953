/* codex_attach.h: pointing the Codex CLI at the gateway and handing its
 * config.toml back safely (`switchyard codex attach | detach | status`,
 * `serve --codex-attach`). Journal first (store_codex.h), atomic writes,
 * a three-way restore per key, recovery of an attach or detach that was
 * killed half-way. See docs/codex.md. Human-readable results are appended
 * to report; errors go to err. CLI / start-up path only: it does disk I/O. */
#ifndef SY_CODEX_ATTACH_H
#define SY_CODEX_ATTACH_H
#include "base/sbuf.h"
#include "store/store.h"
#include <stddef.h>

typedef enum { CODEX_DIRECT = 0, CODEX_ATTACHED = 1, CODEX_DRIFTED = 2 } codex_state;

/* The Codex home: opt, else $CODEX_HOME, else $HOME/.codex, made absolute
 * (and created with mode 0700 when create is set and it is missing). */
int codex_home_resolve(const char *opt, int create, char *out, size_t n, char *err, size_t errlen);
/* The gateway's base URL from a listen address ("0.0.0.0" -> 127.0.0.1). */
void codex_gateway_url(const char *host, int port, char *out, size_t n);

/* Each call below first finishes or rolls back what a crash left of an
 * attach or detach of home (report says which), and holds a lock beside
 * the database for its whole length, so two never overlap. */

/* That recovery for every home with an unfinished journal (serve start). */
int codex_recover_all(store *s, sbuf *report);
/* gateway is the gateway's URL (http://host:port); base_url gets "/v1". */
int codex_attach(store *s, const char *home, const char *gateway, sbuf *report, char *err, size_t errlen);
/* codex_attach with the provider's supports_websockets set to websockets
 * (codex_attach: false): Codex then talks to the gateway's Responses
 * WebSocket (http/ws.h) first, HTTP after it. */
int codex_attach_ws(store *s, const char *home, const char *gateway, int websockets, sbuf *report, char *err,
                    size_t errlen);
/* force restores the original even over a file the journal does not
 * recognise (the current file is kept as a backup first). 0 ok (also when
 * not attached), -1 error or refused. */
int codex_detach(store *s, const char *home, int force, sbuf *report, char *err, size_t errlen);
/* The state of home, with the details in report; -1 on error. */
int codex_status(store *s, const char *home, sbuf *report, char *err, size_t errlen);
/* What `codex status` learns of the gateway attach wrote: ok set when it
 * answers, is the gateway serving this database and takes the key;
 * otherwise head says what is wrong ("no gateway answers at URL", ...).
 * detail is one more line for the report ("" none). */
typedef struct codex_check {
    int ok;
    char head[512], detail[768];
} codex_check;
/* Checks the gateway at base_url (what attach wrote, ".../v1") with key,
 * the platform key attach wrote ("" when the file no longer holds it).
 * The caller's: this wing does no network I/O. */
typedef void (*codex_answers_fn)(const char *base_url, const char *key, void *ud, codex_check *out);
/* codex_status, and an attached home is checked with answers: reported as
 * "attached, verified: ..." or "attached, but <head>: ..." (still
 * CODEX_ATTACHED: the file is as attach wrote it). */
int codex_status_check(store *s, const char *home, codex_answers_fn answers, void *ud, sbuf *report, char *err,
                       size_t errlen);

#endif
