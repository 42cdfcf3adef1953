/* test_blobs.c: account-bound blobs in Responses API bodies (blobs.c):
 * finding them in answers and requests with their offsets, keys, rewriting
 * a request without them (commas, byte-for-byte copies, the text note), and
 * bad bodies that must be refused or scanned right, never crash. */
#include "check.h"
#include "base/json.h"
#include "upstream/blobs.h"
#include <stdlib.h>

/* Test bodies are written with ' for " (no ' in them otherwise). */
#define JQ_MAX 256
static char *jq_pool[JQ_MAX];
static int jq_n;

static const char *jq(const char *s)
{
    char *c = strdup(s);
    for (char *p = c; *p; p++)
        if (*p == '\'')
            *p = '"';
    if (jq_n == JQ_MAX)
        abort(); /* raise JQ_MAX */
    jq_pool[jq_n++] = c;
    return c;
}

static int parses(const char *s, size_t n)
{
    json_value *v = json_parse(s, n, NULL, 0);
    json_free(v);
    return v != NULL;
}

static size_t off_of(const char *body, const char *what)
{
    const char *p = strstr(body, what);
    return p ? (size_t)(p - body) : (size_t)-1;
}

static int key_is(const char *key, const char *value)
{
    char k[BLOBS_KEY_SIZE];
    blobs_key(value, strlen(value), k);
    return strcmp(key, k) == 0;
}

/* Scans body, sets the blobs' actions from acts ('K', 'D', 'T', one per blob
 * in order), rewrites with note "N"; returns the rewrite's result and the
 * text in out (empty when it wrote nothing). */
static int rewrite(const char *body, const char *acts, sbuf *out)
{
    blob_scan sc = {0};
    size_t len = strlen(body);
    int rc = blobs_scan(body, len, &sc);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(sc.n, strlen(acts));
    for (size_t i = 0; i < sc.n && acts[i]; i++)
        sc.v[i].action = acts[i] == 'D' ? BLOB_DROP : acts[i] == 'T' ? BLOB_TEXT : BLOB_KEEP;
    sbuf_reset(out);
    rc = blobs_rewrite(body, len, &sc, "N", out);
    if (rc > 0)
        CHECK(parses(out->p, out->len));
    blobs_scan_free(&sc);
    return rc;
}

typedef struct keys {
    int n;
    char k[8][BLOBS_KEY_SIZE];
} keys;

static void collect(void *ud, const char *key)
{
    keys *g = ud;
    if (g->n < 8)
        memcpy(g->k[g->n], key, BLOBS_KEY_SIZE);
    g->n++;
}

/* ---------- finding ---------- */

static void test_body_without_encrypted_content_is_not_parsed(void)
{
    blob_scan sc = {0};
    /* not JSON at all: a parse would refuse it (-1); without the name it is never parsed */
    const char *junk = "{\"input\":[{\"type\":\"reasoning\",\"summary\":[" ;
    CHECK_EQ_INT(blobs_scan(junk, strlen(junk), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    const char *plain = jq("{'model':'gpt-5','input':[{'type':'message','role':'user','content':'hi'}]}");
    CHECK_EQ_INT(blobs_scan(plain, strlen(plain), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    CHECK_EQ_INT(sc.items, 0); /* not walked */
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(blobs_rewrite(plain, strlen(plain), &sc, "N", &out), 0);
    CHECK_EQ_INT(out.len, 0);
    /* Codex asks for blobs in every request: the name inside that string is no member name */
    const char *asks = jq("{'include':['reasoning.encrypted_content'],'input':[{'type':'reasoning','summary':[");
    CHECK_EQ_INT(blobs_scan(asks, strlen(asks), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    blobs_scan_free(&sc);
}

static void test_reasoning_item_is_found_with_its_offsets(void)
{
    const char *item = jq("{'type':'reasoning','id':'rs_1','summary':[{'type':'summary_text','text':'t'}],"
                          "'encrypted_content':'gAAAAABreasoning1'}");
    char body[512];
    snprintf(body, sizeof body, "%s%s%s", jq("{'model':'gpt-5','input':[{'role':'user','content':'hi'}, "), item,
             jq(",{'type':'message','role':'assistant','content':[{'type':'output_text','text':'x'}]}],'store':false}"));
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.items, 3);
    CHECK_EQ_INT(sc.n, 1);
    if (sc.n == 1) {
        blob_ref *r = &sc.v[0];
        CHECK_EQ_STR(r->item_type, "reasoning");
        CHECK_EQ_INT(r->item, 1);
        CHECK_EQ_INT(r->in_part, 0);
        CHECK_EQ_INT(r->item_off, off_of(body, item));
        CHECK_EQ_INT(r->item_len, strlen(item));
        CHECK_EQ_INT(r->action, BLOB_KEEP);
        CHECK(key_is(r->key, "gAAAAABreasoning1"));
    }
    blobs_scan_free(&sc);
}

static void test_compaction_items_of_both_type_names_are_found(void)
{
    const char *body = jq("{'input':[{'type':'compaction','id':'cmp_1','encrypted_content':'c1'},"
                          "{'type':'compaction_summary','encrypted_content':'c2'},{'type':'message','content':'x'}]}");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 2);
    CHECK_EQ_INT(sc.items, 3);
    if (sc.n == 2) {
        CHECK_EQ_STR(sc.v[0].item_type, "compaction");
        CHECK_EQ_STR(sc.v[1].item_type, "compaction_summary");
        CHECK_EQ_INT(sc.v[1].item, 1);
        CHECK(key_is(sc.v[0].key, "c1"));
        CHECK(key_is(sc.v[1].key, "c2"));
    }
    blobs_scan_free(&sc);
}

static void test_parts_in_message_content_and_function_call_output_are_found(void)
{
    const char *p1 = jq("{'type':'encrypted_content','encrypted_content':'p1'}");
    const char *p2 = jq("{'encrypted_content':'p2','type':'encrypted_content'}");
    char body[512];
    snprintf(body, sizeof body, jq("{'input':[{'type':'message','role':'assistant','content':[{'type':'output_text',"
                                   "'text':'a'},%s]},{'type':'function_call_output','call_id':'c','output':[ %s ]}]}"),
             p1, p2);
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 2);
    if (sc.n == 2) {
        CHECK_EQ_INT(sc.v[0].in_part, 1);
        CHECK_EQ_INT(sc.v[0].item, 0);
        CHECK_EQ_STR(sc.v[0].item_type, "message");
        CHECK_EQ_INT(sc.v[0].part_off, off_of(body, p1));
        CHECK_EQ_INT(sc.v[0].part_len, strlen(p1));
        CHECK_EQ_INT(sc.v[0].item_off, off_of(body, "{\"type\":\"message\""));
        CHECK_EQ_INT(sc.v[1].in_part, 1);
        CHECK_EQ_INT(sc.v[1].item, 1);
        CHECK_EQ_STR(sc.v[1].item_type, "function_call_output");
        CHECK_EQ_INT(sc.v[1].part_off, off_of(body, p2));
        CHECK_EQ_INT(sc.v[1].part_len, strlen(p2));
        CHECK(key_is(sc.v[1].key, "p2"));
    }
    blobs_scan_free(&sc);
}

static void test_encrypted_content_that_is_not_a_string_is_not_a_blob(void)
{
    const char *body = jq("{'input':[{'type':'reasoning','encrypted_content':1},{'type':'reasoning','encrypted_content':null},"
                          "{'type':'reasoning','encrypted_content':{'encrypted_content':'inner'}},"
                          "{'type':'message','content':[{'type':'encrypted_content','encrypted_content':[]},"
                          "{'x':{'encrypted_content':'too deep'}}]},'encrypted_content']}");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    CHECK_EQ_INT(sc.items, 5);
    keys g = {0};
    const char *ans = jq("{'encrypted_content':1,'a':[{'encrypted_content':false},{'encrypted_content':{}}]}");
    CHECK_EQ_INT(blobs_minted(ans, strlen(ans), collect, &g), 0);
    CHECK_EQ_INT(g.n, 0);
    blobs_scan_free(&sc);
}

static void test_input_that_is_a_string_or_absent_has_no_blobs(void)
{
    const char *s = jq("{'input':'encrypted_content','instructions':{'encrypted_content':'x'}}");
    const char *a = jq("{'model':'m','metadata':{'x':[{'encrypted_content':'x'}]}}");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(s, strlen(s), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    CHECK_EQ_INT(blobs_scan(a, strlen(a), &sc), 0);
    CHECK_EQ_INT(sc.n, 0);
    blobs_scan_free(&sc);
}

static void test_repeated_input_counts_as_the_last_one(void)
{
    const char *body = jq("{'input':[{'type':'reasoning','encrypted_content':'first'}],"
                          "'input':[{'type':'message'},{'type':'reasoning','encrypted_content':'last'}]}");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    CHECK_EQ_INT(sc.items, 2);
    if (sc.n == 1) {
        CHECK(key_is(sc.v[0].key, "last"));
        CHECK_EQ_INT(sc.v[0].item, 1);
    }
    blobs_scan_free(&sc);
}

static void test_long_item_type_is_cut_on_a_character_boundary(void)
{
    /* 30 ASCII bytes, then "é" (2 bytes) would end at byte 32: no room for it and the NUL */
    const char *body = "{\"input\":[{\"type\":\"abcdefghijklmnopqrstuvwxyz0123\xc3\xa9z\",\"encrypted_content\":\"x\"},"
                       "{\"type\":\"\\u00e9t\\u00e9\",\"encrypted_content\":\"y\"}]}";
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 2);
    if (sc.n == 2) {
        CHECK_EQ_STR(sc.v[0].item_type, "abcdefghijklmnopqrstuvwxyz0123");
        CHECK_EQ_STR(sc.v[1].item_type, "\xc3\xa9t\xc3\xa9");
    }
    blobs_scan_free(&sc);
}

/* ---------- keys ---------- */

static void test_key_is_bl_and_32_hex_and_stable(void)
{
    char a[BLOBS_KEY_SIZE], b[BLOBS_KEY_SIZE];
    const char *v = "gAAAAABpZ3x1c2VydmFsdWUtLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0"
                    "tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0tLS0";
    blobs_key(v, strlen(v), a);
    blobs_key(v, strlen(v), b);
    CHECK_EQ_STR(a, b);
    CHECK_EQ_INT(strlen(a), BLOBS_KEY_SIZE - 1);
    CHECK(strncmp(a, "bl:", 3) == 0);
    int hex = 1;
    for (int i = 3; i < 35; i++)
        hex &= (a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f');
    CHECK(hex);
    blobs_key("", 0, b);
    CHECK(strcmp(a, b) != 0);
}

static void test_key_changes_with_one_byte_of_head_or_tail_or_the_length(void)
{
    char v[4000];
    for (size_t i = 0; i < sizeof v; i++)
        v[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[(i * 7 + i / 64) % 64];
    char base[BLOBS_KEY_SIZE], k[BLOBS_KEY_SIZE];
    blobs_key(v, sizeof v, base);
    size_t at[] = {0, 17, 63, sizeof v - 64, sizeof v - 1};
    for (size_t j = 0; j < sizeof at / sizeof at[0]; j++) {
        char saved = v[at[j]];
        v[at[j]] = saved == 'Q' ? 'R' : 'Q';
        blobs_key(v, sizeof v, k);
        CHECK(strcmp(k, base) != 0);
        v[at[j]] = saved;
    }
    blobs_key(v, sizeof v - 1, k);
    CHECK(strcmp(k, base) != 0);
    /* the middle is not hashed: the documented choice (IV at the head, HMAC at the tail) */
    v[2000] = v[2000] == 'Q' ? 'R' : 'Q';
    blobs_key(v, sizeof v, k);
    CHECK_EQ_STR(k, base);
}

static void test_escaped_strings_hash_equal_to_the_unescaped_value(void)
{
    const char *body = "{\"input\":[{\"type\":\"reasoning\",\"encrypted_content\":\"\\u0041BC\\/x\\ud83d\\ude00\\\"\\n\"}]}";
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    if (sc.n == 1)
        CHECK(key_is(sc.v[0].key, "ABC/x\xf0\x9f\x98\x80\"\n"));
    /* escapes in a long value's head and tail, and in its middle (length) */
    char raw[600], dec[600];
    size_t r = 0, d = 0;
    for (int i = 0; i < 300; i++) {
        if (i == 3 || i == 150 || i == 290) {
            memcpy(raw + r, "\\/", 2);
            r += 2;
            dec[d++] = '/';
        } else if (i == 5) {
            memcpy(raw + r, "\\u00e9", 6); /* 6 raw bytes, 2 decoded */
            r += 6;
            memcpy(dec + d, "\xc3\xa9", 2);
            d += 2;
        } else {
            raw[r++] = (char)('a' + i % 26);
            dec[d++] = (char)('a' + i % 26);
        }
    }
    char b2[800], want[BLOBS_KEY_SIZE];
    snprintf(b2, sizeof b2, "{\"input\":[{\"encrypted_content\":\"%.*s\"}]}", (int)r, raw);
    blobs_key(dec, d, want);
    CHECK_EQ_INT(blobs_scan(b2, strlen(b2), &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    if (sc.n == 1)
        CHECK_EQ_STR(sc.v[0].key, want);
    /* a lone surrogate decodes as json_parse decodes it: U+FFFD */
    const char *lone = "{\"input\":[{\"encrypted_content\":\"a\\ud800b\"}]}";
    CHECK_EQ_INT(blobs_scan(lone, strlen(lone), &sc), 0);
    json_value *v = json_parse(lone, strlen(lone), NULL, 0);
    const char *s = json_get_str(json_at(json_get(v, "input"), 0), "encrypted_content");
    CHECK(s != NULL);
    if (sc.n == 1 && s)
        CHECK(key_is(sc.v[0].key, s));
    json_free(v);
    blobs_scan_free(&sc);
}

/* ---------- answers ---------- */

static void test_minted_blobs_of_an_sse_event_and_of_a_full_response(void)
{
    keys g = {0};
    const char *ev = jq("{'type':'response.output_item.done','output_index':0,'sequence_number':7,"
                        "'item':{'id':'rs_1','type':'reasoning','summary':[],'encrypted_content':'gAAAAAev'}}");
    CHECK_EQ_INT(blobs_minted(ev, strlen(ev), collect, &g), 1);
    CHECK_EQ_INT(g.n, 1);
    CHECK(key_is(g.k[0], "gAAAAAev"));
    const char *full = jq("{\"id\":\"resp_1\",\"object\":\"response\",'output':[{'type':'reasoning','id':'rs_2',"
                          "'encrypted_content':'r2','summary':[{'type':'summary_text','text':'encrypted_content'}]},"
                          "{'type':'compaction','encrypted_content':'c3'},{'type':'message','content':[{'type':"
                          "'encrypted_content','encrypted_content':'p4'},{'type':'output_text','text':'hi'}]},"
                          "{'type':'reasoning','encrypted_content':null}],'usage':{'input_tokens':1}}");
    g.n = 0;
    CHECK_EQ_INT(blobs_minted(full, strlen(full), collect, &g), 3);
    CHECK_EQ_INT(g.n, 3);
    CHECK(key_is(g.k[0], "r2"));
    CHECK(key_is(g.k[1], "c3"));
    CHECK(key_is(g.k[2], "p4"));
    /* response.completed wraps the response */
    char done[2048];
    snprintf(done, sizeof done, "{\"type\":\"response.completed\",\"response\":%s}", full);
    g.n = 0;
    CHECK_EQ_INT(blobs_minted(done, strlen(done), collect, &g), 3);
}

static void test_minted_on_malformed_text_reports_what_came_before_the_error(void)
{
    keys g = {0};
    const char *cut = jq("{'output':[{'encrypted_content':'one'},{'encrypted_content':'two'},{'encrypted_content':'thr");
    CHECK_EQ_INT(blobs_minted(cut, strlen(cut), collect, &g), 2);
    g.n = 0;
    CHECK_EQ_INT(blobs_minted("no blobs here {", 15, collect, &g), 0);
    CHECK_EQ_INT(g.n, 0);
    /* 10 000 levels: stops at the depth limit */
    size_t n = 20000;
    char *deep = malloc(n + 64);
    strcpy(deep, "{\"encrypted_content\":\"a\",\"x\":");
    size_t at = strlen(deep);
    memset(deep + at, '[', n);
    g.n = 0;
    CHECK_EQ_INT(blobs_minted(deep, at + n, collect, &g), 1);
    free(deep);
}

/* ---------- rewriting ---------- */

#define R(i) "{'type':'reasoning','id':'rs_" #i "','summary':[],'encrypted_content':'gAAAA" #i "'}"
#define M(i) "{'type':'message','role':'user','content':'m" #i "'}"

static void test_drop_first_middle_last_items_keeps_the_rest_byte_for_byte(void)
{
    /* irregular whitespace on purpose: it must come through as it is */
    const char *body = jq("{'model':'gpt-5', 'input': [ " R(1) " ,\n  " M(1) ",\t" R(2) ",  " M(2) " , " R(3) "\n] ,'x':1}");
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(rewrite(body, "DKK", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'model':'gpt-5', 'input': [ " M(1) ",\t" R(2) ",  " M(2) " , " R(3) "\n] ,'x':1}"));
    CHECK_EQ_INT(rewrite(body, "KDK", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'model':'gpt-5', 'input': [ " R(1) " ,\n  " M(1) ",\t" M(2) " , " R(3) "\n] ,'x':1}"));
    CHECK_EQ_INT(rewrite(body, "KKD", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'model':'gpt-5', 'input': [ " R(1) " ,\n  " M(1) ",\t" R(2) ",  " M(2) " \n] ,'x':1}"));
    CHECK_EQ_INT(rewrite(body, "DDD", &out), 3);
    CHECK_EQ_STR(out.p, jq("{'model':'gpt-5', 'input': [ " M(1) ",\t" M(2) " \n] ,'x':1}"));
    sbuf_free(&out);
}

static void test_drop_adjacent_and_all_items_gives_valid_json(void)
{
    sbuf out = SBUF_INIT;
    const char *all = jq("{'input':[" R(1) "," R(2) ", " R(3) "]}");
    CHECK_EQ_INT(rewrite(all, "DDD", &out), 3);
    CHECK_EQ_STR(out.p, jq("{'input':[]}"));
    const char *tail = jq("{'input':[" M(1) "," R(1) "," R(2) "]}");
    CHECK_EQ_INT(rewrite(tail, "DD", &out), 2);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "]}"));
    const char *head = jq("{'input':[" R(1) "," R(2) "," M(1) "," R(3) "]}");
    CHECK_EQ_INT(rewrite(head, "DDD", &out), 3);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "]}"));
    const char *one = jq("{'input':[ " R(1) " ]}");
    CHECK_EQ_INT(rewrite(one, "D", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[  ]}"));
    const char *spread = jq("{'input':[" R(1) "," M(1) "," R(2) "," R(3) "," M(2) "," R(4) "]}");
    CHECK_EQ_INT(rewrite(spread, "DKDD", &out), 3);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "," R(2) "," M(2) "]}"));
    sbuf_free(&out);
}

static void test_all_blobs_kept_writes_nothing(void)
{
    const char *body = jq("{'input':[" R(1) "," R(2) "]}");
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "before");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "N", &out), 0);
    CHECK_EQ_STR(out.p, "before");
    blobs_scan_free(&sc);
    sbuf_free(&out);
}

static void test_text_replaces_the_item_or_the_part_with_the_note(void)
{
    sbuf out = SBUF_INIT;
    const char *body = jq("{'input':[" M(1) "," R(1) "]}");
    CHECK_EQ_INT(rewrite(body, "T", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) ",{'type':'message','role':'user','content':[{'type':'input_text',"
                           "'text':'N'}]}]}"));
    const char *parts = jq("{'input':[{'type':'function_call_output','call_id':'c','output':[{'type':'input_text',"
                           "'text':'a'},{'type':'encrypted_content','encrypted_content':'e1'}]}]}");
    CHECK_EQ_INT(rewrite(parts, "T", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[{'type':'function_call_output','call_id':'c','output':[{'type':'input_text',"
                           "'text':'a'},{'type':'input_text','text':'N'}]}]}"));
    /* the note is escaped; bytes that are not UTF-8 become U+FFFD, the characters stay */
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    sc.v[0].action = BLOB_TEXT;
    sbuf_reset(&out);
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "say \"hi\"\n\xff\xc3\xa9", &out), 1);
    CHECK(strstr(out.p, "\"text\":\"say \\\"hi\\\"\\n\xef\xbf\xbd\xc3\xa9\"") != NULL);
    CHECK(parses(out.p, out.len));
    sbuf_reset(&out);
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "d\xc3\xa9j\xc3\xa0", &out), 1);
    CHECK(strstr(out.p, "\"text\":\"d\xc3\xa9j\xc3\xa0\"") != NULL);
    blobs_scan_free(&sc);
    sbuf_free(&out);
}

static void test_parts_are_dropped_one_by_one_and_all_of_them(void)
{
    sbuf out = SBUF_INIT;
    const char *body = jq("{'input':[{'type':'message','role':'assistant','content':[ {'type':'encrypted_content',"
                          "'encrypted_content':'a'} , {'type':'output_text','text':'t'},{'type':'encrypted_content',"
                          "'encrypted_content':'b'},{'type':'encrypted_content','encrypted_content':'c'}]}]}");
    CHECK_EQ_INT(rewrite(body, "DKD", &out), 2);
    CHECK_EQ_STR(out.p, jq("{'input':[{'type':'message','role':'assistant','content':[ {'type':'output_text',"
                           "'text':'t'},{'type':'encrypted_content','encrypted_content':'b'}]}]}"));
    const char *only = jq("{'input':[{'type':'function_call_output','output':[{'encrypted_content':'a'},"
                          "{'encrypted_content':'b'}]}," M(1) "]}");
    CHECK_EQ_INT(rewrite(only, "DD", &out), 2);
    CHECK_EQ_STR(out.p, jq("{'input':[{'type':'function_call_output','output':[]}," M(1) "]}"));
    sbuf_free(&out);
}

static void test_several_blobs_in_one_item_take_the_strongest_action(void)
{
    sbuf out = SBUF_INIT;
    /* an item-level blob and a part: the item goes whole, DROP over TEXT over KEEP */
    const char *mixed = jq("{'input':[" M(1) ",{'type':'reasoning','encrypted_content':'a','content':"
                           "[{'type':'encrypted_content','encrypted_content':'b'}]}]}");
    CHECK_EQ_INT(rewrite(mixed, "KD", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "]}"));
    CHECK_EQ_INT(rewrite(mixed, "TD", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "]}"));
    CHECK_EQ_INT(rewrite(mixed, "TK", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) ",{'type':'message','role':'user','content':[{'type':'input_text',"
                           "'text':'N'}]}]}"));
    /* two names in one item (a repeated member): one item changed */
    const char *twice = jq("{'input':[{'type':'reasoning','encrypted_content':'a','encrypted_content':'b'}," M(1) "]}");
    CHECK_EQ_INT(rewrite(twice, "KD", &out), 1);
    CHECK_EQ_STR(out.p, jq("{'input':[" M(1) "]}"));
    /* all in parts: each part on its own, TEXT and DROP side by side */
    const char *parts = jq("{'input':[{'type':'message','content':[{'encrypted_content':'a'},{'encrypted_content':'b'},"
                           "{'encrypted_content':'c'}]}]}");
    CHECK_EQ_INT(rewrite(parts, "TDK", &out), 2);
    CHECK_EQ_STR(out.p, jq("{'input':[{'type':'message','content':[{'type':'input_text','text':'N'},"
                           "{'encrypted_content':'c'}]}]}"));
    sbuf_free(&out);
}

static void test_rewrite_refuses_a_scan_of_another_body(void)
{
    const char *body = jq("{'input':[" M(1) "," R(1) "]}");
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, strlen(body), &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    sc.v[0].action = BLOB_DROP;
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body) - 1, &sc, "N", &out), -1);
    const char *other = jq("{'input':[" R(1) "," M(1) "]}"); /* same length, other offsets */
    CHECK_EQ_INT(blobs_rewrite(other, strlen(other), &sc, "N", &out), -1);
    sc.v[0].item_len += 5;
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "N", &out), -1);
    sc.v[0].item_len -= 5;
    sc.v[0].action = 7;
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "N", &out), -1);
    CHECK_EQ_INT(out.len, 0);
    sc.v[0].action = BLOB_DROP;
    CHECK_EQ_INT(blobs_rewrite(body, strlen(body), &sc, "N", &out), 1);
    blobs_scan_free(&sc);
    sbuf_free(&out);
}

/* ---------- bad bodies ---------- */

static void test_truncated_bodies_and_trailing_garbage_are_refused(void)
{
    const char *body = jq("{'input':[" M(1) "," R(1) ",{'type':'message','content':[{'encrypted_content':'\\u00e9x'}]}]}");
    size_t len = strlen(body);
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(body, len, &sc), 0);
    CHECK_EQ_INT(sc.n, 2);
    int all_refused = 1;
    for (size_t n = 0; n < len; n++) {
        int rc = blobs_scan(body, n, &sc);
        /* without the name a prefix is not parsed (0); with it, never well-formed */
        int has = memmem(body, n, "\"encrypted_content\"", 19) != NULL;
        all_refused &= has ? rc == -1 && sc.n == 0 : rc == 0;
    }
    CHECK(all_refused);
    const char *bad[] = {
        "{\"input\":[{\"encrypted_content\":\"x\"}]} x", "{\"input\":[{\"encrypted_content\":\"x\"}],}",
        "{\"input\":[{\"encrypted_content\":\"x\"},]}",
        "{\"input\":[{\"encrypted_content\":\"x\x01\"}]}", "{\"input\":[{\"encrypted_content\":\"\\x\"}]}",
        "{\"input\":[{\"encrypted_content\":\"\xc0\xaf\"}]}", "{\"input\":[{\"encrypted_content\":01}]}",
        "{\"input\":[{\"encrypted_content\":\"x\"}]}{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(blobs_scan(bad[i], strlen(bad[i]), &sc), -1);
        CHECK(!parses(bad[i], strlen(bad[i])));
    }
    /* JSON, but not an object */
    const char *not_object[] = {"[{\"encrypted_content\":\"x\"}]", "\"encrypted_content\"", " null \"encrypted_content\""};
    for (size_t i = 0; i < sizeof not_object / sizeof not_object[0]; i++)
        CHECK_EQ_INT(blobs_scan(not_object[i], strlen(not_object[i]), &sc), -1);
    blobs_scan_free(&sc);
}

static char *nested(size_t levels, size_t *len)
{
    /* {"input":[{"type":"reasoning","encrypted_content":"x","deep":[[[...]]]}]} */
    const char *head = "{\"input\":[{\"type\":\"reasoning\",\"encrypted_content\":\"x\",\"deep\":";
    size_t h = strlen(head);
    char *s = malloc(h + 2 * levels + 8);
    memcpy(s, head, h);
    memset(s + h, '[', levels);
    memset(s + h + levels, ']', levels);
    memcpy(s + h + 2 * levels, "}]}", 4);
    *len = h + 2 * levels + 3;
    return s;
}

static void test_nesting_deeper_than_64_levels_is_refused(void)
{
    blob_scan sc = {0};
    size_t len;
    /* the arrays sit inside 3 containers (root, input, item) */
    char *s = nested(61, &len);
    CHECK_EQ_INT(blobs_scan(s, len, &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    free(s);
    s = nested(62, &len);
    CHECK_EQ_INT(blobs_scan(s, len, &sc), -1);
    CHECK(parses(s, len)); /* json_parse allows 128: the limit is this module's */
    free(s);
    s = nested(10000, &len);
    CHECK_EQ_INT(blobs_scan(s, len, &sc), -1);
    free(s);
    blobs_scan_free(&sc);
}

static void test_100000_items_pass_and_one_more_is_refused(void)
{
    const char *item = "{\"type\":\"reasoning\",\"encrypted_content\":\"x\"},";
    const char *plain = "1,";
    for (int extra = 0; extra < 2; extra++) {
        sbuf b = SBUF_INIT;
        sbuf_puts(&b, "{\"input\":[");
        sbuf_puts(&b, item);
        for (int i = 1; i < BLOBS_MAX_ITEMS + extra; i++)
            sbuf_puts(&b, plain);
        b.p[--b.len] = '\0';
        sbuf_puts(&b, "]}");
        blob_scan sc = {0};
        int rc = blobs_scan(b.p, b.len, &sc);
        CHECK_EQ_INT(rc, extra ? -1 : 0);
        CHECK_EQ_INT(sc.items, extra ? 0 : BLOBS_MAX_ITEMS);
        CHECK_EQ_INT(sc.n, extra ? 0 : 1);
        blobs_scan_free(&sc);
        sbuf_free(&b);
    }
}

static void test_10000_blobs_pass_and_one_more_is_refused(void)
{
    for (int extra = 0; extra < 2; extra++) {
        sbuf b = SBUF_INIT;
        sbuf_puts(&b, "{\"input\":[");
        for (int i = 0; i < BLOBS_MAX_BLOBS + extra; i++)
            sbuf_printf(&b, "%s{\"type\":\"reasoning\",\"encrypted_content\":\"b%d\"}", i ? "," : "", i);
        sbuf_puts(&b, "]}");
        blob_scan sc = {0};
        CHECK_EQ_INT(blobs_scan(b.p, b.len, &sc), extra ? -1 : 0);
        CHECK_EQ_INT(sc.n, extra ? 0 : BLOBS_MAX_BLOBS);
        if (!extra && sc.n == BLOBS_MAX_BLOBS) {
            for (size_t i = 0; i < sc.n; i++)
                sc.v[i].action = BLOB_DROP;
            sbuf out = SBUF_INIT;
            CHECK_EQ_INT(blobs_rewrite(b.p, b.len, &sc, "N", &out), BLOBS_MAX_BLOBS);
            CHECK_EQ_STR(out.p, "{\"input\":[]}");
            sbuf_free(&out);
        }
        blobs_scan_free(&sc);
        sbuf_free(&b);
    }
}

static void test_huge_blob_is_scanned_and_keyed_by_its_ends(void)
{
    size_t n = 20u << 20; /* 20 MiB */
    const char *head = "{\"input\":[{\"type\":\"reasoning\",\"encrypted_content\":\"";
    size_t h = strlen(head);
    char *s = malloc(h + n + 8);
    memcpy(s, head, h);
    for (size_t i = 0; i < n; i++)
        s[h + i] = (char)('A' + i % 26);
    memcpy(s + h + n, "\"}]}", 5);
    size_t len = h + n + 4;
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(s, len, &sc), 0);
    CHECK_EQ_INT(sc.n, 1);
    char want[BLOBS_KEY_SIZE];
    blobs_key(s + h, n, want);
    if (sc.n == 1) {
        CHECK_EQ_STR(sc.v[0].key, want);
        CHECK_EQ_INT(sc.v[0].item_len, len - strlen("{\"input\":[") - 2);
    }
    keys g = {0};
    CHECK_EQ_INT(blobs_minted(s, len, collect, &g), 1);
    CHECK_EQ_STR(g.k[0], want);
    CHECK_EQ_INT(blobs_scan(s, h + n, &sc), -1); /* the closing quote cut: unterminated */
    blobs_scan_free(&sc);
    free(s);
}

/* ---------- the quick look ---------- */

static void test_quick_look_finds_the_keys_the_scan_finds(void)
{
    const char *b = jq("{'model':'m','include':['reasoning.encrypted_content'],'input':["
                       "{'type':'reasoning','id':'rs_1','summary':[],'encrypted_content':'gAAAAAone'},"
                       "{'type':'message','role':'user','content':'hi'},"
                       "{'type':'function_call_output','call_id':'c','output':[{'type':'encrypted_content',"
                       "'encrypted_content' : 'gAAAAAtwo'}]}]}");
    keys g = {0};
    CHECK_EQ_INT(blobs_quick(b, strlen(b), collect, &g), 2);
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(b, strlen(b), &sc), 0);
    CHECK_EQ_INT((int)sc.n, 2);
    CHECK_EQ_STR(g.k[0], sc.v[0].key);
    CHECK_EQ_STR(g.k[1], sc.v[1].key);
    blobs_scan_free(&sc);
}

static void test_quick_look_without_the_token_finds_nothing(void)
{
    const char *b = jq("{'include':['reasoning.encrypted_content'],'input':'hi'}");
    keys g = {0};
    CHECK_EQ_INT(blobs_quick(b, strlen(b), collect, &g), 0);
    CHECK_EQ_INT(g.n, 0);
}

static void test_quick_look_is_unsure_of_escapes_other_types_and_cut_bodies(void)
{
    const char *esc = "{\"input\":[{\"encrypted_content\":\"gAAA\\u0041\"}]}";
    const char *num = jq("{'input':[{'encrypted_content':12}]}");
    const char *cut = jq("{'input':[{'encrypted_content':'gAAAA");
    CHECK_EQ_INT(blobs_quick(esc, strlen(esc), NULL, NULL), -1);
    CHECK_EQ_INT(blobs_quick(num, strlen(num), NULL, NULL), -1);
    CHECK_EQ_INT(blobs_quick(cut, strlen(cut), NULL, NULL), -1);
}

static void test_quick_look_may_see_a_token_inside_a_member_name_which_only_costs_a_scan(void)
{
    /* a member named `note \"encrypted_content`: the token's bytes appear,
     * followed by a colon; the quick look counts it (the caller then scans),
     * the scan finds no blob */
    const char *b = "{\"input\":[{\"role\":\"user\",\"content\":\"hi\",\"note \\\"encrypted_content\":\"x\"}]}";
    CHECK(parses(b, strlen(b)));
    CHECK_EQ_INT(blobs_quick(b, strlen(b), NULL, NULL), 1);
    blob_scan sc = {0};
    CHECK_EQ_INT(blobs_scan(b, strlen(b), &sc), 0);
    CHECK_EQ_INT((int)sc.n, 0);
    blobs_scan_free(&sc);
}

int main(void)
{
    RUN(test_body_without_encrypted_content_is_not_parsed);
    RUN(test_reasoning_item_is_found_with_its_offsets);
    RUN(test_compaction_items_of_both_type_names_are_found);
    RUN(test_parts_in_message_content_and_function_call_output_are_found);
    RUN(test_encrypted_content_that_is_not_a_string_is_not_a_blob);
    RUN(test_input_that_is_a_string_or_absent_has_no_blobs);
    RUN(test_repeated_input_counts_as_the_last_one);
    RUN(test_long_item_type_is_cut_on_a_character_boundary);
    RUN(test_key_is_bl_and_32_hex_and_stable);
    RUN(test_key_changes_with_one_byte_of_head_or_tail_or_the_length);
    RUN(test_escaped_strings_hash_equal_to_the_unescaped_value);
    RUN(test_minted_blobs_of_an_sse_event_and_of_a_full_response);
    RUN(test_minted_on_malformed_text_reports_what_came_before_the_error);
    RUN(test_drop_first_middle_last_items_keeps_the_rest_byte_for_byte);
    RUN(test_drop_adjacent_and_all_items_gives_valid_json);
    RUN(test_all_blobs_kept_writes_nothing);
    RUN(test_text_replaces_the_item_or_the_part_with_the_note);
    RUN(test_parts_are_dropped_one_by_one_and_all_of_them);
    RUN(test_several_blobs_in_one_item_take_the_strongest_action);
    RUN(test_rewrite_refuses_a_scan_of_another_body);
    RUN(test_truncated_bodies_and_trailing_garbage_are_refused);
    RUN(test_nesting_deeper_than_64_levels_is_refused);
    RUN(test_100000_items_pass_and_one_more_is_refused);
    RUN(test_10000_blobs_pass_and_one_more_is_refused);
    RUN(test_huge_blob_is_scanned_and_keyed_by_its_ends);
    RUN(test_quick_look_finds_the_keys_the_scan_finds);
    RUN(test_quick_look_without_the_token_finds_nothing);
    RUN(test_quick_look_is_unsure_of_escapes_other_types_and_cut_bodies);
    RUN(test_quick_look_may_see_a_token_inside_a_member_name_which_only_costs_a_scan);
    for (int i = 0; i < jq_n; i++)
        free(jq_pool[i]);
    return check_summary();
}
