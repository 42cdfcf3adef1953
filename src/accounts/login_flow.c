/* login_flow.c: the ChatGPT sign-in's pieces (see login_flow.h): PKCE and
 * state, the authorize URL, judging a loopback callback, the code exchange
 * and the device-code calls. The request bodies and the reading of the
 * answers are pure and shared with the gateway's own device sign-in
 * (accounts/signin.c, on the loop); the blocking libcurl easy calls here,
 * each bounded by its timeout, are the command line's only. */
#include "accounts/login_flow.h"
#include "accounts/oauth.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/text.h"
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define LOGIN_BODY_MAX (64u << 10)

/* ---------- PKCE and state ---------- */

static void login_b64url(char *out, size_t n, const unsigned char *p, size_t len)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        size_t k = i + 2 < len ? 4 : i + 1 < len ? 3 : 2;
        if (o + k >= n)
            break; /* never for the callers' sizes */
        const char c[4] = {al[(v >> 18) & 63], al[(v >> 12) & 63], al[(v >> 6) & 63], al[v & 63]};
        memcpy(out + o, c, k);
        o += k;
    }
    out[o] = '\0';
}

static int login_random(unsigned char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

void login_pkce_challenge(const char *verifier, char out[44])
{
    uint8_t d[32];
    sha256(verifier, strlen(verifier), d);
    login_b64url(out, 44, d, sizeof d);
}

int login_pkce_new(login_pkce *p)
{
    unsigned char b[64];
    if (login_random(b, sizeof b) != 0)
        return -1;
    login_b64url(p->verifier, sizeof p->verifier, b, sizeof b);
    login_pkce_challenge(p->verifier, p->challenge);
    memset(b, 0, sizeof b);
    return 0;
}

int login_state_new(char out[44])
{
    unsigned char b[32];
    if (login_random(b, sizeof b) != 0)
        return -1;
    login_b64url(out, 44, b, sizeof b);
    return 0;
}

/* ---------- URLs ---------- */

static void login_pct(sbuf *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~')
            sbuf_append(out, s, 1);
        else
            sbuf_printf(out, "%%%02X", c);
    }
}

void login_authorize_url(sbuf *out, const char *authorize_url, const char *client_id, const char *redirect_uri,
                         const char *challenge, const char *state)
{
    const struct {
        const char *k, *v;
    } q[] = {{"response_type", "code"},
             {"client_id", client_id},
             {"redirect_uri", redirect_uri},
             {"scope", LOGIN_SCOPE},
             {"code_challenge", challenge},
             {"code_challenge_method", "S256"},
             {"id_token_add_organizations", "true"},
             {"codex_cli_simplified_flow", "true"},
             {"state", state},
             {"originator", LOGIN_ORIGINATOR}};
    sbuf_puts(out, authorize_url);
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        sbuf_puts(out, i == 0 && !strchr(authorize_url, '?') ? "?" : "&");
        sbuf_puts(out, q[i].k);
        sbuf_puts(out, "=");
        login_pct(out, q[i].v);
    }
}

void login_redirect_uri(char *out, size_t n, int port)
{
    snprintf(out, n, "http://localhost:%d%s", port, LOGIN_CALLBACK_PATH);
}

void login_url_origin(const char *url, char *out, size_t n)
{
    out[0] = '\0';
    const char *sep = url ? strstr(url, "://") : NULL;
    if (!sep || sep == url)
        return;
    size_t len = (size_t)(sep + 3 - url) + strcspn(sep + 3, "/?#");
    if (len + 1 <= n) {
        memcpy(out, url, len);
        out[len] = '\0';
    }
}

int login_query_get(const char *query, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    for (const char *p = query; p && *p;) {
        size_t len = strcspn(p, "&");
        if (len > klen && p[klen] == '=' && strncmp(p, key, klen) == 0) {
            size_t o = 0;
            for (size_t i = klen + 1; i < len; i++) {
                int c = (unsigned char)p[i];
                if (c == '%') {
                    int hi = i + 2 < len ? sbuf_hex_digit(p[i + 1]) : -1;
                    int lo = hi >= 0 ? sbuf_hex_digit(p[i + 2]) : -1;
                    if (lo < 0)
                        return -1;
                    c = hi * 16 + lo;
                    i += 2;
                } else if (c == '+') {
                    c = ' ';
                }
                if (c < 0x20 || c == 0x7f || o + 1 >= n)
                    return -1;
                out[o++] = (char)c;
            }
            out[o] = '\0';
            return text_check(out, o) ? -1 : 0;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return -1;
}

/* ---------- the callback ---------- */

/* How many times key appears in a query string (its name as sent). */
static int login_query_count(const char *query, const char *key)
{
    size_t klen = strlen(key);
    int n = 0;
    for (const char *p = query; p && *p;) {
        size_t len = strcspn(p, "&");
        if (len >= klen && strncmp(p, key, klen) == 0 && (len == klen || p[klen] == '='))
            n++;
        p += len;
        if (*p == '&')
            p++;
    }
    return n;
}

/* Constant time: the state is a secret of the sign-in. */
static int login_same(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

login_line_rc login_request_line(const char *head, char *method, size_t mn, char *target, size_t tn)
{
    if (mn)
        method[0] = '\0';
    if (tn)
        target[0] = '\0';
    size_t ml = strcspn(head, " \r\n");
    if (head[ml] != ' ' || !ml || ml >= mn)
        return LOGIN_LINE_BAD;
    const char *t = head + ml + 1;
    size_t tl = strcspn(t, " \r\n");
    if (!tl || t[tl] != ' ' || strncmp(t + tl + 1, "HTTP/", 5) != 0)
        return LOGIN_LINE_BAD;
    if (tl >= tn)
        return LOGIN_LINE_TOO_LONG;
    memcpy(method, head, ml);
    method[ml] = '\0';
    memcpy(target, t, tl);
    target[tl] = '\0';
    return LOGIN_LINE_OK;
}

login_callback_kind login_callback_check(const char *method, const char *target, const char *host, const char *origin,
                                         int port, const char *state, const char *auth_origin, char *code, size_t n,
                                         char *why, size_t whyn)
{
    code[0] = '\0';
    size_t plen = strcspn(target, "?#");
    const char *query = target[plen] == '?' ? target + plen + 1 : "";
    char h1[64], h2[64];
    snprintf(h1, sizeof h1, "127.0.0.1:%d", port);
    snprintf(h2, sizeof h2, "localhost:%d", port);
    if (plen != strlen(LOGIN_CALLBACK_PATH) || strncmp(target, LOGIN_CALLBACK_PATH, plen) != 0) {
        sbuf_fmt_into(why, whyn, "%s", "a request for another path");
        return LOGIN_CB_NOT_FOUND;
    }
    if (strcmp(method, "GET") != 0) {
        sbuf_fmt_into(why, whyn, "%s", "a callback that is not a GET");
        return LOGIN_CB_BAD_METHOD;
    }
    /* a page elsewhere (DNS rebinding: a name of its own resolving to us,
     * or a script sending the browser here) is not the authorization
     * server's redirect, which is a plain navigation to our own name */
    if (!host || (strcasecmp(host, h1) != 0 && strcasecmp(host, h2) != 0)) {
        sbuf_fmt_into(why, whyn, "%s", "a callback for another host (Host header)");
        return LOGIN_CB_FOREIGN;
    }
    if (origin && *origin && (!auth_origin || !*auth_origin || strcasecmp(origin, auth_origin) != 0)) {
        sbuf_fmt_into(why, whyn, "%s", "a callback sent from another site (Origin header)");
        return LOGIN_CB_FOREIGN;
    }
    /* a parameter given twice (RFC 6749 4.1.2: never by the authorization
     * server) could be read as either: the callback is no answer of its */
    static const char *const once[] = {"state", "code", "error", "error_description"};
    for (size_t i = 0; i < sizeof once / sizeof *once; i++)
        if (login_query_count(query, once[i]) > 1) {
            sbuf_fmt_into(why, whyn, "a callback repeating its %s parameter", once[i]);
            return LOGIN_CB_BAD_STATE;
        }
    char got[256];
    if (login_query_get(query, "state", got, sizeof got) != 0 || !login_same(got, state)) {
        sbuf_fmt_into(why, whyn, "%s", "a callback whose state is not this sign-in's");
        return LOGIN_CB_BAD_STATE;
    }
    char err[128], desc[256];
    if (login_query_get(query, "error", err, sizeof err) == 0 && err[0]) {
        if (login_query_get(query, "error_description", desc, sizeof desc) != 0)
            desc[0] = '\0';
        sbuf_fmt_into(why, whyn, "%s%s%s", err, desc[0] ? ": " : "", desc);
        return LOGIN_CB_DENIED;
    }
    if (login_query_get(query, "code", code, n) != 0 || !code[0]) {
        code[0] = '\0';
        sbuf_fmt_into(why, whyn, "%s", "a callback without an authorization code");
        return LOGIN_CB_NO_CODE;
    }
    sbuf_fmt_into(why, whyn, "%s", "the authorization code");
    return LOGIN_CB_CODE;
}

/* ---------- HTTP ---------- */

static size_t login_write(char *p, size_t size, size_t nmemb, void *ud)
{
    sbuf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > LOGIN_BODY_MAX)
        return 0; /* an answer this large is none of ours: the transfer fails */
    sbuf_append(b, p, n);
    return n;
}

/* POSTs body to url; the status into *status and the answer into resp.
 * -1 with err when no answer came. */
static int login_post(const char *url, const char *ctype, const char *body, long timeout_ms, int *status, sbuf *resp,
                      char *err, size_t errlen)
{
    CURL *c = curl_easy_init();
    if (!c) {
        sbuf_fmt_into(err, errlen, "%s", "could not start an HTTP request");
        return -1;
    }
    char hdr[96];
    snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype);
    struct curl_slist *h = curl_slist_append(NULL, hdr);
    h = curl_slist_append(h, "Accept: application/json");
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, login_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "switchyard-login");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        sbuf_fmt_into(err, errlen, "%s", ebuf[0] ? ebuf : curl_easy_strerror(rc));
        return -1;
    }
    *status = (int)code;
    return 0;
}

/* The error code of an OAuth answer: {"error":"x"} or {"error":{"code":"x"}},
 * kept to identifier characters (it is printed). */
static void login_error_code(const char *body, size_t len, char *out, size_t n)
{
    out[0] = '\0';
    json_value *doc = len ? json_parse(body, len, NULL, 0) : NULL;
    json_value *e = doc ? json_get(doc, "error") : NULL;
    const char *code = e && e->type == JSON_STRING ? e->str : e ? json_get_str(e, "code") : NULL;
    if (!code && doc)
        code = json_get_str(doc, "code");
    size_t o = 0;
    for (; code && code[o] && o + 1 < n && o < 63; o++) {
        char c = code[o];
        out[o] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ? c : '_';
    }
    out[o] = '\0';
    json_free(doc);
}

/* ---------- the exchange ---------- */

int login_exchange_answer(const char *body, size_t len, int64_t now, login_entry *e, char *err, size_t errlen)
{
    account f;
    memset(&f, 0, sizeof f);
    char note[160];
    if (oauth_answer_parse(body, len, now, &f, note, sizeof note) != 0) {
        sbuf_fmt_into(err, errlen, "%s", "the token endpoint answered without a usable access_token");
        return -1;
    }
    if (!f.refresh_token || !f.id_token) {
        sbuf_fmt_into(err, errlen, "the token endpoint's answer has no %s (the login could not be kept alive)",
                      f.refresh_token ? "id_token" : "refresh_token");
        store_account_clear(&f);
        return -1;
    }
    e->kind = ACCOUNT_CHATGPT;
    e->max_concurrency = -1;
    e->access_token = f.token, f.token = NULL;
    e->refresh_token = f.refresh_token, f.refresh_token = NULL;
    e->id_token = f.id_token, f.id_token = NULL;
    e->account_id = f.chatgpt_account_id, f.chatgpt_account_id = NULL;
    e->email = f.email, f.email = NULL;
    e->plan_type = f.plan_type, f.plan_type = NULL;
    e->expires_at = f.token_expires_at;
    e->last_refresh_at = f.last_refresh_at;
    store_account_clear(&f);
    return 0;
}

void login_exchange_body(sbuf *out, const char *client_id, const char *redirect_uri, const char *verifier,
                         const char *code)
{
    sbuf_puts(out, "grant_type=authorization_code&code=");
    login_pct(out, code);
    sbuf_puts(out, "&redirect_uri=");
    login_pct(out, redirect_uri);
    sbuf_puts(out, "&client_id=");
    login_pct(out, client_id);
    sbuf_puts(out, "&code_verifier=");
    login_pct(out, verifier);
}

int login_exchange_reply(int status, const char *body, size_t len, int64_t now, login_entry *e, char *err,
                         size_t errlen)
{
    if (status != 200) {
        char c[64];
        login_error_code(body, len, c, sizeof c);
        sbuf_fmt_into(err, errlen, "the token endpoint refused the code: HTTP %d%s%s", status, c[0] ? " " : "", c);
        return -1;
    }
    return login_exchange_answer(body, len, now, e, err, errlen);
}

int login_exchange(const char *token_url, const char *client_id, const char *redirect_uri, const char *verifier,
                   const char *code, long timeout_ms, login_entry *e, char *err, size_t errlen)
{
    sbuf req = SBUF_INIT, resp = SBUF_INIT;
    login_exchange_body(&req, client_id, redirect_uri, verifier, code);
    int status = 0, rc = -1;
    char why[256];
    if (login_post(token_url, LOGIN_FORM_TYPE, req.p, timeout_ms, &status, &resp, why, sizeof why) != 0)
        sbuf_fmt_into(err, errlen, "the token endpoint could not be reached: %s", why);
    else
        rc = login_exchange_reply(status, resp.p, resp.len, (int64_t)time(NULL), e, err, errlen);
    sbuf_secret_wipe(&req);
    sbuf_secret_wipe(&resp);
    return rc;
}

/* ---------- device code ---------- */

int login_device_answer(const char *body, size_t len, int64_t now, login_device *d, char *err, size_t errlen)
{
    json_value *doc = len ? json_parse(body, len, NULL, 0) : NULL;
    const char *id = doc ? json_get_str(doc, "device_auth_id") : NULL;
    const char *uc = doc ? json_get_str(doc, "user_code") : NULL;
    if (!uc && doc)
        uc = json_get_str(doc, "usercode");
    /* both are sent back and the code is shown on the terminal: plain text, bounded */
    if (!id || !*id || strlen(id) >= sizeof d->device_auth_id || text_check_str(id) || !uc || !*uc ||
        strlen(uc) >= sizeof d->user_code || text_check_str(uc)) {
        sbuf_fmt_into(err, errlen, "%s", "the device-code endpoint answered without a usable device_auth_id and user_code");
        json_free(doc);
        return -1;
    }
    sbuf_copy_cstr(d->device_auth_id, sizeof d->device_auth_id, id);
    sbuf_copy_cstr(d->user_code, sizeof d->user_code, uc);
    int64_t v = 0;
    json_value *iv = json_get(doc, "interval");
    if (iv && iv->type == JSON_STRING) { /* Codex's server sends it as a string */
        char *end = NULL;
        long x = strtol(iv->str, &end, 10);
        v = end != iv->str && *end == '\0' ? x : 0;
    } else {
        json_get_int64(doc, "interval", 0, 3600, &v);
    }
    d->interval_s = v <= 0 ? 5 : v > 60 ? 60 : (long)v;
    int64_t exp = 0, in = 0;
    if (json_get_int64(doc, "expires_in", 1, LOGIN_DEVICE_MAX_S * 4, &in) == 0 && in > 0)
        exp = now + in;
    else if (json_get_int64(doc, "expires_at", 1, INT64_MAX / 2, &exp) != 0)
        exp = 0;
    d->expires_at = exp > now && exp < now + LOGIN_DEVICE_MAX_S ? exp : now + LOGIN_DEVICE_MAX_S;
    json_free(doc);
    return 0;
}

int login_device_prepare(const char *code_url, login_device *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    char origin[400];
    login_url_origin(code_url, origin, sizeof origin);
    if (!origin[0]) {
        sbuf_fmt_into(err, errlen, "%s", "the device-code URL is not an http(s) URL");
        return -1;
    }
    snprintf(d->verify_url, sizeof d->verify_url, "%s/codex/device", origin);
    snprintf(d->redirect_uri, sizeof d->redirect_uri, "%s/deviceauth/callback", origin);
    return 0;
}

void login_device_start_body(sbuf *out, const char *client_id)
{
    sbuf_puts(out, "{\"client_id\":");
    sbuf_json_str(out, client_id, strlen(client_id));
    sbuf_puts(out, "}");
}

int login_device_start_reply(int status, const char *body, size_t len, int64_t now, login_device *d, char *err,
                             size_t errlen)
{
    if (status == 404) {
        sbuf_fmt_into(err, errlen, "%s", "device-code sign-in is not enabled on this server (HTTP 404); "
                                         "use the browser sign-in");
        return -1;
    }
    if (status != 200) {
        sbuf_fmt_into(err, errlen, "the device-code endpoint answered HTTP %d", status);
        return -1;
    }
    return login_device_answer(body, len, now, d, err, errlen);
}

int login_device_start(const char *code_url, const char *client_id, long timeout_ms, login_device *d, char *err,
                       size_t errlen)
{
    if (login_device_prepare(code_url, d, err, errlen) != 0)
        return -1;
    sbuf req = SBUF_INIT, resp = SBUF_INIT;
    login_device_start_body(&req, client_id);
    int status = 0, rc = -1;
    char why[256];
    if (login_post(code_url, LOGIN_JSON_TYPE, req.p, timeout_ms, &status, &resp, why, sizeof why) != 0)
        sbuf_fmt_into(err, errlen, "the device-code endpoint could not be reached: %s", why);
    else
        rc = login_device_start_reply(status, resp.p, resp.len, (int64_t)time(NULL), d, err, errlen);
    sbuf_free(&req);
    sbuf_free(&resp);
    return rc;
}

login_poll_result login_device_poll_answer(int status, const char *body, size_t len, login_device *d, char *code,
                                           size_t coden, char *verifier, size_t vn, char *err, size_t errlen)
{
    if (status == 403 || status == 404)
        return LOGIN_POLL_PENDING; /* Codex's reading of the server: not approved yet */
    char c[64];
    if (status != 200) {
        login_error_code(body, len, c, sizeof c);
        if (!strcmp(c, "authorization_pending"))
            return LOGIN_POLL_PENDING;
        if (!strcmp(c, "slow_down")) {
            d->interval_s = d->interval_s + 5 > 60 ? 60 : d->interval_s + 5;
            return LOGIN_POLL_PENDING;
        }
        sbuf_fmt_into(err, errlen, "HTTP %d%s%s", status, c[0] ? " " : "", c);
        if (!strcmp(c, "access_denied"))
            return LOGIN_POLL_DENIED;
        if (!strcmp(c, "expired_token") || status == 410)
            return LOGIN_POLL_EXPIRED;
        return LOGIN_POLL_FAILED;
    }
    json_value *doc = len ? json_parse(body, len, NULL, 0) : NULL;
    const char *ac = doc ? json_get_str(doc, "authorization_code") : NULL;
    const char *ch = doc ? json_get_str(doc, "code_challenge") : NULL;
    const char *cv = doc ? json_get_str(doc, "code_verifier") : NULL;
    login_poll_result r = LOGIN_POLL_FAILED;
    char want[44];
    if (!ac || !*ac || !cv || !*cv || strlen(ac) >= coden || strlen(cv) >= vn) {
        sbuf_fmt_into(err, errlen, "%s", "the approval carries no usable authorization_code and code_verifier");
    } else if (login_pkce_challenge(cv, want), ch && strcmp(ch, want) != 0) {
        sbuf_fmt_into(err, errlen, "%s", "the approval's code_verifier does not match its code_challenge");
    } else {
        sbuf_copy_cstr(code, coden, ac);
        sbuf_copy_cstr(verifier, vn, cv);
        r = LOGIN_POLL_APPROVED;
    }
    json_free(doc);
    return r;
}

void login_device_poll_body(sbuf *out, const login_device *d)
{
    sbuf_puts(out, "{\"device_auth_id\":");
    sbuf_json_str(out, d->device_auth_id, strlen(d->device_auth_id));
    sbuf_puts(out, ",\"user_code\":");
    sbuf_json_str(out, d->user_code, strlen(d->user_code));
    sbuf_puts(out, "}");
}

login_poll_result login_device_poll(const char *poll_url, login_device *d, long timeout_ms, char *code, size_t coden,
                                    char *verifier, size_t vn, char *err, size_t errlen)
{
    sbuf req = SBUF_INIT, resp = SBUF_INIT;
    login_device_poll_body(&req, d);
    int status = 0;
    char why[256];
    login_poll_result r;
    if (login_post(poll_url, LOGIN_JSON_TYPE, req.p, timeout_ms, &status, &resp, why, sizeof why) != 0) {
        sbuf_fmt_into(err, errlen, "the device token endpoint could not be reached: %s", why);
        r = LOGIN_POLL_FAILED;
    } else {
        r = login_device_poll_answer(status, resp.p, resp.len, d, code, coden, verifier, vn, err, errlen);
    }
    sbuf_free(&req);
    sbuf_secret_wipe(&resp);
    return r;
}
