/* test_login_file.c: JWT claims of a login and the login file shapes
 * (login_file.c, jwt.c). */
#include "check.h"
#include "base/jwt.h"
#include "accounts/login_file.h"

/* header {"alg":"none"} . payload . sig, payloads base64url without padding */
#define JWT_HDR "eyJhbGciOiJub25lIn0"
/* {"exp":1900000000,"email":"a@x.io","aud":["app_X1"],"https://api.openai.com/auth":{"chatgpt_account_id":"acc-9","chatgpt_plan_type":"team"}} */
#define JWT_FULL JWT_HDR ".eyJleHAiOjE5MDAwMDAwMDAsImVtYWlsIjoiYUB4LmlvIiwiYXVkIjpbImFwcF9YMSJdLCJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjLTkiLCJjaGF0Z3B0X3BsYW5fdHlwZSI6InRlYW0ifX0.sig"
/* {"exp":1900000000} */
#define JWT_EXP JWT_HDR ".eyJleHAiOjE5MDAwMDAwMDB9.sig"

static void test_jwt_claims_give_expiry_identity_plan_and_client(void)
{
    jwt_claims c;
    CHECK_EQ_INT(jwt_claims_read(JWT_FULL, &c), 0);
    CHECK_EQ_INT(c.exp, 1900000000);
    CHECK_EQ_STR(c.email, "a@x.io");
    CHECK_EQ_STR(c.chatgpt_account_id, "acc-9");
    CHECK_EQ_STR(c.plan_type, "team");
    CHECK_EQ_STR(c.client_id, "app_X1");
}

static void test_jwt_claims_reject_what_is_not_a_jwt(void)
{
    jwt_claims c;
    CHECK_EQ_INT(jwt_claims_read("sk-plainkey", &c), -1);
    CHECK_EQ_INT(jwt_claims_read("a.b", &c), -1);
    CHECK_EQ_INT(jwt_claims_read(JWT_HDR ".!!!.sig", &c), -1);
    CHECK_EQ_INT(c.exp, 0);
}

static void test_codex_auth_json_gives_one_full_login(void)
{
    const char *t = "{\"OPENAI_API_KEY\":null,\"last_refresh\":\"2025-01-01T00:00:10.5Z\",\"tokens\":{"
                    "\"id_token\":\"" JWT_FULL "\",\"access_token\":\"" JWT_EXP "\",\"refresh_token\":\"rt_1\"}}";
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("auth.json", t, strlen(t), &l, err, sizeof err), 0);
    CHECK_EQ_INT(l.n, 1);
    if (l.n == 1) {
        CHECK_EQ_STR(l.v[0].refresh_token, "rt_1");
        CHECK_EQ_STR(l.v[0].account_id, "acc-9");
        CHECK_EQ_STR(l.v[0].email, "a@x.io");
        CHECK_EQ_STR(l.v[0].plan_type, "team");
        CHECK_EQ_INT(l.v[0].expires_at, 1900000000);
        CHECK_EQ_INT(l.v[0].last_refresh_at, 1735689610);
        CHECK(l.v[0].kind == ACCOUNT_CHATGPT);
    }
    login_list_free(&l);
}

static void test_a_stream_of_objects_is_read_entry_by_entry(void)
{
    const char *t = "{\"name\":\"a\",\"access_token\":\"" JWT_EXP "\",\"account_id\":\"x1\"}\n"
                    "[{\"name\":\"b\",\"accessToken\":\"tok\",\"chatgptAccountId\":\"x2\"}]";
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("s.json", t, strlen(t), &l, err, sizeof err), 0);
    CHECK_EQ_INT(l.n, 2);
    if (l.n == 2) {
        CHECK_EQ_STR(l.v[1].name, "b");
        CHECK_EQ_STR(l.v[1].account_id, "x2");
    }
    login_list_free(&l);
}

static void test_bad_entries_are_named_with_their_field_and_nothing_is_kept(void)
{
    const char *t = "[{\"access_token\":\"t1\",\"account_id\":\"x\"},{\"name\":\"bob\",\"account_id\":\"y\"}]";
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("f.json", t, strlen(t), &l, err, sizeof err), -1);
    CHECK(strstr(err, "f.json entry 2 (bob): access_token: missing") != NULL);
    CHECK_EQ_INT(l.n, 0);
    const char *t2 = "[{\"access_token\":\"t1\"}]";
    CHECK_EQ_INT(login_file_parse("g.json", t2, strlen(t2), &l, err, sizeof err), -1);
    CHECK(strstr(err, "g.json entry 1: account_id: missing") != NULL);
    const char *t3 = "[{\"platform\":\"anthropic\",\"credentials\":{\"access_token\":\"t\"}}]";
    CHECK_EQ_INT(login_file_parse("h.json", t3, strlen(t3), &l, err, sizeof err), -1);
    CHECK(strstr(err, "h.json entry 1: platform: 'anthropic'") != NULL);
    CHECK_EQ_INT(login_file_parse("e.json", "  ", 2, &l, err, sizeof err), -1);
    CHECK(strstr(err, "holds no logins") != NULL);
    login_list_free(&l);
}

static void test_export_holds_tokens_only_with_secrets(void)
{
    account a = {0};
    a.name = "n";
    a.kind = ACCOUNT_CHATGPT;
    a.base_url = "https://chatgpt.com/backend-api/codex";
    a.token = "ACCESS-SECRET";
    a.refresh_token = "REFRESH-SECRET";
    a.chatgpt_account_id = "acc";
    sbuf o = SBUF_INIT;
    login_file_write(&o, &a, 1, 0);
    CHECK(!strstr(o.p, "SECRET"));
    sbuf_reset(&o);
    login_file_write(&o, &a, 1, 1);
    CHECK(strstr(o.p, "ACCESS-SECRET") && strstr(o.p, "REFRESH-SECRET"));
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("x", o.p, o.len, &l, err, sizeof err), 0);
    CHECK(l.n == 1 && strcmp(l.v[0].refresh_token, "REFRESH-SECRET") == 0 && strcmp(l.v[0].name, "n") == 0);
    login_list_free(&l);
    sbuf_free(&o);
}

/* sort, max_concurrency and times of an import are outside numbers: one that does not fit
 * its integer (1e300, a negative concurrency) refuses the entry instead of being cast */
static void test_numbers_that_do_not_fit_refuse_the_entry(void)
{
    static const char *const bad[] = {
        "[{\"name\":\"a\",\"access_token\":\"t\",\"account_id\":\"x\",\"sort\":1e300}]",
        "[{\"name\":\"a\",\"access_token\":\"t\",\"account_id\":\"x\",\"sort\":-3e9}]",
        "[{\"name\":\"a\",\"access_token\":\"t\",\"account_id\":\"x\",\"max_concurrency\":1e300}]",
        "[{\"name\":\"a\",\"access_token\":\"t\",\"account_id\":\"x\",\"concurrency\":-1}]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        login_list l = {0};
        char err[256] = "";
        CHECK_EQ_INT(login_file_parse("n.json", bad[i], strlen(bad[i]), &l, err, sizeof err), -1);
        CHECK(strstr(err, "n.json entry 1 (a): ") != NULL);
        CHECK_EQ_INT(l.n, 0);
        login_list_free(&l);
    }
    const char *ok = "[{\"name\":\"a\",\"access_token\":\"t\",\"account_id\":\"x\",\"sort\":-7,"
                     "\"max_concurrency\":3,\"expires_at\":1e300,\"last_refresh\":1e300}]";
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("o.json", ok, strlen(ok), &l, err, sizeof err), 0);
    CHECK_EQ_INT(l.n, 1);
    if (l.n == 1) {
        CHECK_EQ_INT(l.v[0].sort, -7);
        CHECK_EQ_INT(l.v[0].max_concurrency, 3);
        CHECK_EQ_INT(l.v[0].expires_at, 0); /* a time past year 9999 is no time */
    }
    login_list_free(&l);
}

/* An account's --models list goes out with its export and comes back on
 * import (a string as written, or an array of names), checked as --models
 * is; a bad list names the entry and the field. */
static void test_models_list_travels_through_export_and_import(void)
{
    account a = {0};
    a.name = "n";
    a.kind = ACCOUNT_API_KEY;
    a.base_url = "https://api.example.com/v1";
    a.token = "sk-x";
    a.models = "gpt-5,o3";
    sbuf o = SBUF_INIT;
    login_file_write(&o, &a, 1, 1);
    CHECK(strstr(o.p, "\"models\":\"gpt-5,o3\"") != NULL);
    login_list l = {0};
    char err[256] = "";
    CHECK_EQ_INT(login_file_parse("x", o.p, o.len, &l, err, sizeof err), 0);
    CHECK(l.n == 1 && l.v[0].models && strcmp(l.v[0].models, "gpt-5,o3") == 0);
    account_new an;
    char name[64];
    if (l.n == 1) {
        login_entry_to_account(&l.v[0], &an, name, sizeof name);
        CHECK_EQ_STR(an.models, "gpt-5,o3");
    }
    login_list_free(&l);
    const char *arr = "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",\"models\":[\" o3\",\"gpt-5\",\"o3\"]}";
    CHECK_EQ_INT(login_file_parse("y", arr, strlen(arr), &l, err, sizeof err), 0);
    CHECK(l.n == 1 && l.v[0].models && strcmp(l.v[0].models, "o3,gpt-5") == 0);
    login_list_free(&l);
    const char *none = "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",\"models\":null}";
    CHECK_EQ_INT(login_file_parse("z", none, strlen(none), &l, err, sizeof err), 0);
    CHECK(l.n == 1 && l.v[0].models == NULL);
    login_list_free(&l);
    const char *bad[] = {"{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",\"models\":\"a,,b\"}",
                         "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",\"models\":7}",
                         "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",\"models\":[\"a,b\"]}"};
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_INT(login_file_parse("b.json", bad[i], strlen(bad[i]), &l, err, sizeof err), -1);
        CHECK(strstr(err, "b.json entry 1 (k): models: ") != NULL);
        CHECK_EQ_INT(l.n, 0);
    }
    login_list_free(&l);
    sbuf_free(&o);
}

/* Every setting of `account add` goes out in the export and comes back
 * into the account_new an import adds: weight, limits, budget and period,
 * context fallback and a disabled account (issue 24). */
static void test_every_account_setting_travels_through_export_and_import(void)
{
    account a = {0};
    a.name = "tuned";
    a.kind = ACCOUNT_API_KEY;
    a.base_url = "https://api.example.com/v1";
    a.token = "sk-x";
    a.sort = -3;
    a.max_concurrency = 7;
    a.weight = 5;
    a.max_rpm = 60;
    a.max_tpm = 90000;
    a.budget_usd = 12.1;
    snprintf(a.budget_period, sizeof a.budget_period, "7d");
    a.context_fallback = 1;
    a.enabled = 0;
    a.model_map = "{\"gpt-5\":\"gpt-5-codex\"}";
    sbuf o = SBUF_INIT;
    login_file_write(&o, &a, 1, 1);
    CHECK(strstr(o.p, "\"budget_usd\":12.1,") != NULL); /* the shortest number that reads back the same */
    login_list l = {0};
    char err[256] = "", name[64];
    CHECK_EQ_INT(login_file_parse("x", o.p, o.len, &l, err, sizeof err), 0);
    account_new an;
    memset(&an, 0, sizeof an);
    if (l.n == 1)
        login_entry_to_account(&l.v[0], &an, name, sizeof name);
    CHECK_EQ_INT(an.sort, -3);
    CHECK_EQ_INT(an.max_concurrency, 7);
    CHECK_EQ_INT(an.weight, 5);
    CHECK_EQ_INT(an.max_rpm, 60);
    CHECK_EQ_INT(an.max_tpm, 90000);
    CHECK(an.budget_usd == 12.1);
    CHECK_EQ_STR(an.budget_period, "7d");
    CHECK_EQ_INT(an.context_fallback, 1);
    CHECK_EQ_INT(an.disabled, 1);
    CHECK_EQ_STR(an.model_map, "{\"gpt-5\":\"gpt-5-codex\"}");
    login_list_free(&l);
    /* an entry without them (a Codex login) gets what `account add` gives */
    const char *plain = "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\"}";
    CHECK_EQ_INT(login_file_parse("p", plain, strlen(plain), &l, err, sizeof err), 0);
    if (l.n == 1)
        login_entry_to_account(&l.v[0], &an, name, sizeof name);
    CHECK(an.weight == 0 && an.max_rpm == 0 && an.budget_usd == 0 && an.budget_period == NULL &&
          an.context_fallback == 0 && an.disabled == 0);
    login_list_free(&l);
    sbuf_free(&o);
}

/* A setting of the wrong type or range refuses the file, naming the field. */
static void test_bad_account_settings_name_the_field(void)
{
    static const struct {
        const char *field, *json;
    } bad[] = {
        {"weight", "\"weight\":-1"},           {"max_rpm", "\"max_rpm\":1.5"},
        {"max_tpm", "\"max_tpm\":\"9\""},        {"budget_usd", "\"budget_usd\":-2"},
        {"budget_usd", "\"budget_usd\":1e300"},  {"budget_period", "\"budget_period\":\"week\""},
        {"budget_period", "\"budget_period\":7"}, {"context_fallback", "\"context_fallback\":1"},
        {"enabled", "\"enabled\":\"no\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[256], want[96], err[256] = "";
        snprintf(text, sizeof text, "{\"name\":\"k\",\"kind\":\"api_key\",\"token\":\"sk-y\",%s}", bad[i].json);
        snprintf(want, sizeof want, "b.json entry 1 (k): %s: ", bad[i].field);
        login_list l = {0};
        CHECK_EQ_INT(login_file_parse("b.json", text, strlen(text), &l, err, sizeof err), -1);
        if (!strstr(err, want))
            fprintf(stderr, "  %s: got '%s'\n", bad[i].json, err);
        CHECK(strstr(err, want) != NULL);
        CHECK_EQ_INT(l.n, 0);
        login_list_free(&l);
    }
}

int main(void)
{
    RUN(test_jwt_claims_give_expiry_identity_plan_and_client);
    RUN(test_jwt_claims_reject_what_is_not_a_jwt);
    RUN(test_codex_auth_json_gives_one_full_login);
    RUN(test_a_stream_of_objects_is_read_entry_by_entry);
    RUN(test_bad_entries_are_named_with_their_field_and_nothing_is_kept);
    RUN(test_export_holds_tokens_only_with_secrets);
    RUN(test_numbers_that_do_not_fit_refuse_the_entry);
    RUN(test_models_list_travels_through_export_and_import);
    RUN(test_every_account_setting_travels_through_export_and_import);
    RUN(test_bad_account_settings_name_the_field);
    return check_summary();
}
