/* test_json.c: the strict JSON parser (grammar edge cases, escapes and
 * surrogates, depth limit, error offsets), accessors, json_set_str and the
 * compact serializer, including a multi-megabyte document. */
#include "check.h"
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include "base/json.h"
#include <stdlib.h>
#include <time.h>

static json_value *parse(const char *s)
{
    char err[160];
    return json_parse(s, strlen(s), err, sizeof err);
}

/* Parses s and serializes it back; "!" when parsing fails. */
static char *round_trip(const char *s)
{
    static char out[4096];
    json_value *v = parse(s);
    if (!v)
        return strcpy(out, "!");
    sbuf b = SBUF_INIT;
    json_write(&b, v);
    snprintf(out, sizeof out, "%s", b.p);
    sbuf_free(&b);
    json_free(v);
    return out;
}

static void test_scalars_and_nesting_parse(void)
{
    json_value *v = parse(" {\"a\": [1, -2.5, true, false, null, \"x\"], \"b\": {}} ");
    CHECK(v && v->type == JSON_OBJECT);
    CHECK_EQ_INT(v->count, 2);
    json_value *a = json_get(v, "a");
    CHECK(a && a->type == JSON_ARRAY);
    CHECK_EQ_INT(a->count, 6);
    CHECK(json_at(a, 0)->num == 1);
    CHECK(json_at(a, 1)->num == -2.5);
    CHECK(json_at(a, 2)->type == JSON_TRUE);
    CHECK(json_at(a, 3)->type == JSON_FALSE);
    CHECK(json_at(a, 4)->type == JSON_NULL);
    CHECK_EQ_STR(json_at(a, 5)->str, "x");
    CHECK(json_at(a, 6) == NULL);
    CHECK(json_get(v, "b")->type == JSON_OBJECT);
    CHECK_EQ_INT(json_get(v, "b")->count, 0);
    CHECK_EQ_STR(json_get(v, "b")->key, "b");
    json_free(v);
}

static void test_all_simple_escapes_decoded(void)
{
    json_value *v = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\"");
    CHECK(v && v->type == JSON_STRING);
    CHECK_EQ_STR(v->str, "q\" b\\ s/ \b\f\n\r\t");
    CHECK_EQ_INT(v->str_len, strlen("q\" b\\ s/ \b\f\n\r\t"));
    json_free(v);
}

static void test_unicode_escapes_become_utf8(void)
{
    json_value *v = parse("\"\\u0041\\u00e9\\u20AC\\u0000z\"");
    CHECK(v != NULL);
    CHECK_EQ_INT(v->str_len, 8);
    CHECK(v && memcmp(v->str, "A\xc3\xa9\xe2\x82\xac\0z", 8) == 0);
    json_free(v);
}

static void test_surrogate_pair_becomes_four_byte_utf8(void)
{
    json_value *v = parse("\"\\ud83d\\ude00\"");
    CHECK(v != NULL);
    CHECK_EQ_STR(v->str, "\xf0\x9f\x98\x80");
    json_free(v);
    v = parse("\"\\uDBFF\\uDFFF\""); /* U+10FFFF */
    CHECK_EQ_STR(v->str, "\xf4\x8f\xbf\xbf");
    json_free(v);
}

static void test_lone_surrogates_become_replacement_char(void)
{
    json_value *v = parse("[\"\\ud800\", \"\\ude00x\", \"\\ud800\\u0041\", \"\\ud800\\ud800\"]");
    CHECK(v != NULL);
    CHECK_EQ_STR(json_at(v, 0)->str, "\xef\xbf\xbd");
    CHECK_EQ_STR(json_at(v, 1)->str, "\xef\xbf\xbdx");
    CHECK_EQ_STR(json_at(v, 2)->str, "\xef\xbf\xbd" "A");
    CHECK_EQ_STR(json_at(v, 3)->str, "\xef\xbf\xbd\xef\xbf\xbd");
    json_free(v);
}

static void test_raw_utf8_accepted(void)
{
    json_value *v = parse("{\"k\xc3\xa9\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}");
    CHECK(v != NULL);
    CHECK_EQ_STR(json_get_str(v, "k\xc3\xa9"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    json_free(v);
}

static void test_escaped_key_decoded(void)
{
    json_value *v = parse("{\"a\\u0062\\n\":1}");
    CHECK(v && json_get(v, "ab\n") != NULL);
    json_free(v);
}

static char *nested(int depth, const char *open, const char *close)
{
    sbuf b = SBUF_INIT;
    for (int i = 0; i < depth; i++)
        sbuf_puts(&b, open);
    sbuf_puts(&b, "1");
    for (int i = 0; i < depth; i++)
        sbuf_puts(&b, close);
    return b.p;
}

static void test_depth_128_accepted_129_rejected(void)
{
    char err[160] = "";
    char *ok = nested(128, "[", "]"), *bad = nested(129, "[", "]");
    json_value *v = json_parse(ok, strlen(ok), err, sizeof err);
    CHECK(v != NULL);
    json_free(v);
    CHECK(json_parse(bad, strlen(bad), err, sizeof err) == NULL);
    CHECK(strstr(err, "nesting") != NULL);
    CHECK(strstr(err, "offset 128") != NULL);
    free(ok);
    free(bad);
    char *obj = nested(129, "{\"a\":", "}");
    CHECK(json_parse(obj, strlen(obj), err, sizeof err) == NULL);
    free(obj);
    char *deep = nested(100000, "[", "]"); /* must not blow the stack */
    CHECK(json_parse(deep, strlen(deep), err, sizeof err) == NULL);
    free(deep);
}

/* json_scan_value accepts exactly what json_parse accepts (the whole
 * document: whitespace, one value, whitespace, the end). */
static int scan_accepts(const char *s, size_t n)
{
    size_t i = json_scan_ws(s, n, 0);
    size_t e = json_scan_value(s, n, i, 0);
    return e && json_scan_ws(s, n, e) == n;
}

static void test_scan_agrees_with_parse(void)
{
    static const char *const cases[] = {
        "", " ", "{", "[", "]", "}", "[1,]", "{\"a\":1,}", "[,1]", "{,}", "[1 2]", "{\"a\" 1}",
        "{\"a\":1 \"b\":2}", "{a:1}", "{'a':1}", "{\"a\"}", "{\"a\":}", "{1:2}",
        "01", "-01", "00", "1.", ".5", "1e", "1e+", "+1", "-", "1.e5", "0x10", "1e400", "-1e400",
        "NaN", "Infinity", "nul", "tru", "falsey", "True", "\"abc", "\"a\x01" "b\"", "\"\t\"",
        "\"\\x\"", "\"\\u12G4\"", "\"\\u123\"", "\"\\", "\"\\U0041\"", "\"\xff\"", "\"\xc0\xaf\"",
        "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xc3\"", "\"\x80\"", "1 2",
        "[] x", "{} {}", "\"a\"\"b\"", "[1]]", "/* c */ 1", "[1,\n]", "\v1", "\f1",
        "0", "-0", " 1 ", "\t\r\n1\n", "0.5e-3", "1E+2", "-0.0", "123456789012345678901234567890",
        "1e-400", "[]", "{}", "\"\"", "[[[]]]", "{\"\":0}", "{\"a\":{\"b\":[null,true,false]}}",
        "{\"a\":1,\"a\":2}", "\"\\/\"", "\"\x7f\"", "\"\\ud83d\\ude00 \\udc00 \\u00e9\"",
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "{ \"k\" : [ 1 , -2.5e+3 , \"\\\"\" ] }",
        "9999999999999999", "1" "000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i]);
        json_value *v = json_parse(cases[i], n, NULL, 0);
        if ((v != NULL) != scan_accepts(cases[i], n))
            fprintf(stderr, "  input #%zu \"%s\": parse %s, scan disagrees\n", i, cases[i], v ? "accepts" : "rejects");
        CHECK_EQ_INT(v != NULL, scan_accepts(cases[i], n));
        json_free(v);
    }
    char *ok = nested(128, "[", "]"), *bad = nested(129, "{\"a\":", "}");
    CHECK(scan_accepts(ok, strlen(ok)));
    CHECK(!scan_accepts(bad, strlen(bad)));
    CHECK_EQ_INT(json_scan_value("[1]", 3, 0, 127), 3);  /* one more level: 128 */
    CHECK_EQ_INT(json_scan_value("[1]", 3, 0, 128), 0);  /* 129 */
    CHECK_EQ_INT(json_scan_value("1\0", 2, 0, 0), 1);   /* where the value ends, not the input */
    free(ok);
    free(bad);
    char *deep = nested(100000, "[", "]"); /* must not blow the stack */
    CHECK(!scan_accepts(deep, strlen(deep)));
    free(deep);
    /* strings are scanned eight bytes at a time: every special byte at
     * every place in a long string, and every length around a word */
    static const char *const special[] = {"\x01", "\x1f", "\x20", "\x7f", "\x80", "\xc3\xa9", "\xc3", "\\n", "\\",
                                          "\"", "\\u00e9", "\\u00g9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80"};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        for (size_t at = 0; at < 24; at++) {
            char doc[64];
            int n = snprintf(doc, sizeof doc, "\"%.*s%s%.*s\"", (int)at, "abcdefghijklmnopqrstuvwxyz", special[k],
                             (int)(23 - at), "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
            for (int cut = 0; cut < 2; cut++) { /* whole, and without its closing quote */
                json_value *v = json_parse(doc, (size_t)(n - cut), NULL, 0);
                CHECK_EQ_INT(v != NULL, scan_accepts(doc, (size_t)(n - cut)));
                json_free(v);
            }
        }
}

static void test_invalid_inputs_rejected_with_offset(void)
{
    static const char *const bad[] = {
        "", " ", "{", "[", "]", "}", "[1,]", "{\"a\":1,}", "[,1]", "{,}", "[1 2]", "{\"a\" 1}",
        "{\"a\":1 \"b\":2}", "{a:1}", "{'a':1}", "{\"a\"}", "{\"a\":}", "{1:2}",
        "01", "-01", "00", "1.", ".5", "1e", "1e+", "+1", "-", "1.e5", "0x10", "1e400", "-1e400",
        "NaN", "Infinity", "-Infinity", "nul", "tru", "falsey", "True", "undefined",
        "\"abc", ("\"a\x01" "b\""), "\"\t\"", "\"\n\"", "\"\\x\"", "\"\\u12G4\"", "\"\\u123\"", "\"\\",
        "\"\\U0041\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xc3\"", "\"\x80\"", "1 2", "[] x", "{} {}", "\"a\"\"b\"",
        "[1]]", "\xef\xbb\xbf{}", "/* c */ 1", "[1,\n]", "\v1", "\f1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[160] = "";
        json_value *v = json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        if (v || strncmp(err, "offset ", 7) != 0)
            fprintf(stderr, "  input #%zu \"%s\" accepted or no offset (%s)\n", i, bad[i], err);
        CHECK(v == NULL);
        CHECK(strncmp(err, "offset ", 7) == 0);
        json_free(v);
    }
}

static void test_error_message_names_byte_offset(void)
{
    char err[160];
    CHECK(json_parse("[1,]", 4, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 3: trailing comma in array");
    CHECK(json_parse("{\"a\":1,}", 8, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 7: trailing comma in object");
    CHECK(json_parse("  007", 5, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 2: leading zero in number");
    CHECK(json_parse("{} x", 4, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 3: trailing data after the document");
    CHECK(json_parse("[\"ab\x01\"]", 6, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 4: control character in string");
    CHECK(json_parse("\"\\q\"", 4, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 1: invalid escape");
    CHECK(json_parse("[", 1, err, sizeof err) == NULL);
    CHECK_EQ_STR(err, "offset 1: unexpected end of input, expected a value");
    CHECK(json_parse("1\0", 2, err, sizeof err) == NULL); /* an embedded NUL is garbage */
    CHECK_EQ_STR(err, "offset 1: trailing data after the document");
    CHECK(json_parse("[1,2", 4, NULL, 0) == NULL); /* no error buffer is fine */
    char tiny[8];
    CHECK(json_parse("[1,]", 4, tiny, sizeof tiny) == NULL);
    CHECK_EQ_INT(strlen(tiny), 7);
}

static void test_valid_edge_inputs_accepted(void)
{
    static const char *const good[] = {
        "0", "-0", " 1 ", "\t\r\n1\n", "0.5e-3", "1E+2", "1e2", "-0.0", "123456789012345678901234567890",
        "1e-400", "[]", "{}", "\"\"", "[[[]]]", "{\"\":0}", "{\"a\":{\"b\":[null,true,false]}}",
        "{\"a\":1,\"a\":2}", "\"\\/\"", "\"\x7f\"",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char err[160] = "";
        json_value *v = json_parse(good[i], strlen(good[i]), err, sizeof err);
        if (!v)
            fprintf(stderr, "  input \"%s\" rejected: %s\n", good[i], err);
        CHECK(v != NULL);
        json_free(v);
    }
}

static void test_number_values(void)
{
    json_value *v = parse("[0, -0, 42, -17, 1.5, 2e3, 1E-2, 123456789012345, 12345678901234567890, 0.1]");
    CHECK(v != NULL);
    CHECK(json_at(v, 0)->num == 0);
    CHECK(json_at(v, 2)->num == 42);
    CHECK(json_at(v, 3)->num == -17);
    CHECK(json_at(v, 4)->num == 1.5);
    CHECK(json_at(v, 5)->num == 2000);
    CHECK(json_at(v, 6)->num == 0.01);
    CHECK(json_at(v, 7)->num == 123456789012345.0);
    CHECK(json_at(v, 8)->num == 12345678901234567890.0);
    CHECK(json_at(v, 9)->num == 0.1);
    json_free(v);
}

/* The parser must not read past len, even for a number or literal at the end. */
static void test_input_without_nul_terminator(void)
{
    static const char *const docs[] = {"12", "1234567890123456789", "-0.25e1", "true", "\"x\""};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        size_t n = strlen(docs[i]);
        char *b = malloc(n);
        memcpy(b, docs[i], n);
        json_value *v = json_parse(b, n, NULL, 0);
        CHECK(v != NULL);
        json_free(v);
        free(b);
    }
    json_value *v = json_parse("123", 2, NULL, 0);
    CHECK(v && v->num == 12);
    json_free(v);
}

/* The string scanner skips plain bytes four at a time: a quote, an escape,
 * a control character or a UTF-8 sequence is found at every position of
 * strings of every length around that step, and a string cut off by the
 * end of an input without a NUL after it is unterminated. */
static void test_string_special_bytes_found_at_every_position(void)
{
    for (size_t n = 0; n < 14; n++) {
        for (size_t at = 0; at <= n; at++) {
            /* a string of n 'a's with one special thing at `at` */
            static const char *const things[] = {"\\n", "\\\"", "\xc3\xa9", "\x01", "\xff"};
            static const char *const decoded[] = {"\n", "\"", "\xc3\xa9", NULL, NULL};
            for (size_t t = 0; t < sizeof things / sizeof *things; t++) {
                char doc[64], want[64];
                size_t k = 0, w = 0;
                doc[k++] = '"';
                for (size_t i = 0; i < n; i++) {
                    if (i == at) {
                        memcpy(doc + k, things[t], strlen(things[t]));
                        k += strlen(things[t]);
                        if (decoded[t]) {
                            memcpy(want + w, decoded[t], strlen(decoded[t]));
                            w += strlen(decoded[t]);
                        }
                    }
                    doc[k++] = 'a';
                    want[w++] = 'a';
                }
                doc[k++] = '"';
                want[w] = '\0';
                char *b = malloc(k); /* no NUL after the input */
                memcpy(b, doc, k);
                json_value *v = json_parse(b, k, NULL, 0);
                if (at < n && decoded[t])
                    CHECK(v && v->type == JSON_STRING && v->str_len == w && memcmp(v->str, want, w) == 0);
                else if (at < n)
                    CHECK(v == NULL); /* a raw control byte or an invalid UTF-8 byte */
                else
                    CHECK(v && v->type == JSON_STRING && v->str_len == n); /* nothing special inserted */
                json_free(v);
                CHECK(json_parse(b, k - 1, NULL, 0) == NULL); /* the closing quote cut off */
                free(b);
                /* the same string with bytes after it (in an array), so that
                 * eight-byte steps reach past its closing quote */
                char arr[96];
                int an = snprintf(arr, sizeof arr, "[%.*s,12345678901234567]", (int)k, doc);
                v = json_parse(arr, (size_t)an, NULL, 0);
                if (at < n && !decoded[t])
                    CHECK(v == NULL);
                else
                    CHECK(v && v->child && v->child->type == JSON_STRING &&
                          v->child->str_len == (at < n ? w : n) && memcmp(v->child->str, want, v->child->str_len) == 0);
                json_free(v);
            }
        }
    }
}

static void test_round_trip_compact(void)
{
    CHECK_EQ_STR(round_trip(" { \"a\" : [ 1 , 2.5 , true , null ] , \"b\" : \"x\\ny\" , \"c\" : { } } "),
                 "{\"a\":[1,2.5,true,null],\"b\":\"x\\ny\",\"c\":{}}");
    CHECK_EQ_STR(round_trip("\"\\u0001\\u001f\\\"\\\\\\/\""), "\"\\u0001\\u001f\\\"\\\\/\"");
    CHECK_EQ_STR(round_trip("\"\\ud83d\\ude00\""), "\"\xf0\x9f\x98\x80\"");
    CHECK_EQ_STR(round_trip("\"\\u0000\""), "\"\\u0000\"");
    CHECK_EQ_STR(round_trip("[[],[{}],[[1]]]"), "[[],[{}],[[1]]]");
    /* writing the written form again is a fixed point */
    const char *once = "{\"model\":\"gpt\",\"input\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}],\"t\":0.7}";
    char first[512];
    snprintf(first, sizeof first, "%s", round_trip(once));
    CHECK_EQ_STR(round_trip(first), first);
    CHECK_EQ_STR(first, "{\"model\":\"gpt\",\"input\":[{\"role\":\"user\",\"content\":\"h\xc3\xa9\"}],\"t\":0.7}");
}

static void test_numbers_written_as_integers_when_integral(void)
{
    CHECK_EQ_STR(round_trip("[1.0, 1e15, -3, 2e0, 9007199254740991, 0, -0]"),
                 "[1,1000000000000000,-3,2,9007199254740991,0,-0]");
    CHECK_EQ_STR(round_trip("[9007199254740992, 1e300, 0.1, 1.5e-7, 3.141592653589793]"),
                 "[9007199254740992,1e+300,0.1,1.5e-07,3.141592653589793]");
    json_value *v = parse("[0.30000000000000004, 1.7976931348623157e308, 5e-324]");
    sbuf b = SBUF_INIT;
    json_write(&b, v);
    json_value *back = parse(b.p);
    CHECK(back != NULL);
    for (size_t i = 0; i < 3; i++)
        CHECK(json_at(back, i)->num == json_at(v, i)->num);
    json_free(v);
    json_free(back);
    sbuf_free(&b);
}

static void test_set_str_replaces_member_in_place(void)
{
    json_value *v = parse("{\"model\":\"a\",\"stream\":true}");
    CHECK_EQ_INT(json_set_str(v, "model", "b\"c"), 0);
    sbuf b = SBUF_INIT;
    json_write(&b, v);
    CHECK_EQ_STR(b.p, "{\"model\":\"b\\\"c\",\"stream\":true}");
    CHECK_EQ_INT(v->count, 2);
    /* replacing a non-string member turns it into a string */
    json_value *w = parse("{\"model\":{\"x\":[1,2]},\"n\":1}");
    CHECK_EQ_INT(json_set_str(w, "model", "m"), 0);
    sbuf_reset(&b);
    json_write(&b, w);
    CHECK_EQ_STR(b.p, "{\"model\":\"m\",\"n\":1}");
    json_free(v);
    json_free(w);
    sbuf_free(&b);
}

static void test_set_str_appends_missing_member(void)
{
    json_value *v = parse("{\"a\":1}");
    CHECK_EQ_INT(json_set_str(v, "model", "gpt-5"), 0);
    CHECK_EQ_STR(json_get_str(v, "model"), "gpt-5");
    CHECK_EQ_INT(v->count, 2);
    json_value *e = parse("{}");
    CHECK_EQ_INT(json_set_str(e, "k", ""), 0);
    sbuf b = SBUF_INIT;
    json_write(&b, v);
    CHECK_EQ_STR(b.p, "{\"a\":1,\"model\":\"gpt-5\"}");
    sbuf_reset(&b);
    json_write(&b, e);
    CHECK_EQ_STR(b.p, "{\"k\":\"\"}");
    json_free(v);
    json_free(e);
    sbuf_free(&b);
}

static void test_set_str_on_non_object_fails(void)
{
    json_value *v = parse("[1]");
    CHECK_EQ_INT(json_set_str(v, "a", "b"), -1);
    CHECK_EQ_INT(json_set_str(NULL, "a", "b"), -1);
    json_free(v);
}

static void test_set_str_value_may_alias_old_value(void)
{
    json_value *v = parse("{\"model\":\"same\"}");
    CHECK_EQ_INT(json_set_str(v, "model", json_get_str(v, "model")), 0);
    CHECK_EQ_STR(json_get_str(v, "model"), "same");
    json_free(v);
}

static void test_duplicate_keys_last_wins_and_set_dedups(void)
{
    json_value *v = parse("{\"model\":\"a\",\"x\":1,\"model\":\"b\"}");
    CHECK_EQ_STR(json_get_str(v, "model"), "b");
    CHECK_EQ_INT(json_set_str(v, "model", "c"), 0);
    sbuf b = SBUF_INIT;
    json_write(&b, v);
    CHECK_EQ_STR(b.p, "{\"x\":1,\"model\":\"c\"}");
    CHECK_EQ_INT(v->count, 2);
    json_free(v);
    sbuf_free(&b);
}

static void test_accessors_check_types(void)
{
    json_value *v = parse("{\"s\":\"x\",\"n\":3,\"t\":true,\"f\":false,\"z\":null}");
    CHECK(json_get_str(v, "n") == NULL);
    CHECK_EQ_STR(json_get_str(v, "s"), "x");
    CHECK(json_get_str(v, "missing") == NULL);
    CHECK_EQ_INT(json_get_bool(v, "t", 7), 1);
    CHECK_EQ_INT(json_get_bool(v, "f", 7), 0);
    CHECK_EQ_INT(json_get_bool(v, "z", 7), 7);
    CHECK_EQ_INT(json_get_bool(v, "s", 7), 7);
    CHECK(json_get_num(v, "n", -1) == 3);
    CHECK(json_get_num(v, "s", -1) == -1);
    CHECK(json_get(json_get(v, "s"), "x") == NULL);
    CHECK(json_get(NULL, "x") == NULL);
    CHECK(json_at(json_get(v, "n"), 0) == NULL);
    CHECK(json_get_str(NULL, "x") == NULL);
    json_free(v);
    json_free(NULL);
}

/* A several-MB request body: must parse and serialize in well under a second. */
static void test_large_document_is_linear(void)
{
    sbuf in = SBUF_INIT;
    sbuf_puts(&in, "{\"model\":\"m\",\"input\":[");
    for (int i = 0; i < 100000; i++)
        sbuf_printf(&in, "%s{\"role\":\"user\",\"content\":\"message %d with \\\"escapes\\\" \\u00e9\",\"n\":%d.5}",
                    i ? "," : "", i, i);
    sbuf_puts(&in, "],\"big\":\"");
    for (int i = 0; i < 200000; i++)
        sbuf_puts(&in, "abcdefghij\\n");
    sbuf_puts(&in, "\"}");
    CHECK(in.len > 8u << 20);
    clock_t t0 = clock();
    char err[160] = "";
    json_value *v = json_parse(in.p, in.len, err, sizeof err);
    CHECK(v != NULL);
    CHECK_EQ_INT(json_get(v, "input")->count, 100000);
    CHECK_EQ_INT(json_get(v, "big")->str_len, 200000 * 11);
    json_set_str(v, "model", "other");
    sbuf out = SBUF_INIT;
    json_write(&out, v);
    json_value *back = json_parse(out.p, out.len, err, sizeof err);
    CHECK(back != NULL);
    CHECK_EQ_STR(json_get_str(back, "model"), "other");
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (secs > 5)
        fprintf(stderr, "  large document took %.2f s\n", secs);
    CHECK(secs < 5); /* generous: sanitizer builds are slow */
    json_free(v);
    json_free(back);
    sbuf_free(&in);
    sbuf_free(&out);
}

/* json_set_str takes its strings from the document's arena: many
 * replacements, longer than any chunk, keep every member readable. */
static void test_set_str_repeatedly_grows_the_arena(void)
{
    const char *doc = "{\"model\":\"m\",\"n\":1}";
    json_value *v = json_parse(doc, strlen(doc), NULL, 0);
    CHECK(v != NULL);
    sbuf val = SBUF_INIT;
    for (int i = 0; i < 2000; i++) {
        sbuf_reset(&val);
        for (int k = 0; k <= i % 70; k++)
            sbuf_puts(&val, "0123456789");
        sbuf_printf(&val, "#%d", i);
        CHECK_EQ_INT(json_set_str(v, i % 2 ? "model" : "extra", val.p), 0);
        CHECK_EQ_STR(json_get_str(v, i % 2 ? "model" : "extra"), val.p);
    }
    CHECK_EQ_INT(v->count, 3);
    CHECK_EQ_INT(json_get_num(v, "n", 0), 1);
    sbuf out = SBUF_INIT;
    json_write(&out, v);
    json_value *back = json_parse(out.p, out.len, NULL, 0);
    CHECK(back != NULL);
    CHECK_EQ_STR(json_get_str(back, "model"), json_get_str(v, "model"));
    json_free(back);
    json_free(v);
    sbuf_free(&val);
    sbuf_free(&out);
}


static void test_shallow_parse_keeps_top_level_and_validates_everything(void)
{
    const char *in = "{\"model\":\"m\",\"input\":[{\"a\":[1,2,{\"b\":\"x\"}]},\"s\"],\"stream\":true}";
    json_value *d = json_parse_shallow(in, strlen(in), 1, NULL, 0);
    CHECK(d != NULL);
    CHECK_EQ_STR(json_get_str(d, "model"), "m");
    CHECK_EQ_INT(json_get_bool(d, "stream", 0), 1);
    json_value *inp = json_get(d, "input");
    CHECK(inp && inp->type == JSON_ARRAY);
    CHECK_EQ_INT(inp ? inp->count : 0, 2);
    CHECK(inp && inp->child == NULL); /* dropped */
    json_free(d);
    const char *bad = "{\"input\":[{\"a\":[1,2,]}]}"; /* the error is deep: still found */
    char err[128];
    CHECK(json_parse_shallow(bad, strlen(bad), 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "trailing comma") != NULL);
}

/* json_parse_members builds the named top-level members (to the depth
 * asked, the last of a repeated one winning in json_get) and nothing of the
 * others, which are still validated to the last byte: escapes, UTF-8,
 * numbers and nesting in them are checked as json_parse would. */
static void test_members_parse_builds_named_members_and_validates_the_rest(void)
{
    static const char *const keys[] = {"usage", "id"};
    const char *in = "{\"id\":\"a\",\"choices\":[{\"message\":{\"content\":\"x\\n\\u00e9\xc3\xa9\",\"n\":-1.5e3}},"
                     "true,null],\"usage\":{\"total_tokens\":7,\"details\":{\"cached\":2}},\"id\":\"b\"}";
    json_value *d = json_parse_members(in, strlen(in), 3, keys, 2);
    CHECK(d != NULL);
    CHECK_EQ_STR(json_get_str(d, "id"), "b");
    CHECK(json_get(d, "choices") == NULL); /* not built */
    json_value *u = json_get(d, "usage");
    CHECK(u && json_get(u, "total_tokens") && json_get(u, "total_tokens")->num == 7);
    json_value *det = u ? json_get(u, "details") : NULL;
    CHECK(det && json_get(det, "cached") && json_get(det, "cached")->num == 2);
    json_free(d);
    static const char *const bad[] = {
        "{\"choices\":[\"\\x\"],\"usage\":{}}",          /* bad escape in a dropped member */
        "{\"choices\":[\"\xff\"],\"usage\":{}}",          /* bad UTF-8 */
        "{\"choices\":[\"a\x01\"],\"usage\":{}}",         /* raw control character */
        "{\"choices\":[01],\"usage\":{}}",                /* leading zero */
        "{\"choices\":{\"a\":[1,]},\"usage\":{}}",         /* trailing comma, nested */
        "{\"choices\":[\"unterminated],\"usage\":{}}",
        "{\"choices\":1e999,\"usage\":{}}",               /* out of range */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(json_parse_members(bad[i], strlen(bad[i]), 3, keys, 2) == NULL);
        CHECK(json_parse(bad[i], strlen(bad[i]), NULL, 0) == NULL); /* the same verdict as a full parse */
    }
}

/* A body of 2 MiB of [0,0,...] kept whole would take 1 M nodes of 64 bytes;
 * shallow, the arena must stay within a few chunks. */
static void test_shallow_parse_of_a_huge_array_allocates_little(void)
{
    size_t n = 1u << 20;
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"input\":[");
    for (size_t i = 0; i < n; i++)
        sbuf_puts(&b, i ? ",0" : "0");
    sbuf_puts(&b, "]}");
    struct mallinfo2 before = mallinfo2();
    json_value *d = json_parse_shallow(b.p, b.len, 1, NULL, 0);
    struct mallinfo2 during = mallinfo2();
    CHECK(d != NULL);
    CHECK_EQ_INT(d ? json_get(d, "input")->count : 0, n);
    size_t grown = during.uordblks + during.hblkhd - before.uordblks - before.hblkhd;
    CHECK(grown < (256u << 10));
    json_free(d);
    sbuf_free(&b);
}

static void test_member_span_finds_the_top_level_value_bytes(void)
{
    const char *in = "{ \"x\": {\"model\": 1}, \"model\" : \"gpt\\u0031\" , \"z\":[]}";
    size_t a, e;
    CHECK_EQ_INT(json_member_span(in, strlen(in), "model", &a, &e), 0);
    CHECK(e > a && strncmp(in + a, "\"gpt\\u0031\"", e - a) == 0);
    CHECK_EQ_INT(json_member_span(in, strlen(in), "nope", &a, &e), -1);
    CHECK_EQ_INT(json_member_span("[1]", 3, "model", &a, &e), -1);
}

static void test_error_members_write_the_openai_error_shape_escaped(void)
{
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{");
    json_error_members(&b, "a \"quoted\"\nline", "invalid_request_error", NULL);
    sbuf_puts(&b, "}");
    CHECK_EQ_STR(b.p, "{\"message\":\"a \\\"quoted\\\"\\nline\",\"type\":\"invalid_request_error\",\"code\":null}");
    json_value *v = json_parse(b.p, b.len, NULL, 0);
    CHECK(v && strcmp(json_get_str(v, "message"), "a \"quoted\"\nline") == 0);
    json_free(v);
    sbuf_reset(&b);
    json_error_members(&b, "m", "t", "c");
    CHECK_EQ_STR(b.p, "\"message\":\"m\",\"type\":\"t\",\"code\":\"c\"");
    sbuf_free(&b);
}

/* an outside number becomes an integer only when it is finite and fits: 1e300, NaN and the
 * edges of int64 are refused, never cast (a cast out of range is undefined) */
static void test_num_to_int64_refuses_what_does_not_fit(void)
{
    int64_t v = 42;
    CHECK(json_num_to_int64(1e300, INT64_MIN, INT64_MAX, &v) == -1);
    CHECK(json_num_to_int64(-1e300, INT64_MIN, INT64_MAX, &v) == -1);
    CHECK(json_num_to_int64(NAN, INT64_MIN, INT64_MAX, &v) == -1);
    CHECK(json_num_to_int64(INFINITY, INT64_MIN, INT64_MAX, &v) == -1);
    CHECK(json_num_to_int64(9223372036854775808.0, INT64_MIN, INT64_MAX, &v) == -1);
    CHECK_EQ_INT(v, 42); /* untouched on a refusal */
    CHECK(json_num_to_int64(-9223372036854775808.0, INT64_MIN, INT64_MAX, &v) == 0);
    CHECK(v == INT64_MIN);
    CHECK(json_num_to_int64(3e9, INT32_MIN, INT32_MAX, &v) == -1);
    CHECK(json_num_to_int64(-7.9, -10, 10, &v) == 0 && v == -7); /* truncated toward zero */
    CHECK(json_num_to_int64(10.5, -10, 10, &v) == 0 && v == 10);
    CHECK(json_num_to_int64(11, -10, 10, &v) == -1);
    json_value *doc = json_parse("{\"a\":1e300,\"b\":\"7\",\"c\":7}", 25, NULL, 0);
    CHECK(doc != NULL);
    CHECK(json_get_int64(doc, "a", 0, 100, &v) == -1);
    CHECK(json_get_int64(doc, "b", 0, 100, &v) == -1);
    CHECK(json_get_int64(doc, "missing", 0, 100, &v) == -1);
    CHECK(json_get_int64(doc, "c", 0, 100, &v) == 0 && v == 7);
    json_free(doc);
}

int main(void)
{
    RUN(test_error_members_write_the_openai_error_shape_escaped);
    RUN(test_shallow_parse_keeps_top_level_and_validates_everything);
    RUN(test_shallow_parse_of_a_huge_array_allocates_little);
    RUN(test_member_span_finds_the_top_level_value_bytes);
    RUN(test_string_special_bytes_found_at_every_position);
    RUN(test_members_parse_builds_named_members_and_validates_the_rest);
    RUN(test_scalars_and_nesting_parse);
    RUN(test_all_simple_escapes_decoded);
    RUN(test_unicode_escapes_become_utf8);
    RUN(test_surrogate_pair_becomes_four_byte_utf8);
    RUN(test_lone_surrogates_become_replacement_char);
    RUN(test_raw_utf8_accepted);
    RUN(test_escaped_key_decoded);
    RUN(test_depth_128_accepted_129_rejected);
    RUN(test_invalid_inputs_rejected_with_offset);
    RUN(test_scan_agrees_with_parse);
    RUN(test_error_message_names_byte_offset);
    RUN(test_valid_edge_inputs_accepted);
    RUN(test_number_values);
    RUN(test_input_without_nul_terminator);
    RUN(test_round_trip_compact);
    RUN(test_numbers_written_as_integers_when_integral);
    RUN(test_set_str_replaces_member_in_place);
    RUN(test_set_str_appends_missing_member);
    RUN(test_set_str_on_non_object_fails);
    RUN(test_set_str_value_may_alias_old_value);
    RUN(test_duplicate_keys_last_wins_and_set_dedups);
    RUN(test_accessors_check_types);
    RUN(test_large_document_is_linear);
    RUN(test_set_str_repeatedly_grows_the_arena);
    RUN(test_num_to_int64_refuses_what_does_not_fit);
    return check_summary();
}
