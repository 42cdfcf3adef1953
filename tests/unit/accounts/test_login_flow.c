/* test_login_flow.c: the sign-in's pure pieces (login_flow.c): PKCE, the
 * authorize URL, judging a loopback callback, the exchange's answer and
 * the device-code answers. */
#include "check.h"
#include "accounts/login_flow.h"
#include <string.h>

#define PORT 1455
#define STATE "st4te-of-this-sign-in_0123456789abcdefghijk"
#define AUTH_ORIGIN "https://auth.openai.com"

/* RFC 7636 appendix B: the verifier and its S256 challenge. */
static void test_pkce_challenge_matches_rfc7636_appendix_b(void)
{
    char ch[44];
    login_pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", ch);
    CHECK_EQ_STR(ch, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
}

static void test_new_pkce_pairs_are_random_base64url_of_the_right_length(void)
{
    login_pkce a, b;
    CHECK_EQ_INT(login_pkce_new(&a), 0);
    CHECK_EQ_INT(login_pkce_new(&b), 0);
    CHECK_EQ_INT(strlen(a.verifier), 86); /* 64 bytes */
    CHECK_EQ_INT(strlen(a.challenge), 43);
    CHECK(strcmp(a.verifier, b.verifier) != 0);
    CHECK_EQ_INT(strspn(a.verifier, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), 86);
    char ch[44];
    login_pkce_challenge(a.verifier, ch);
    CHECK_EQ_STR(a.challenge, ch);
    char s1[44], s2[44];
    CHECK_EQ_INT(login_state_new(s1), 0);
    CHECK_EQ_INT(login_state_new(s2), 0);
    CHECK_EQ_INT(strlen(s1), 43);
    CHECK(strcmp(s1, s2) != 0);
}

static void test_authorize_url_carries_what_codex_sends_percent_encoded(void)
{
    sbuf u = SBUF_INIT;
    char redirect[64];
    login_redirect_uri(redirect, sizeof redirect, 1455);
    CHECK_EQ_STR(redirect, "http://localhost:1455/auth/callback");
    login_authorize_url(&u, "https://auth.openai.com/oauth/authorize", "app_EMoamEEZ73f0CkXaXp7hrann", redirect,
                        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "a b&c");
    CHECK_EQ_STR(u.p, "https://auth.openai.com/oauth/authorize?response_type=code"
                      "&client_id=app_EMoamEEZ73f0CkXaXp7hrann"
                      "&redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2Fcallback"
                      "&scope=openid%20profile%20email%20offline_access%20api.connectors.read%20api.connectors.invoke"
                      "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
                      "&id_token_add_organizations=true&codex_cli_simplified_flow=true&state=a%20b%26c"
                      "&originator=codex_cli_rs");
    sbuf_reset(&u);
    login_authorize_url(&u, "http://127.0.0.1:9/oauth/ok,user=a/authorize?x=1", "c", "r", "h", "s");
    CHECK(strncmp(u.p, "http://127.0.0.1:9/oauth/ok,user=a/authorize?x=1&response_type=code&", 68) == 0);
    sbuf_free(&u);
}

static void test_url_origin_and_query_values(void)
{
    char o[64], v[32];
    login_url_origin("https://auth.openai.com/oauth/authorize?x=1", o, sizeof o);
    CHECK_EQ_STR(o, "https://auth.openai.com");
    login_url_origin("http://127.0.0.1:8080", o, sizeof o);
    CHECK_EQ_STR(o, "http://127.0.0.1:8080");
    login_url_origin("not a url", o, sizeof o);
    CHECK_EQ_STR(o, "");
    CHECK_EQ_INT(login_query_get("a=1&code=x%2By+z&b=2", "code", v, sizeof v), 0);
    CHECK_EQ_STR(v, "x+y z");
    CHECK_EQ_INT(login_query_get("xcode=1", "code", v, sizeof v), -1);
    CHECK_EQ_INT(login_query_get("code=%0d%0aX", "code", v, sizeof v), -1); /* a control character */
    CHECK_EQ_INT(login_query_get("code=%zz", "code", v, sizeof v), -1);
    CHECK_EQ_INT(login_query_get("code=%4", "code", v, sizeof v), -1);
    CHECK_EQ_INT(login_query_get("code=0123456789012345678901234567890123456789", "code", v, sizeof v), -1);
    CHECK_EQ_INT(login_query_get("", "code", v, sizeof v), -1);
}

static login_callback_kind judge(const char *method, const char *target, const char *host, const char *origin,
                                 char *code)
{
    char why[200];
    return login_callback_check(method, target, host, origin, PORT, STATE, AUTH_ORIGIN, code, 128, why, sizeof why);
}

static void test_callback_with_our_state_and_a_code_is_the_code(void)
{
    char code[128];
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&scope=openid&state=" STATE, "localhost:1455", NULL, code),
                 LOGIN_CB_CODE);
    CHECK_EQ_STR(code, "ac_1");
    CHECK_EQ_INT(judge("GET", "/auth/callback?state=" STATE "&code=ac_2", "127.0.0.1:1455", AUTH_ORIGIN, code),
                 LOGIN_CB_CODE);
    CHECK_EQ_STR(code, "ac_2");
}

static void test_callback_with_another_state_is_refused_before_its_code_is_read(void)
{
    char code[128];
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=other", "localhost:1455", NULL, code),
                 LOGIN_CB_BAD_STATE);
    CHECK_EQ_STR(code, "");
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1", "localhost:1455", NULL, code), LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=" STATE "x", "localhost:1455", NULL, code),
                 LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?error=access_denied&state=nope", "localhost:1455", NULL, code),
                 LOGIN_CB_BAD_STATE);
}

static void test_callback_repeating_a_parameter_is_refused_whichever_copy_is_ours(void)
{
    char code[128];
    const char *h = "localhost:1455";
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=" STATE "&state=other", h, NULL, code),
                 LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?state=other&code=ac_1&state=" STATE, h, NULL, code),
                 LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=" STATE "&code=forged", h, NULL, code),
                 LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?state=" STATE "&error=a&error=b", h, NULL, code), LOGIN_CB_BAD_STATE);
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=" STATE "&code", h, NULL, code), LOGIN_CB_BAD_STATE);
    CHECK_EQ_STR(code, "");
    /* a name that only begins like one is another parameter */
    CHECK_EQ_INT(judge("GET", "/auth/callback?code=ac_1&state=" STATE "&codex=1&states=2", h, NULL, code),
                 LOGIN_CB_CODE);
    CHECK_EQ_STR(code, "ac_1");
}

static void test_callback_from_another_host_origin_path_or_method_is_refused(void)
{
    char code[128];
    const char *ok = "/auth/callback?code=ac_1&state=" STATE;
    CHECK_EQ_INT(judge("GET", ok, "evil.example:1455", NULL, code), LOGIN_CB_FOREIGN);
    CHECK_EQ_INT(judge("GET", ok, "localhost:1456", NULL, code), LOGIN_CB_FOREIGN);
    CHECK_EQ_INT(judge("GET", ok, NULL, NULL, code), LOGIN_CB_FOREIGN);
    CHECK_EQ_INT(judge("GET", ok, "localhost:1455", "http://evil.example", code), LOGIN_CB_FOREIGN);
    CHECK_EQ_INT(judge("GET", ok, "localhost:1455", "null", code), LOGIN_CB_FOREIGN);
    CHECK_EQ_INT(judge("POST", ok, "localhost:1455", NULL, code), LOGIN_CB_BAD_METHOD);
    CHECK_EQ_INT(judge("GET", "/auth/callbackx?code=1", "localhost:1455", NULL, code), LOGIN_CB_NOT_FOUND);
    CHECK_EQ_INT(judge("GET", "/", "localhost:1455", NULL, code), LOGIN_CB_NOT_FOUND);
    CHECK_EQ_STR(code, "");
}

static void test_callback_error_with_our_state_is_a_denial(void)
{
    char code[128], why[200];
    login_callback_kind k = login_callback_check(
        "GET", "/auth/callback?error=access_denied&error_description=The+user+said+no&state=" STATE,
        "localhost:1455", NULL, PORT, STATE, AUTH_ORIGIN, code, sizeof code, why, sizeof why);
    CHECK_EQ_INT(k, LOGIN_CB_DENIED);
    CHECK_EQ_STR(why, "access_denied: The user said no");
    CHECK_EQ_INT(judge("GET", "/auth/callback?state=" STATE, "localhost:1455", NULL, code), LOGIN_CB_NO_CODE);
}

/* header {"alg":"none"}; id token {"email":"a@x.io","https://api.openai.com/auth":{"chatgpt_account_id":"acc-9","chatgpt_plan_type":"team"}};
 * access token {"exp":1900000000} */
#define ID_TOKEN "eyJhbGciOiJub25lIn0.eyJlbWFpbCI6ImFAeC5pbyIsImh0dHBzOi8vYXBpLm9wZW5haS5jb20vYXV0aCI6eyJjaGF0Z3B0X2FjY291bnRfaWQiOiJhY2MtOSIsImNoYXRncHRfcGxhbl90eXBlIjoidGVhbSJ9fQ.sig"
#define ACCESS "eyJhbGciOiJub25lIn0.eyJleHAiOjE5MDAwMDAwMDB9.sig"

static void test_exchange_answer_gives_the_whole_login(void)
{
    const char *body = "{\"access_token\":\"" ACCESS "\",\"refresh_token\":\"rt_1\",\"id_token\":\"" ID_TOKEN "\"}";
    login_list l = {0};
    l.v = calloc(1, sizeof *l.v);
    l.n = l.cap = 1;
    char err[200];
    CHECK_EQ_INT(login_exchange_answer(body, strlen(body), 1899990000, &l.v[0], err, sizeof err), 0);
    login_entry *e = &l.v[0];
    CHECK_EQ_INT(e->kind, ACCOUNT_CHATGPT);
    CHECK_EQ_STR(e->access_token, ACCESS);
    CHECK_EQ_STR(e->refresh_token, "rt_1");
    CHECK_EQ_STR(e->email, "a@x.io");
    CHECK_EQ_STR(e->account_id, "acc-9");
    CHECK_EQ_STR(e->plan_type, "team");
    CHECK_EQ_INT(e->expires_at, 1900000000);
    CHECK_EQ_INT(e->last_refresh_at, 1899990000);
    login_list_free(&l);
}

static void test_exchange_answer_without_a_refresh_token_is_refused(void)
{
    const char *bodies[] = {"{\"access_token\":\"" ACCESS "\",\"id_token\":\"" ID_TOKEN "\"}",
                            "{\"access_token\":\"" ACCESS "\",\"refresh_token\":\"rt\"}",
                            "{\"access_token\":\"a b\",\"refresh_token\":\"rt\",\"id_token\":\"" ID_TOKEN "\"}",
                            "not json", ""};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        login_entry e;
        memset(&e, 0, sizeof e);
        char err[200] = "";
        CHECK_EQ_INT(login_exchange_answer(bodies[i], strlen(bodies[i]), 1800000000, &e, err, sizeof err), -1);
        CHECK(err[0] != '\0');
        CHECK(e.access_token == NULL && e.refresh_token == NULL);
    }
}

static void test_device_answer_takes_the_interval_as_a_string_or_number_and_bounds_expiry(void)
{
    login_device d;
    char err[200];
    memset(&d, 0, sizeof d);
    const char *a = "{\"device_auth_id\":\"dev_1\",\"user_code\":\"ABCD-1234\",\"interval\":\"3\"}";
    CHECK_EQ_INT(login_device_answer(a, strlen(a), 1000, &d, err, sizeof err), 0);
    CHECK_EQ_STR(d.device_auth_id, "dev_1");
    CHECK_EQ_STR(d.user_code, "ABCD-1234");
    CHECK_EQ_INT(d.interval_s, 3);
    CHECK_EQ_INT(d.expires_at, 1000 + LOGIN_DEVICE_MAX_S);
    const char *b = "{\"device_auth_id\":\"dev_1\",\"usercode\":\"X\",\"interval\":500,\"expires_in\":60}";
    CHECK_EQ_INT(login_device_answer(b, strlen(b), 1000, &d, err, sizeof err), 0);
    CHECK_EQ_INT(d.interval_s, 60);
    CHECK_EQ_INT(d.expires_at, 1060);
    const char *c = "{\"device_auth_id\":\"dev_1\",\"user_code\":\"X\",\"interval\":\"x\",\"expires_in\":99999}";
    CHECK_EQ_INT(login_device_answer(c, strlen(c), 1000, &d, err, sizeof err), 0);
    CHECK_EQ_INT(d.interval_s, 5);
    CHECK_EQ_INT(d.expires_at, 1000 + LOGIN_DEVICE_MAX_S);
    const char *bad[] = {"{\"user_code\":\"X\"}", "{\"device_auth_id\":\"d\",\"user_code\":\"\\u001b[2J\"}", "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(login_device_answer(bad[i], strlen(bad[i]), 1000, &d, err, sizeof err), -1);
}

static void test_device_poll_answers_pending_denied_expired_and_approved(void)
{
    login_device d;
    memset(&d, 0, sizeof d);
    d.interval_s = 2;
    char code[64], ver[128], err[200];
#define POLL(st, body) login_device_poll_answer(st, body, strlen(body), &d, code, sizeof code, ver, sizeof ver, err, sizeof err)
    CHECK_EQ_INT(POLL(403, "{}"), LOGIN_POLL_PENDING);
    CHECK_EQ_INT(POLL(404, ""), LOGIN_POLL_PENDING);
    CHECK_EQ_INT(POLL(400, "{\"error\":\"authorization_pending\"}"), LOGIN_POLL_PENDING);
    CHECK_EQ_INT(POLL(400, "{\"error\":\"slow_down\"}"), LOGIN_POLL_PENDING);
    CHECK_EQ_INT(d.interval_s, 7);
    CHECK_EQ_INT(POLL(400, "{\"error\":\"access_denied\"}"), LOGIN_POLL_DENIED);
    CHECK_EQ_INT(POLL(400, "{\"error\":{\"code\":\"expired_token\"}}"), LOGIN_POLL_EXPIRED);
    CHECK_EQ_INT(POLL(500, "oops"), LOGIN_POLL_FAILED);
    CHECK_EQ_STR(err, "HTTP 500");
    CHECK_EQ_INT(POLL(200, "{\"authorization_code\":\"ac\",\"code_challenge\":"
                           "\"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM\",\"code_verifier\":"
                           "\"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk\"}"),
                 LOGIN_POLL_APPROVED);
    CHECK_EQ_STR(code, "ac");
    CHECK_EQ_STR(ver, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
    /* a verifier that is not the challenge's is no approval */
    CHECK_EQ_INT(POLL(200, "{\"authorization_code\":\"ac\",\"code_challenge\":\"x\",\"code_verifier\":\"y\"}"),
                 LOGIN_POLL_FAILED);
    CHECK_EQ_INT(POLL(200, "{\"code_verifier\":\"y\"}"), LOGIN_POLL_FAILED);
#undef POLL
}

static void test_request_line_gives_method_and_target_whole_or_refuses(void)
{
    char m[16], t[32];
    CHECK_EQ_INT(login_request_line("GET /auth/callback?code=a&state=b HTTP/1.1\r\nHost: x\r\n\r\n", m, sizeof m, t,
                                    sizeof t),
                 LOGIN_LINE_OK);
    CHECK_EQ_STR(m, "GET");
    CHECK_EQ_STR(t, "/auth/callback?code=a&state=b");
    /* a target of exactly the room left for its NUL is taken; one byte more is a 414, nothing cut */
    CHECK_EQ_INT(login_request_line("GET /234567890123456789012345678901 HTTP/1.0\r\n", m, sizeof m, t, sizeof t),
                 LOGIN_LINE_OK);
    CHECK_EQ_INT(strlen(t), 31);
    CHECK_EQ_INT(login_request_line("GET /2345678901234567890123456789012 HTTP/1.0\r\n", m, sizeof m, t, sizeof t),
                 LOGIN_LINE_TOO_LONG);
    CHECK_EQ_STR(t, "");
    CHECK_EQ_STR(m, "");
    /* not METHOD SP TARGET SP HTTP/: refused, nothing kept */
    static const char *const bad[] = {
        "", "GET", "GET ", "GET /", "GET / ", "GET / FTP/1.0", "GET  / HTTP/1.1", " GET / HTTP/1.1",
        "GET /\r\n HTTP/1.1", "GET / HTTP", "GET\t/ HTTP/1.1", "GET /a b HTTP/1.1", "\r\nGET / HTTP/1.1",
        "AVERYLONGMETHODX / HTTP/1.1", /* 16 bytes: no room for its NUL */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(login_request_line(bad[i], m, sizeof m, t, sizeof t), LOGIN_LINE_BAD);
        CHECK_EQ_STR(m, "");
        CHECK_EQ_STR(t, "");
    }
    CHECK_EQ_INT(login_request_line("AVERYLONGMETHOD / HTTP/1.1", m, sizeof m, t, sizeof t), LOGIN_LINE_OK);
    CHECK_EQ_STR(m, "AVERYLONGMETHOD");
    /* a bad line with a target too long is a 400: the line is judged first */
    CHECK_EQ_INT(login_request_line("GET /2345678901234567890123456789012 HTTQ/1.0", m, sizeof m, t, sizeof t),
                 LOGIN_LINE_BAD);
}

int main(void)
{
    RUN(test_pkce_challenge_matches_rfc7636_appendix_b);
    RUN(test_new_pkce_pairs_are_random_base64url_of_the_right_length);
    RUN(test_authorize_url_carries_what_codex_sends_percent_encoded);
    RUN(test_url_origin_and_query_values);
    RUN(test_request_line_gives_method_and_target_whole_or_refuses);
    RUN(test_callback_with_our_state_and_a_code_is_the_code);
    RUN(test_callback_with_another_state_is_refused_before_its_code_is_read);
    RUN(test_callback_repeating_a_parameter_is_refused_whichever_copy_is_ours);
    RUN(test_callback_from_another_host_origin_path_or_method_is_refused);
    RUN(test_callback_error_with_our_state_is_a_denial);
    RUN(test_exchange_answer_gives_the_whole_login);
    RUN(test_exchange_answer_without_a_refresh_token_is_refused);
    RUN(test_device_answer_takes_the_interval_as_a_string_or_number_and_bounds_expiry);
    RUN(test_device_poll_answers_pending_denied_expired_and_approved);
    return check_summary();
}
