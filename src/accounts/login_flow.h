/* login_flow.h: the ChatGPT sign-in, run by switchyard itself as Codex CLI
 * runs it (docs/accounts.md, "Logging in from the gateway"): PKCE (S256),
 * the authorize URL, the check of the loopback callback, the code exchange
 * at the token endpoint, and the device-code flow (a user code, then polls
 * until the sign-in is approved, denied or expired). The network calls are
 * blocking (libcurl easy) and bounded: they are the command line's, which
 * runs in its own process, never the loop's. The bodies they send and the
 * reading of the answers are pure functions here, which the gateway's own
 * device sign-in (accounts/signin.h, on the loop) shares. What a sign-in
 * yields is a login_entry, stored as an imported Codex login is. */
#ifndef SY_LOGIN_FLOW_H
#define SY_LOGIN_FLOW_H
#include <stddef.h>
#include <stdint.h>
#include "accounts/login_file.h"
#include "base/sbuf.h"

/* The loopback callback Codex registers with the authorization server (and
 * its fallback when the first port is taken). */
#define LOGIN_CALLBACK_PORT 1455
#define LOGIN_CALLBACK_PORT_FALLBACK 1457
#define LOGIN_CALLBACK_PATH "/auth/callback"
/* What the authorize URL asks for, as Codex does. */
#define LOGIN_SCOPE "openid profile email offline_access api.connectors.read api.connectors.invoke"
#define LOGIN_ORIGINATOR "codex_cli_rs"
/* The requests' content types: the exchange is a form, the device calls JSON. */
#define LOGIN_FORM_TYPE "application/x-www-form-urlencoded"
#define LOGIN_JSON_TYPE "application/json"
/* A device code without an expiry of its own lives this long (Codex's bound). */
#define LOGIN_DEVICE_MAX_S (15 * 60)

/* A PKCE pair: verifier = base64url(64 random bytes) (86 characters),
 * challenge = base64url(SHA-256(verifier)) (43). */
typedef struct login_pkce {
    char verifier[129];
    char challenge[44];
} login_pkce;

/* Draws a new verifier (getrandom) and derives its challenge; -1 if the
 * system has no randomness to give. */
int login_pkce_new(login_pkce *p);
/* The S256 challenge of a verifier (RFC 7636 4.2) into out (44 bytes). */
void login_pkce_challenge(const char *verifier, char out[44]);
/* A fresh state: base64url of 32 random bytes (43 characters + NUL); -1 on
 * no randomness. */
int login_state_new(char out[44]);

/* The authorize URL: authorize_url?response_type=code&client_id&redirect_uri
 * &scope&code_challenge&code_challenge_method=S256&id_token_add_organizations
 * =true&codex_cli_simplified_flow=true&state&originator, each value
 * percent-encoded. authorize_url may carry a query of its own (joined with &). */
void login_authorize_url(sbuf *out, const char *authorize_url, const char *client_id, const char *redirect_uri,
                         const char *challenge, const char *state);
/* http://localhost:PORT/auth/callback, the redirect_uri of the browser flow. */
void login_redirect_uri(char *out, size_t n, int port);

/* What a request to the loopback server is. */
typedef enum login_callback_kind {
    LOGIN_CB_CODE,       /* our state and a code: exchange it (code filled) */
    LOGIN_CB_DENIED,     /* our state and an error (error=access_denied, ...): the sign-in ends */
    LOGIN_CB_NO_CODE,    /* our state, neither code nor error: the sign-in ends */
    LOGIN_CB_NOT_FOUND,  /* another path: 404, the sign-in goes on */
    LOGIN_CB_BAD_METHOD, /* not a GET: 405, goes on */
    LOGIN_CB_FOREIGN,    /* a Host that is not ours, or an Origin header from another site: 403, goes on */
    LOGIN_CB_BAD_STATE,  /* a state that is not ours (or none): 400, goes on; the code is never used */
} login_callback_kind;

/* The request line of a request to the callback server. */
typedef enum login_line_rc {
    LOGIN_LINE_OK,        /* method and target filled, whole */
    LOGIN_LINE_BAD,       /* not METHOD SP TARGET SP HTTP/...: a 400 */
    LOGIN_LINE_TOO_LONG,  /* a target that does not fit target (tn bytes with its NUL): a 414 */
} login_line_rc;

/* Reads the request line at the start of head (a NUL-terminated request
 * head): METHOD SP TARGET SP HTTP/..., with a method of 1..mn-1 bytes. The
 * target is taken whole or refused: one cut short would be judged for what
 * it is not (an appended parameter dropped). On anything but LOGIN_LINE_OK
 * method and target are "" (when they have room). Pure, so fuzzed. */
login_line_rc login_request_line(const char *head, char *method, size_t mn, char *target, size_t tn);

/* Judges one request to the callback server: its method, request target
 * (path and query), Host and Origin headers (NULL when absent), the port
 * the server listens on, the state the sign-in sent and the origin of the
 * authorize URL (scheme://host[:port], the one other origin allowed). The
 * code goes into code (n bytes); why says in words what the request was
 * (never the code or state). Pure, so fuzzed. */
login_callback_kind login_callback_check(const char *method, const char *target, const char *host, const char *origin,
                                         int port, const char *state, const char *auth_origin, char *code, size_t n,
                                         char *why, size_t whyn);

/* scheme://host[:port] of url into out ("" when it has no such prefix). */
void login_url_origin(const char *url, char *out, size_t n);
/* The value of key in a query string ("a=1&b=2"), percent-decoded (and '+'
 * as a space) into out. -1 when absent, too long, or holding a control
 * character or malformed escape once decoded. */
int login_query_get(const char *query, const char *key, char *out, size_t n);

/* Exchanges an authorization code at the token endpoint (a form POST:
 * grant_type=authorization_code, code, redirect_uri, client_id,
 * code_verifier, as Codex sends it) and fills e (zeroed by the caller; free
 * with login_list_free of a list holding it) with the login: the three
 * tokens, the expiry, the account id, e-mail and plan from the id token.
 * timeout_ms bounds the whole exchange. -1 with err (no secrets). */
int login_exchange(const char *token_url, const char *client_id, const char *redirect_uri, const char *verifier,
                   const char *code, long timeout_ms, login_entry *e, char *err, size_t errlen);
/* The token endpoint's 200 answer to an exchange read into e (as above);
 * pure. -1 with err when a token is missing or unusable. */
int login_exchange_answer(const char *body, size_t len, int64_t now, login_entry *e, char *err, size_t errlen);
/* The exchange's form body (appended to out; it holds the code and the
 * verifier: wipe it after use). */
void login_exchange_body(sbuf *out, const char *client_id, const char *redirect_uri, const char *verifier,
                         const char *code);
/* The token endpoint's answer with its status: a refusal (not 200) in err
 * with the OAuth error code, else login_exchange_answer. Pure. */
int login_exchange_reply(int status, const char *body, size_t len, int64_t now, login_entry *e, char *err,
                         size_t errlen);

/* ---------- device code ---------- */

typedef struct login_device {
    char device_auth_id[256];
    char user_code[64];
    char verify_url[512];   /* where the user enters the code: <origin>/codex/device */
    char redirect_uri[512]; /* the exchange's: <origin>/deviceauth/callback */
    long interval_s;        /* between polls: 1..60 (5 when the answer gives none) */
    int64_t expires_at;     /* unix seconds: the answer's expiry, capped by LOGIN_DEVICE_MAX_S */
} login_device;

/* Asks the device-code endpoint (POST {"client_id"}) for a user code. The
 * verification page and the exchange's redirect_uri are on the endpoint's
 * origin, as Codex derives them from the issuer. -1 with err. */
int login_device_start(const char *code_url, const char *client_id, long timeout_ms, login_device *d, char *err,
                       size_t errlen);
/* Zeroes d and sets the verification page and the exchange's redirect_uri
 * from the device-code URL's origin; -1 with err when it has none. */
int login_device_prepare(const char *code_url, login_device *d, char *err, size_t errlen);
/* The device-code request's body {"client_id"}, appended to out. */
void login_device_start_body(sbuf *out, const char *client_id);
/* The device-code endpoint's answer with its status (404: device sign-in
 * not enabled there) into d, prepared first; pure. -1 with err. */
int login_device_start_reply(int status, const char *body, size_t len, int64_t now, login_device *d, char *err,
                             size_t errlen);
/* The device-code endpoint's 200 answer into d (device_auth_id, user_code
 * or usercode, interval as a number or a string, expires_in / expires_at
 * when given); pure. -1 with err. */
int login_device_answer(const char *body, size_t len, int64_t now, login_device *d, char *err, size_t errlen);

typedef enum login_poll_result {
    LOGIN_POLL_APPROVED, /* code and verifier filled */
    LOGIN_POLL_PENDING,  /* ask again after the interval (slow_down adds 5 s to d->interval_s) */
    LOGIN_POLL_DENIED,
    LOGIN_POLL_EXPIRED,
    LOGIN_POLL_FAILED,   /* anything else: err says what */
} login_poll_result;

/* One poll of the device token endpoint (POST {"device_auth_id",
 * "user_code"}). Approved: the answer's authorization_code and
 * code_verifier (checked against its code_challenge). Pending: 403 or 404
 * (what Codex takes as pending) or authorization_pending / slow_down. */
login_poll_result login_device_poll(const char *poll_url, login_device *d, long timeout_ms, char *code, size_t coden,
                                    char *verifier, size_t vn, char *err, size_t errlen);
/* A poll's body {"device_auth_id","user_code"}, appended to out. */
void login_device_poll_body(sbuf *out, const login_device *d);
/* The same for an answer already in hand (status and body); pure. */
login_poll_result login_device_poll_answer(int status, const char *body, size_t len, login_device *d, char *code,
                                           size_t coden, char *verifier, size_t vn, char *err, size_t errlen);

#endif
