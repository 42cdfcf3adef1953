/* test_text.c: outside values (text.h, and sbuf's UTF-8 helpers): control
 * characters refused at entry, escaped at output, cuts on character
 * boundaries, JSON strings always valid UTF-8. */
#include "check.h"
#include "base/json.h"
#include "base/sbuf.h"
#include "base/text.h"

static const char *escaped(sbuf *b, const char *s, const char *also)
{
    sbuf_reset(b);
    text_escape(b, s, strlen(s), also);
    return b->p ? b->p : "";
}

static void test_text_check_refuses_control_characters_and_invalid_utf8(void)
{
    CHECK(text_check_str("acct-1234") == NULL);
    CHECK(text_check_str("d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80") == NULL);
    CHECK(text_check_str(NULL) == NULL);
    CHECK_EQ_STR(text_check_str("acct\r\nX-Evil: 1"), "contains a control character");
    CHECK_EQ_STR(text_check_str("a\x1b[31m"), "contains a control character");
    CHECK_EQ_STR(text_check_str("tab\there"), "contains a control character");
    CHECK_EQ_STR(text_check_str("del\x7f"), "contains a control character");
    CHECK_EQ_STR(text_check_str("csi\xc2\x9b" "31m"), "contains a control character"); /* C1 CSI */
    CHECK_EQ_STR(text_check_str("cut\xc3"), "is not valid UTF-8");
    CHECK_EQ_STR(text_check_str("over\xc0\xaf"), "is not valid UTF-8");
    CHECK_EQ_STR(text_check_str("sur\xed\xa0\x80"), "is not valid UTF-8");
    CHECK_EQ_STR(text_check("nul\0x", 5), "contains a control character");
}

static void test_header_value_check_refuses_cr_lf_nul_and_controls_but_not_tab(void)
{
    CHECK(text_header_value_ok("acct-1"));
    CHECK(text_header_value_ok("a\tb"));
    CHECK(text_header_value_ok("caf\xc3\xa9"));
    CHECK(!text_header_value_ok("a\r\nX-Evil: 1"));
    CHECK(!text_header_value_ok("a\nb"));
    CHECK(!text_header_value_ok("a\rb"));
    CHECK(!text_header_value_ok("a\x01"));
    CHECK(!text_header_value_ok("a\x7f"));
    CHECK(!text_header_value_ok(NULL));
}

static void test_escape_shows_controls_and_bad_bytes_as_hex_and_keeps_characters(void)
{
    sbuf b = SBUF_INIT;
    CHECK_EQ_STR(escaped(&b, "gpt\nREQUEST_FINAL x", NULL), "gpt\\x0aREQUEST_FINAL x");
    CHECK_EQ_STR(escaped(&b, "a\r\x1b[2Jb", NULL), "a\\x0d\\x1b[2Jb");
    CHECK_EQ_STR(escaped(&b, "back\\slash", NULL), "back\\\\slash");
    CHECK_EQ_STR(escaped(&b, "caf\xc3\xa9 \xf0\x9f\x98\x80", NULL), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    CHECK_EQ_STR(escaped(&b, "cut\xc3", NULL), "cut\\xc3");
    CHECK_EQ_STR(escaped(&b, "\xc2\x9b" "31m", NULL), "\\xc2\\x9b31m");
    CHECK_EQ_STR(escaped(&b, "say \"x\"", "\""), "say \\x22x\\x22");
    CHECK_EQ_STR(escaped(&b, "say \"x\"", NULL), "say \"x\"");
    sbuf_reset(&b);
    text_escape(&b, "a\0b", 3, NULL);
    CHECK_EQ_STR(b.p, "a\\x00b");
    sbuf_free(&b);
}

static void test_plain_prefix_is_what_escape_copies_unchanged(void)
{
    CHECK(text_plain_prefix("gpt-bench", 9, "\"") == 9);
    CHECK(text_plain_prefix("say \"x\"", 7, "\"") == 4);
    CHECK(text_plain_prefix("say \"x\"", 7, NULL) == 7);
    CHECK(text_plain_prefix("a\\b", 3, NULL) == 1);
    CHECK(text_plain_prefix("ab\ncd", 5, NULL) == 2);
    CHECK(text_plain_prefix("a\x7f", 2, NULL) == 1);
    CHECK(text_plain_prefix("caf\xc3\xa9", 5, NULL) == 3); /* not ASCII: left to text_escape */
    CHECK(text_plain_prefix("a\0b", 3, NULL) == 1);
    /* whatever the bytes, the prefix comes out of text_escape as it went in */
    const char *cases[] = {"plain", "x\"y", "\x1b[2J", "back\\", "caf\xc3\xa9", "\xc2\x9b", ""};
    sbuf b = SBUF_INIT;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i]), k = text_plain_prefix(cases[i], n, "\"");
        sbuf_reset(&b);
        text_escape(&b, cases[i], n, "\"");
        CHECK(b.len >= k && memcmp(b.p ? b.p : "", cases[i], k) == 0);
    }
    sbuf_free(&b);
}

static void test_utf8_cut_never_ends_inside_a_character(void)
{
    const char *s = "ab\xe2\x82\xac" "cd"; /* a b € c d: € is bytes 2..4 */
    size_t n = strlen(s);
    CHECK_EQ_INT(sbuf_utf8_cut(s, n, 100), n);
    CHECK_EQ_INT(sbuf_utf8_cut(s, n, 2), 2);
    CHECK_EQ_INT(sbuf_utf8_cut(s, n, 3), 2);
    CHECK_EQ_INT(sbuf_utf8_cut(s, n, 4), 2);
    CHECK_EQ_INT(sbuf_utf8_cut(s, n, 5), 5);
    CHECK_EQ_INT(sbuf_utf8_cut("\xf0\x9f\x98\x80", 4, 3), 0);
    CHECK_EQ_INT(sbuf_utf8_cut("x\x80\x80\x80\x80y", 6, 4), 4); /* stray continuations: bytes, not a character */
    char dst[6];
    sbuf_copy_cstr(dst, sizeof dst, "abcd\xc3\xa9"); /* é would take bytes 4..5 of 5 */
    CHECK_EQ_STR(dst, "abcd");
    sbuf_copy_cstr(dst, sizeof dst, "abc\xc3\xa9z");
    CHECK_EQ_STR(dst, "abc\xc3\xa9");
    sbuf_copy_cstr(dst, sizeof dst, "ab\xe2\x82\xac");
    CHECK_EQ_STR(dst, "ab\xe2\x82\xac");
    /* every cut of a long mixed name is valid UTF-8 */
    const char *name = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    for (size_t cap = 1; cap <= strlen(name) + 1; cap++) {
        char out[64];
        sbuf_copy_cstr(out, cap, name);
        CHECK(text_check_str(out) == NULL);
    }
}

static void test_json_strings_are_valid_utf8_whatever_the_bytes(void)
{
    sbuf b = SBUF_INIT;
    const char in[] = "a\xc3" "b\xff\xed\xa0\x80\x7f" "caf\xc3\xa9";
    sbuf_json_str(&b, in, sizeof in - 1);
    CHECK_EQ_STR(b.p, "\"a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\u007fcaf\xc3\xa9\"");
    json_value *v = json_parse(b.p, b.len, NULL, 0);
    CHECK(v && v->type == JSON_STRING);
    json_free(v);
    sbuf_free(&b);
}

int main(void)
{
    RUN(test_text_check_refuses_control_characters_and_invalid_utf8);
    RUN(test_header_value_check_refuses_cr_lf_nul_and_controls_but_not_tab);
    RUN(test_escape_shows_controls_and_bad_bytes_as_hex_and_keeps_characters);
    RUN(test_plain_prefix_is_what_escape_copies_unchanged);
    RUN(test_utf8_cut_never_ends_inside_a_character);
    RUN(test_json_strings_are_valid_utf8_whatever_the_bytes);
    return check_summary();
}
