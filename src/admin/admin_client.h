/* admin_client.h: the operator's commands as clients of the running
 * gateway's admin API (`status`, `alerts`): which gateway serves a
 * database (gateway_find.h, or --url), the admin token
 * ($SWITCHYARD_ADMIN_TOKEN, else the 0600 file <db>.admin-token beside the
 * database) and one blocking call with it. Command line only. */
#ifndef SY_ADMIN_CLIENT_H
#define SY_ADMIN_CLIENT_H
#include "admin/gateway_find.h"
#include "base/sbuf.h"
#include "store/store.h"

#define ADMIN_TOKEN_CHARS 43 /* after "sya-" */

typedef struct admin_client {
    char base[STORE_RUNFILE_URL_MAX]; /* the admin API's base URL, no trailing slash */
    char token[4 + ADMIN_TOKEN_CHARS + 1]; /* "" none */
    int from_file;                    /* the token came from <db>.admin-token */
    gateway_found found;              /* the gateway the database's run file names */
} admin_client;

/* <db>.admin-token into out. */
void admin_client_token_path(const char *db, char *out, size_t n);
/* The token in <db>.admin-token, if it is the one the database s holds
 * (s NULL: not checked; the gateway will say): 1 and tok filled, else 0. */
int admin_client_token_read(const char *db, store *s, char *tok, size_t n);

/* Finds the gateway for db (url, when given, wins) and the token. Never
 * fails: c->found says whether a gateway answers, c->token whether there
 * is a token. admin_client_close(c) afterwards (wipes the token). */
void admin_client_locate(const char *db, const char *url, admin_client *c);
void admin_client_close(admin_client *c);

/* method ("GET" | "POST") path (e.g. "/admin/api/alerts") with the token,
 * within timeout_ms: 0 and the body on HTTP 200, else -1 with why (the
 * gateway's error message when it sent one). */
int admin_client_call(const admin_client *c, const char *method, const char *path, long timeout_ms, sbuf *body,
                      char *why, size_t whylen);

#endif
