/* test_usage.c: untrusted numbers from upstream answers (usage.c): token
 * counts, usage headers, Retry-After and resets_in_seconds are clamped into
 * their ranges instead of reaching an undefined float-to-integer cast (the
 * hostile pass stored a usage of 1e85 tokens as INT64_MIN). */
#include "check.h"
#include "upstream/preflight.h"
#include "upstream/usage.h"
#include "accounts/usage_poll.h"
#include <math.h>

static void test_huge_token_count_is_capped_not_wrapped(void)
{
    CHECK_EQ_INT(usage_count(1e85), USAGE_TOKENS_MAX);
    CHECK_EQ_INT(usage_count(INFINITY), USAGE_TOKENS_MAX);
    CHECK_EQ_INT(usage_count(9.3e18), USAGE_TOKENS_MAX);
    CHECK_EQ_INT(usage_count(NAN), -1);
    CHECK_EQ_INT(usage_count(-5), -1);
    CHECK_EQ_INT(usage_count(-1e300), -1);
    CHECK_EQ_INT(usage_count(42.9), 42);
}

static void test_clamp_int_never_casts_out_of_range(void)
{
    CHECK_EQ_INT(usage_clamp_int(1e300, 0, 100, -1), 100);
    CHECK_EQ_INT(usage_clamp_int(-1e300, -7, 100, -1), -7);
    CHECK_EQ_INT(usage_clamp_int(NAN, 0, 100, 55), 55);
    CHECK_EQ_INT(usage_clamp_int(9.3e18, INT64_MIN, INT64_MAX, 0), INT64_MAX);
    CHECK_EQ_INT(usage_clamp_int(-9.3e18, INT64_MIN, INT64_MAX, 0), INT64_MIN);
    CHECK_EQ_INT(usage_clamp_int(12.5, 0, 100, -1), 12);
}

static usage_tokens read_usage(const char *json)
{
    usage_tokens t = {-1, -1, -1, -1};
    json_value *doc = json_parse(json, strlen(json), NULL, 0);
    CHECK(doc != NULL);
    usage_tokens_read(doc, &t);
    json_free(doc);
    return t;
}

static void test_usage_object_with_1e85_tokens_is_clamped(void)
{
    usage_tokens t = read_usage("{\"input_tokens\":1e85,\"output_tokens\":5}");
    CHECK_EQ_INT(t.in, USAGE_TOKENS_MAX);
    CHECK_EQ_INT(t.out, 5);
    CHECK_EQ_INT(t.total, USAGE_TOKENS_MAX); /* the sum saturates too */
    t = read_usage("{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":-1e85}");
    CHECK_EQ_INT(t.in, 3);
    CHECK_EQ_INT(t.out, 4);
    CHECK_EQ_INT(t.total, 7);
    t = read_usage("{\"input_tokens\":\"12\",\"output_tokens\":null}");
    CHECK_EQ_INT(t.in, -1);
    CHECK_EQ_INT(t.out, -1);
    CHECK_EQ_INT(t.total, -1);
    CHECK_EQ_INT(t.cached, -1);
}

/* A repeated member counts as json_get reads it, the last one, even when
 * that one is no number (then the other API's name, else nothing). */
static void test_usage_repeated_members_count_as_the_last_one(void)
{
    usage_tokens t = read_usage("{\"input_tokens\":5,\"output_tokens\":1,\"input_tokens\":9}");
    CHECK_EQ_INT(t.in, 9);
    t = read_usage("{\"input_tokens\":5,\"input_tokens\":\"x\",\"prompt_tokens\":3,\"output_tokens\":1}");
    CHECK_EQ_INT(t.in, 3);
    CHECK_EQ_INT(t.total, 4);
    t = read_usage("{\"input_tokens_details\":7,\"prompt_tokens_details\":{\"cached_tokens\":2}}");
    CHECK_EQ_INT(t.cached, -1); /* the Responses name is there (not an object): the Chat one is not read */
    t = read_usage("{\"prompt_tokens_details\":{\"cached_tokens\":2},\"prompt_tokens_details\":{\"cached_tokens\":6}}");
    CHECK_EQ_INT(t.cached, 6);
}

/* Cached input tokens come from either API's details object, clamped like the rest. */
static void test_usage_cached_tokens_are_read_from_both_shapes_and_clamped(void)
{
    usage_tokens t = read_usage("{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4}}");
    CHECK_EQ_INT(t.cached, 4);
    t = read_usage("{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":1e85}}");
    CHECK_EQ_INT(t.cached, USAGE_TOKENS_MAX);
    t = read_usage("{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":-3}}");
    CHECK_EQ_INT(t.cached, -1);
}

static void test_stream_usage_of_1e85_tokens_is_clamped(void)
{
    static const char ev[] =
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\","
        "\"usage\":{\"input_tokens\":1e85,\"output_tokens\":-1e85,\"total_tokens\":1.7976931348623157e308}}}\n\n";
    preflight pf;
    preflight_init(&pf, API_RESPONSES, 1 << 16);
    preflight_feed(&pf, ev, sizeof ev - 1);
    CHECK_EQ_INT(pf.input_tokens, USAGE_TOKENS_MAX);
    CHECK_EQ_INT(pf.output_tokens, -1);
    CHECK_EQ_INT(pf.total_tokens, USAGE_TOKENS_MAX);
    preflight_free(&pf);
    static const char chat[] = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1e19,\"completion_tokens\":2}}\n\n";
    preflight_init(&pf, API_CHAT, 1 << 16);
    preflight_feed(&pf, chat, sizeof chat - 1);
    CHECK_EQ_INT(pf.input_tokens, USAGE_TOKENS_MAX);
    CHECK_EQ_INT(pf.output_tokens, 2);
    CHECK_EQ_INT(pf.total_tokens, USAGE_TOKENS_MAX);
    preflight_free(&pf);
}

static void test_retry_after_header_is_strict_and_capped(void)
{
    CHECK(usage_header_seconds("30") == 30);
    CHECK(usage_header_seconds(" 2.5 ") == 2.5);
    CHECK(usage_header_seconds("1e85") == USAGE_SECONDS_MAX);
    CHECK(usage_header_seconds("inf") == -1);
    CHECK(usage_header_seconds("nan") == -1);
    CHECK(usage_header_seconds("-3") == -1);
    CHECK(usage_header_seconds("12abc") == -1);
    CHECK(usage_header_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == -1);
    CHECK(usage_header_seconds("") == -1);
    CHECK(usage_header_seconds(NULL) == -1);
}

static void test_usage_headers_are_clamped_into_range(void)
{
    account_state st;
    memset(&st, 0, sizeof st);
    st.primary_used_pct = st.secondary_used_pct = -1;
    CHECK(usage_header_apply(&st, "x-codex-primary-used-percent", "1e85", 1000));
    CHECK(st.primary_used_pct == 100);
    CHECK(!usage_header_apply(&st, "x-codex-secondary-used-percent", "nan", 1000));
    CHECK(st.secondary_used_pct == -1);
    CHECK(!usage_header_apply(&st, "X-Codex-Secondary-Used-Percent", "-4", 1000));
    CHECK(usage_header_apply(&st, "X-Codex-Secondary-Used-Percent", "42.5", 1000));
    CHECK(st.secondary_used_pct == 42.5);
    CHECK(usage_header_apply(&st, "x-codex-primary-reset-after-seconds", "1e300", 1000));
    CHECK(st.primary_reset_at == 1000 + USAGE_SECONDS_MAX);
    CHECK(!usage_header_apply(&st, "x-codex-secondary-reset-after-seconds", "inf", 1000));
    CHECK(st.secondary_reset_at == 0);
    CHECK(usage_header_apply(&st, "x-codex-primary-window-minutes", "300", 1000));
    CHECK(st.primary_window_s == 18000);
    CHECK(usage_header_apply(&st, "x-codex-secondary-window-minutes", "1e85", 1000));
    CHECK(st.secondary_window_s == USAGE_SECONDS_MAX);
    CHECK(usage_header_apply(&st, "x-codex-secondary-reset-at", "1e300", 1000));
    CHECK(st.secondary_reset_at == 1000 + USAGE_SECONDS_MAX);
    CHECK(!usage_header_apply(&st, "x-codex-primary-reset-at", "-1e300", 1000));
    CHECK(!usage_header_apply(&st, "x-codex-turn-state", "abc", 1000));
    CHECK(!usage_header_apply(&st, "x-codex-primary-other", "5", 1000));
}

static void test_resets_in_seconds_is_clamped(void)
{
    const char *j = "{\"error\":{\"resets_in_seconds\":1e85}}";
    json_value *doc = json_parse(j, strlen(j), NULL, 0);
    CHECK(usage_resets_in(doc) == USAGE_SECONDS_MAX);
    json_free(doc);
    j = "{\"error\":{\"resets_in_seconds\":-20}}";
    doc = json_parse(j, strlen(j), NULL, 0);
    CHECK(usage_resets_in(doc) == -1);
    json_free(doc);
    CHECK(usage_resets_in(NULL) == -1);
}

/* The usage endpoint's payload is as untrusted as the headers. */
static void test_usage_payload_figures_are_clamped(void)
{
    const char *body =
        "{\"rate_limit\":{\"primary_window\":{\"used_percent\":1e85,\"limit_window_seconds\":1e300,"
        "\"reset_at\":1e300},\"secondary_window\":{\"used_percent\":-5,\"reset_after_seconds\":1e85}},"
        "\"credits\":{\"balance\":\"nan\"}}";
    account_state st;
    memset(&st, 0, sizeof st);
    st.primary_used_pct = st.secondary_used_pct = -1;
    st.credits_balance = 3;
    CHECK_EQ_INT(usage_poll_apply(&st, body, strlen(body), 1000), 0);
    CHECK(st.primary_used_pct == 100);
    CHECK(st.primary_window_s == USAGE_SECONDS_MAX);
    CHECK(st.primary_reset_at == 1000 + USAGE_SECONDS_MAX);
    CHECK(st.secondary_used_pct == -1);
    CHECK(st.secondary_reset_at == 1000 + USAGE_SECONDS_MAX);
    CHECK(st.credits_balance == 3); /* "nan" is no number */
}

/* Limit families as Codex names them (codex-rs rate_limits.rs): the
 * header prefix after "x-", '-' as '_'; the main family's own headers are
 * not another family's, and a family's name may hold "secondary". */
static void test_family_headers_name_their_family_and_fill_its_windows(void)
{
    usage_windows w = USAGE_WINDOWS_UNKNOWN;
    char fam[ACCOUNT_FAMILY_MAX];
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-bengalfox-primary-used-percent", "80", 1000), 1);
    CHECK_EQ_STR(fam, "codex_bengalfox");
    CHECK(w.primary_used_pct == 80);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "X-Codex-BengalFox-Secondary-Reset-After-Seconds", "60",
                                     1000), 1);
    CHECK_EQ_STR(fam, "codex_bengalfox");
    CHECK(w.secondary_reset_at == 1060);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-secondary-primary-window-minutes", "15", 1000), 1);
    CHECK_EQ_STR(fam, "codex_secondary");
    CHECK(w.primary_window_s == 900);
    /* the main family's headers, another header of the family, bad values and names: none */
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-primary-used-percent", "80", 1000), 0);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-secondary-used-percent", "80", 1000), 0);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-bengalfox-limit-name", "GPT-5.3", 1000), 0);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-bengalfox-primary-used-percent", "1e999", 1000), 0);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam, "x-codex-b f-primary-used-percent", "1", 1000), 0);
    CHECK_EQ_INT(usage_family_header(&w, fam, sizeof fam,
                                     "x-codex-a-very-long-family-name-beyond-its-room-primary-used-percent", "1", 1000), 0);
    CHECK(w.primary_used_pct == 80);
    CHECK_EQ_INT(usage_family_name("Codex-Bengalfox", 15, fam, sizeof fam), 1);
    CHECK_EQ_STR(fam, "codex_bengalfox");
    CHECK_EQ_INT(usage_family_name("codex bengalfox", 15, fam, sizeof fam), 0);
    CHECK_EQ_INT(usage_family_name("", 0, fam, sizeof fam), 0);
    usage_windows m = USAGE_WINDOWS_UNKNOWN;
    CHECK_EQ_INT(usage_windows_apply(&m, "x-codex-primary-used-percent", "100", 1000), 1);
    CHECK(m.primary_used_pct == 100);
}

int main(void)
{
    RUN(test_family_headers_name_their_family_and_fill_its_windows);
    RUN(test_huge_token_count_is_capped_not_wrapped);
    RUN(test_clamp_int_never_casts_out_of_range);
    RUN(test_usage_object_with_1e85_tokens_is_clamped);
    RUN(test_usage_repeated_members_count_as_the_last_one);
    RUN(test_usage_cached_tokens_are_read_from_both_shapes_and_clamped);
    RUN(test_stream_usage_of_1e85_tokens_is_clamped);
    RUN(test_retry_after_header_is_strict_and_capped);
    RUN(test_usage_headers_are_clamped_into_range);
    RUN(test_resets_in_seconds_is_clamped);
    RUN(test_usage_payload_figures_are_clamped);
    return check_summary();
}
