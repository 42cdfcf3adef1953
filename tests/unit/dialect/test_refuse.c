/* test_refuse.c: filling a dialect_error and reading the rules' name lists
 * (dialect/refuse.c): what a client's odd names can do to them. */
#include "check.h"
#include "dialect_check.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"

static void test_a_refusal_is_a_400_with_its_code_param_and_message(void)
{
    dialect_error err;
    memset(&err, 0, sizeof err);
    refuse_param(&err, "messages[%zu].content[%zu].type", (size_t)3, (size_t)1);
    CHECK_EQ_INT(refuse_set(&err, REFUSE_UNSUPPORTED, "'%s' is out", err.param), -1);
    CHECK_EQ_INT(err.status, 400);
    CHECK_EQ_STR(err.param, "messages[3].content[1].type");
    CHECK_EQ_STR(err.code, "unsupported_parameter");
    CHECK_EQ_STR(err.message, "'messages[3].content[1].type' is out");
    CHECK_EQ_INT(refuse_set(NULL, REFUSE_MISSING, "x"), -1); /* no error to fill: still -1 */
    refuse_param(NULL, "x");
}

static void test_a_long_message_is_cut_on_a_character_boundary(void)
{
    dialect_error err;
    sbuf long_text = SBUF_INIT;
    for (int i = 0; i < 400; i++)
        sbuf_puts(&long_text, "\xc3\xa9"); /* é: two bytes each */
    refuse_set(&err, REFUSE_INVALID_VALUE, "%s", long_text.p);
    size_t n = strlen(err.message);
    CHECK(n < sizeof err.message && n >= sizeof err.message - 2);
    CHECK_EQ_INT(n % 2, 0);
    for (size_t i = 0; i < n; i += 2)
        CHECK_EQ_INT(sbuf_utf8_len(err.message + i, n - i), 2);
    refuse_param(&err, "%s", long_text.p);
    CHECK_EQ_INT(strlen(err.param) % 2, 0);
    sbuf_free(&long_text);
}

static void test_a_quoted_name_has_no_control_characters_and_fits(void)
{
    char q[8];
    CHECK_EQ_STR(refuse_quote(q, sizeof q, "a\nb\x1b[c"), "a?b?[c");
    CHECK_EQ_STR(refuse_quote(q, sizeof q, "abcdefghij"), "abcdefg");
    CHECK_EQ_STR(refuse_quote(q, sizeof q, NULL), "");
}

static void test_lists_match_whole_names_only(void)
{
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "tools.web_search");
    rules_add(r.ignore, &r.n_ignore, "n");
    memset(r.ignore[2], 'x', POLICY_DIALECT_NAME_MAX); /* a row without its NUL */
    r.n_ignore = 3;
    CHECK_EQ_INT(refuse_ignores(&r, "n"), 1);
    CHECK_EQ_INT(refuse_ignores(&r, "tools"), 0);
    CHECK_EQ_INT(refuse_ignores2(&r, "tools.", "web_search"), 1);
    CHECK_EQ_INT(refuse_ignores2(&r, "tools.", "web_search_preview"), 0);
    char xs[POLICY_DIALECT_NAME_MAX + 1];
    memset(xs, 'x', sizeof xs - 1);
    xs[sizeof xs - 1] = '\0';
    CHECK_EQ_INT(refuse_ignores(&r, xs), 0);
    xs[POLICY_DIALECT_NAME_MAX - 1] = '\0';
    CHECK_EQ_INT(refuse_ignores(&r, xs), 0);
    CHECK_EQ_INT(refuse_ignores(NULL, "n"), 0);
    r.n_ignore = 1000; /* a count past the rows reads no further than they go */
    CHECK_EQ_INT(refuse_ignores(&r, "nothing"), 0);
}

int main(void)
{
    RUN(test_a_refusal_is_a_400_with_its_code_param_and_message);
    RUN(test_a_long_message_is_cut_on_a_character_boundary);
    RUN(test_a_quoted_name_has_no_control_characters_and_fits);
    RUN(test_lists_match_whole_names_only);
    return check_summary();
}
