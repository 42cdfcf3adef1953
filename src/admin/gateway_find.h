/* gateway_find.h: which gateway serves a database, and whether it answers
 * there: the run file its `serve` wrote beside the database
 * (store/store_runfile.h), checked with a GET /health of a short timeout.
 * For `switchyard status`, `codex attach|status` and `claude attach|status`
 * (blocking: command line only). */
#ifndef SY_GATEWAY_FIND_H
#define SY_GATEWAY_FIND_H
#include "base/sbuf.h"
#include "store/store_runfile.h"
#include <stddef.h>

#define GATEWAY_FIND_TIMEOUT_MS 1500L

typedef struct gateway_found {
    int recorded;            /* a run file names a gateway (rf filled) */
    int answering;           /* that gateway answered /health at rf.url, as the instance the file names */
    store_runfile rf;
    char why[300];           /* not answering: why, one phrase ("no run file beside ...", "pid 12 is gone") */
} gateway_found;

/* Looks for the gateway serving the database at db_path. Never fails: what
 * it could not find is in out->why. */
void gateway_find(const char *db_path, gateway_found *out);
/* GET url + "/health" (url without a trailing slash) within timeout_ms:
 * 0 when a switchyard gateway answers (HTTP 200, JSON with "status"), with
 * its instance (from /health's details; "" when not told) copied into
 * instance; -1 with why. */
int gateway_find_probe(const char *url, long timeout_ms, char *instance, size_t in, char *why, size_t whylen);
/* method ("GET" | "POST", with an empty JSON object) of url on a gateway,
 * with token as a bearer token (NULL: none), within timeout_ms: directly
 * (never through $http_proxy), http(s) only; the answer's body appended to
 * body (NULL: discarded). The HTTP status, or 0 when nothing answered (why
 * filled). Blocking: command line only. */
long gateway_find_call(const char *method, const char *url, const char *token, long timeout_ms, sbuf *body,
                       char *why, size_t whylen);
/* GET url + "/v1/models" with key as a bearer token, as Codex and Claude
 * Code ask: the HTTP status (401: the gateway does not take the key), or
 * 0 when nothing answered (why filled). */
long gateway_find_key_check(const char *url, const char *key, char *why, size_t whylen);
/* A gateway address as an operator writes it: "host:port", "[v6]:port" or
 * an http(s) URL (a path such as /v1 is dropped) into the gateway's base
 * URL without a trailing slash; -1 with err. */
int gateway_find_url(const char *in, char *out, size_t n, char *err, size_t errlen);
/* One line for the operator: "no gateway is answering for this database
 * (last seen at 2025-01-02 03:04:05 UTC on http://...; why)". */
void gateway_find_describe(const gateway_found *g, char *out, size_t n);

#endif
