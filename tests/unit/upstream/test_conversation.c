/* test_conversation.c: replaying a stored conversation on another account
 * (conversation.c): the rebuilt body, the limits and bad input, and what
 * is recorded of a relayed request and its response. */
#include "check.h"
#include "base/json.h"
#include "upstream/conversation.h"

#define TURN(id, prev, in, out) {(char *)(id), 1, (char *)(prev), (char *)(in), sizeof(in) - 1, (char *)(out), \
                                 sizeof(out) - 1, 0}

static int test_rebuild(const conv_link *chain, size_t n, const char *body, sbuf *out, char *err, size_t errlen)
{
    err[0] = '\0';
    return conversation_rebuild(chain, n, body, strlen(body), out, err, errlen);
}

/* 1 when err holds the words want. */
static int test_err_has(const char *err, const char *want)
{
    if (strstr(err, want))
        return 1;
    fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", err, want);
    return 0;
}

/* ---------- the rebuild ---------- */

static void test_rebuild_turns_a_string_input_into_a_user_message_after_the_chain(void)
{
    conv_link chain[] = {TURN("resp_1", NULL, "[{\"role\":\"user\",\"content\":\"hi\"}]",
                              "[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
                              "\"content\":[{\"type\":\"output_text\",\"text\":\"hello\",\"annotations\":[]}]}]")};
    sbuf out = SBUF_INIT;
    char err[256];
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"model\":\"gpt-5\",\"previous_response_id\":\"resp_1\",\"input\":\"and you?\"}",
                              &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p, "{\"model\":\"gpt-5\",\"input\":[{\"role\":\"user\",\"content\":\"hi\"},"
                        "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
                        "\"content\":[{\"type\":\"output_text\",\"text\":\"hello\",\"annotations\":[]}]},"
                        "{\"type\":\"message\",\"role\":\"user\",\"content\":\"and you?\"}]}");
    sbuf_free(&out);
}

/* Three turns with tool calls and reasoning: every turn's input then its
 * output, oldest first, then the request's own items; every item as it was
 * written (unknown types and fields, numbers, whitespace inside). */
static void test_rebuild_of_a_three_turn_chain_keeps_every_item_in_order_byte_for_byte(void)
{
    conv_link chain[] = {
        TURN("resp_a", NULL, "[{\"type\":\"message\",\"role\":\"developer\",\"content\":\"be brief\"}, {\"role\":\"user\",\"content\":\"weather?\"}]",
             "[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"gAAA\"},"
             "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"wx\",\"arguments\":\"{}\"}]"),
        TURN("resp_b", "resp_a", "[{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"12.50\"}]",
             "[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"12.5\"}]}]"),
        TURN("resp_c", "resp_b", "[{\"type\":\"future_item\",\"x\":1.10,\"big\":12345678901234567890123, \"deep\":{\"a\":[1, 2]}}]",
             "[]"),
    };
    sbuf out = SBUF_INIT;
    char err[256];
    const char *body = "{\"previous_response_id\":\"resp_c\",\"input\":[{\"role\":\"user\",\"content\":\"thanks\"}],"
                       "\"stream\":true}";
    CHECK_EQ_INT(test_rebuild(chain, 3, body, &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p,
                 "{\"input\":[{\"type\":\"message\",\"role\":\"developer\",\"content\":\"be brief\"},"
                 "{\"role\":\"user\",\"content\":\"weather?\"},"
                 "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"gAAA\"},"
                 "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"wx\",\"arguments\":\"{}\"},"
                 "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"12.50\"},"
                 "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"12.5\"}]},"
                 "{\"type\":\"future_item\",\"x\":1.10,\"big\":12345678901234567890123, \"deep\":{\"a\":[1, 2]}},"
                 "{\"role\":\"user\",\"content\":\"thanks\"}],\"stream\":true}");
    json_value *doc = json_parse(out.p, out.len, NULL, 0);
    CHECK(doc != NULL);
    CHECK(json_get(doc, "previous_response_id") == NULL);
    CHECK_EQ_INT(json_get(doc, "input") ? json_get(doc, "input")->count : 0, 8);
    json_free(doc);
    sbuf_free(&out);
}

/* Every other member stays where it was with its bytes (escapes, spacing
 * inside values, unknown members); the members around the input too. */
static void test_rebuild_keeps_every_other_member_in_order_and_as_written(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[1]", "[2]")};
    sbuf out = SBUF_INIT;
    char err[256];
    const char *body = " {\n \"model\" : \"gpt-5\", \"tools\": [ {\"type\":\"function\", \"name\":\"f\"} ],"
                       " \"input\" : [3], \"x-unknown\":{\"k\":\"\\u00e9\\n\"}, \"previous_response_id\":\"r1\","
                       " \"temperature\":0.70, \"store\":true } ";
    CHECK_EQ_INT(test_rebuild(chain, 1, body, &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p, "{\"model\":\"gpt-5\",\"tools\":[ {\"type\":\"function\", \"name\":\"f\"} ],"
                        "\"input\":[1,2,3],\"x-unknown\":{\"k\":\"\\u00e9\\n\"},\"temperature\":0.70,\"store\":true}");
    sbuf_free(&out);
}

/* Duplicates: the last input counts (as json_get reads it), every copy of
 * input and previous_response_id leaves; a key written with escapes is
 * the same key. */
static void test_rebuild_drops_every_copy_of_input_and_previous_response_id(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[]", "[\"o\"]")};
    sbuf out = SBUF_INIT;
    char err[256];
    const char *body = "{\"input\":\"first\",\"previous_response_id\":\"zz\",\"a\":1,\"inp\\u0075t\":\"second\","
                       "\"prev\\u0069ous_response_id\":\"r1\",\"b\":2}";
    CHECK_EQ_INT(test_rebuild(chain, 1, body, &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p, "{\"a\":1,\"input\":[\"o\",{\"type\":\"message\",\"role\":\"user\",\"content\":\"second\"}],"
                        "\"b\":2}");
    sbuf_free(&out);
}

static void test_rebuild_without_input_puts_it_where_previous_response_id_stood(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[\"i\"]", "[\"o\"]")};
    sbuf out = SBUF_INIT;
    char err[256];
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"a\":1,\"previous_response_id\":\"r1\",\"b\":2}", &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p, "{\"a\":1,\"input\":[\"i\",\"o\"],\"b\":2}");
    sbuf_free(&out);
}

static void test_rebuild_refuses_a_previous_response_id_that_is_not_a_string(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[]", "[]")};
    sbuf out = SBUF_INIT;
    char err[256], body[512];
    const char *bad[] = {"12", "{\"id\":\"r1\"}", "[\"r1\"]", "true", "\"\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "{\"previous_response_id\":%s,\"input\":\"x\"}", bad[i]);
        CHECK_EQ_INT(test_rebuild(chain, 1, body, &out, err, sizeof err), -1);
        CHECK(test_err_has(err, "'previous_response_id' must be a string"));
    }
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"previous_response_id\":null,\"input\":\"x\"}", &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "no previous_response_id"));
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"input\":\"x\"}", &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "no previous_response_id"));
    char longid[200];
    memset(longid, 'r', 150);
    longid[150] = '\0';
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\"}", longid);
    CHECK_EQ_INT(test_rebuild(chain, 1, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "1 to 127 bytes"));
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

static void test_rebuild_refuses_an_input_neither_string_nor_array(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[]", "[]")};
    sbuf out = SBUF_INIT;
    char err[256], body[256];
    const char *bad[] = {"{}", "3", "null", "false"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body, "{\"previous_response_id\":\"r1\",\"input\":%s}", bad[i]);
        CHECK_EQ_INT(test_rebuild(chain, 1, body, &out, err, sizeof err), -1);
        CHECK(test_err_has(err, "'input' must be a string or an array"));
    }
    sbuf_free(&out);
}

static void test_rebuild_refuses_a_body_that_is_not_one_json_object(void)
{
    conv_link chain[] = {TURN("r1", NULL, "[]", "[]")};
    sbuf out = SBUF_INIT;
    char err[256];
    const char *bad[] = {"", "[]", "\"x\"", "{\"previous_response_id\":\"r1\"", "{\"previous_response_id\":\"r1\"} x",
                         "{\"previous_response_id\":\"r1\",}", "{\"a\" 1}", "{\"a\":01}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(test_rebuild(chain, 1, bad[i], &out, err, sizeof err), -1);
        CHECK(test_err_has(err, "not a valid JSON object"));
    }
    CHECK_EQ_INT(conversation_rebuild(chain, 1, NULL, 0, &out, err, sizeof err), -1);
    sbuf_free(&out);
}

/* The chain must be linked oldest first and end at the request's id. */
static void test_rebuild_refuses_a_chain_that_is_not_the_requests(void)
{
    sbuf out = SBUF_INIT;
    char err[256];
    const char *body = "{\"previous_response_id\":\"r2\",\"input\":\"x\"}";
    conv_link other_end[] = {TURN("r1", NULL, "[]", "[]")};
    CHECK_EQ_INT(test_rebuild(other_end, 1, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "ends at r1, not at the request's previous_response_id r2"));
    conv_link gap[] = {TURN("r0", NULL, "[]", "[]"), TURN("r2", "r1", "[]", "[]")};
    CHECK_EQ_INT(test_rebuild(gap, 2, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "turn 2 of the stored conversation (r2) does not continue turn 1 (r0)"));
    conv_link headless[] = {TURN("r2", "r1", "[]", "[]")};
    CHECK_EQ_INT(test_rebuild(headless, 1, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "its start is missing"));
    CHECK_EQ_INT(conversation_rebuild(NULL, 0, body, strlen(body), &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "no stored turns"));
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

static void test_rebuild_refuses_a_recorded_turn_that_is_not_an_array(void)
{
    sbuf out = SBUF_INIT;
    char err[256];
    const char *body = "{\"previous_response_id\":\"r2\",\"input\":\"x\"}";
    conv_link bad_output[] = {TURN("r1", NULL, "[]", "{\"a\":1}"), TURN("r2", "r1", "[]", "[]")};
    CHECK_EQ_INT(test_rebuild(bad_output, 2, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "the recorded output of turn 1 (r1) is not a JSON array"));
    conv_link bad_input[] = {TURN("r1", NULL, "[]", "[]"), TURN("r2", "r1", "[1,", "[]")};
    CHECK_EQ_INT(test_rebuild(bad_input, 2, body, &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "the recorded input of turn 2 (r2) is not a JSON array"));
    conv_link trailing[] = {TURN("r1", NULL, "[]", "[]"), TURN("r2", "r1", "[1] [2]", "[]")};
    CHECK_EQ_INT(test_rebuild(trailing, 2, body, &out, err, sizeof err), -1);
    conv_link none[] = {{(char *)"r2", 1, NULL, NULL, 0, (char *)"[]", 2, 0}};
    CHECK_EQ_INT(test_rebuild(none, 1, body, &out, err, sizeof err), -1);
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

/* A recorded item lands one level deeper in the rebuilt body (inside its
 * input array): one that would then nest past json_parse's 128 levels is
 * refused, so every rebuilt body parses; one level less goes through. */
static void test_rebuild_refuses_an_item_that_would_nest_too_deep_in_the_body(void)
{
    sbuf arr = SBUF_INIT, out = SBUF_INIT;
    char err[256];
    for (int levels = 127; levels >= 126; levels--) {
        sbuf_reset(&arr);
        sbuf_puts(&arr, "[");
        for (int i = 0; i < levels; i++)
            sbuf_puts(&arr, "[");
        for (int i = 0; i < levels; i++)
            sbuf_puts(&arr, "]");
        sbuf_puts(&arr, "]");
        json_value *alone = json_parse(arr.p, arr.len, NULL, 0);
        CHECK(alone != NULL); /* 128 levels at most on its own */
        json_free(alone);
        conv_link chain[] = {{(char *)"r1", 1, NULL, arr.p, arr.len, (char *)"[]", 2, 0}};
        sbuf_reset(&out);
        int rc = test_rebuild(chain, 1, "{\"previous_response_id\":\"r1\"}", &out, err, sizeof err);
        CHECK_EQ_INT(rc, levels == 127 ? -1 : 0);
        if (rc == 0) {
            json_value *doc = json_parse(out.p, out.len, NULL, 0);
            CHECK(doc != NULL);
            json_free(doc);
        } else {
            CHECK(test_err_has(err, "nests too deep"));
        }
    }
    sbuf_free(&arr);
    sbuf_free(&out);
}

/* Whatever it was given before stays; nothing of a failed rebuild is left. */
static void test_rebuild_leaves_out_as_it_was_when_it_fails_midway(void)
{
    sbuf out = SBUF_INIT;
    char err[256];
    sbuf_puts(&out, "kept");
    conv_link chain[] = {TURN("r1", NULL, "[1,2,3]", "[4]"), TURN("r2", "r1", "[5]", "[6,")};
    CHECK_EQ_INT(test_rebuild(chain, 2, "{\"a\":1,\"previous_response_id\":\"r2\"}", &out, err, sizeof err), -1);
    CHECK_EQ_STR(out.p, "kept");
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"a\":1,\"previous_response_id\":\"r1\"}", &out, err, sizeof err), 0);
    CHECK_EQ_STR(out.p, "kept{\"a\":1,\"input\":[1,2,3,4]}");
    sbuf_free(&out);
}

/* A chain of more than CONVERSATION_MAX_ITEMS items, or more than
 * CONVERSATION_MAX_BYTES bytes, is refused with the limit in the error. */
static void test_rebuild_refuses_huge_chains(void)
{
    sbuf items = SBUF_INIT, out = SBUF_INIT;
    char err[256];
    sbuf_puts(&items, "[");
    for (int i = 0; i < CONVERSATION_MAX_ITEMS / 2 + 1; i++)
        sbuf_puts(&items, i ? ",0" : "0");
    sbuf_puts(&items, "]");
    conv_link chain[] = {{(char *)"r1", 1, NULL, items.p, items.len, (char *)"[]", 2, 0},
                         {(char *)"r2", 1, (char *)"r1", items.p, items.len, (char *)"[]", 2, 0}};
    CHECK_EQ_INT(test_rebuild(chain, 1, "{\"previous_response_id\":\"r1\"}", &out, err, sizeof err), 0);
    sbuf_reset(&out);
    CHECK_EQ_INT(test_rebuild(chain, 2, "{\"previous_response_id\":\"r2\"}", &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "more than 100000 items"));
    CHECK_EQ_INT(out.len, 0);
    /* bytes: two turns whose sizes add up past the bound (the text is never read) */
    conv_link big[] = {{(char *)"r1", 1, NULL, (char *)"[]", CONVERSATION_MAX_BYTES / 2, (char *)"[]", 2, 0},
                       {(char *)"r2", 1, (char *)"r1", (char *)"[]", CONVERSATION_MAX_BYTES / 2, (char *)"[]", 2, 0}};
    CHECK_EQ_INT(test_rebuild(big, 2, "{\"previous_response_id\":\"r2\"}", &out, err, sizeof err), -1);
    CHECK(test_err_has(err, "a rebuilt request may have at most 67108864"));
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&items);
    sbuf_free(&out);
}

/* ---------- what is recorded ---------- */

static void test_record_input_turns_a_string_into_a_one_message_array(void)
{
    sbuf in = SBUF_INIT;
    char prev[CONVERSATION_ID_MAX];
    int store = -1;
    const char *body = "{\"model\":\"m\",\"input\":\"hi \\\"there\\\"\",\"previous_response_id\":\"resp_\\u0031\"}";
    CHECK_EQ_INT(conversation_record_input(body, strlen(body), &in, prev, &store), 0);
    CHECK_EQ_STR(in.p, "[{\"type\":\"message\",\"role\":\"user\",\"content\":\"hi \\\"there\\\"\"}]");
    CHECK_EQ_STR(prev, "resp_1");
    CHECK_EQ_INT(store, 1);
    sbuf_free(&in);
}

static void test_record_input_keeps_an_array_as_written_and_reads_store(void)
{
    sbuf in = SBUF_INIT;
    char prev[CONVERSATION_ID_MAX];
    int store = -1;
    const char *body = "{\"input\":[ {\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"}]} ],"
                       "\"store\":false,\"previous_response_id\":null}";
    CHECK_EQ_INT(conversation_record_input(body, strlen(body), &in, prev, &store), 0);
    CHECK_EQ_STR(in.p, "[ {\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"}]} ]");
    CHECK_EQ_STR(prev, "");
    CHECK_EQ_INT(store, 0);
    sbuf_reset(&in);
    const char *stores[] = {"{\"store\":true}", "{\"store\":null}", "{}", "{\"store\":\"no\"}"};
    for (size_t i = 0; i < sizeof stores / sizeof *stores; i++) {
        store = -1;
        sbuf_reset(&in);
        CHECK_EQ_INT(conversation_record_input(stores[i], strlen(stores[i]), &in, prev, &store), 0);
        CHECK_EQ_INT(store, 1);
        CHECK_EQ_STR(in.p, "[]");
    }
    sbuf_free(&in);
}

static void test_record_input_refuses_what_the_api_would(void)
{
    sbuf in = SBUF_INIT;
    char prev[CONVERSATION_ID_MAX], body[512], longid[200];
    int store;
    const char *bad[] = {"{\"input\":3}", "{\"input\":{}}", "{\"previous_response_id\":7}", "[]", "{\"input\":\"x\"",
                         "{\"input\":\"x\"}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(conversation_record_input(bad[i], strlen(bad[i]), &in, prev, &store), -1);
    memset(longid, 'x', 128);
    longid[128] = '\0';
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"x\"}", longid);
    CHECK_EQ_INT(conversation_record_input(body, strlen(body), &in, prev, &store), -1);
    longid[127] = '\0';
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"x\"}", longid);
    CHECK_EQ_INT(conversation_record_input(body, strlen(body), &in, prev, &store), 0);
    CHECK_EQ_INT(strlen(prev), 127);
    sbuf_free(&in);
}

static void test_record_output_reads_a_plain_answer_and_a_completed_event(void)
{
    sbuf out = SBUF_INIT;
    char id[CONVERSATION_ID_MAX];
    const char *plain = "{\"id\":\"resp_9\",\"object\":\"response\",\"status\":\"completed\","
                        "\"output\":[{\"type\":\"message\",\"content\":[]}],\"usage\":{\"input_tokens\":3}}";
    CHECK_EQ_INT(conversation_record_output(plain, strlen(plain), &out, id), 0);
    CHECK_EQ_STR(id, "resp_9");
    CHECK_EQ_STR(out.p, "[{\"type\":\"message\",\"content\":[]}]");
    sbuf_reset(&out);
    const char *event = "{\"type\":\"response.completed\",\"sequence_number\":12,\"response\":{\"id\":\"resp_10\","
                        "\"output\":[{\"type\":\"reasoning\",\"summary\":[]}, {\"type\":\"message\"}]}}";
    CHECK_EQ_INT(conversation_record_output(event, strlen(event), &out, id), 0);
    CHECK_EQ_STR(id, "resp_10");
    CHECK_EQ_STR(out.p, "[{\"type\":\"reasoning\",\"summary\":[]}, {\"type\":\"message\"}]");
    sbuf_free(&out);
}

static void test_record_output_refuses_a_response_without_id_or_output(void)
{
    sbuf out = SBUF_INIT;
    char id[CONVERSATION_ID_MAX];
    const char *bad[] = {"{\"output\":[]}", "{\"id\":\"r\"}", "{\"id\":5,\"output\":[]}", "{\"id\":\"r\",\"output\":{}}",
                         "{\"id\":\"\",\"output\":[]}", "{\"type\":\"response.completed\",\"response\":{\"output\":[]}}",
                         "{\"id\":\"r\",\"output\":[]", "[{\"id\":\"r\",\"output\":[]}]", "{\"id\":\"a\\u0000b\",\"output\":[]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(conversation_record_output(bad[i], strlen(bad[i]), &out, id), -1);
        CHECK_EQ_STR(id, "");
    }
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

/* What is recorded of two turns rebuilds the third's body. */
static void test_recorded_turns_rebuild_the_next_request(void)
{
    const char *req[] = {"{\"model\":\"m\",\"input\":\"one\"}",
                         "{\"model\":\"m\",\"previous_response_id\":\"resp_1\",\"input\":[{\"role\":\"user\",\"content\":\"two\"}]}"};
    const char *resp[] = {"{\"id\":\"resp_1\",\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":"
                          "[{\"type\":\"output_text\",\"text\":\"1\"}]}]}",
                          "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_2\",\"output\":[{\"type\":\"message\","
                          "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"2\"}]}]}}"};
    sbuf in[2] = {SBUF_INIT, SBUF_INIT}, out[2] = {SBUF_INIT, SBUF_INIT}, body = SBUF_INIT;
    char prev[2][CONVERSATION_ID_MAX], id[2][CONVERSATION_ID_MAX], err[256];
    conv_link chain[2];
    for (int i = 0; i < 2; i++) {
        int store;
        CHECK_EQ_INT(conversation_record_input(req[i], strlen(req[i]), &in[i], prev[i], &store), 0);
        CHECK_EQ_INT(conversation_record_output(resp[i], strlen(resp[i]), &out[i], id[i]), 0);
        chain[i] = (conv_link){id[i], 1, prev[i][0] ? prev[i] : NULL, in[i].p, in[i].len, out[i].p, out[i].len, 0};
    }
    CHECK_EQ_INT(test_rebuild(chain, 2, "{\"model\":\"m\",\"previous_response_id\":\"resp_2\",\"input\":\"three\"}", &body,
                              err, sizeof err), 0);
    CHECK_EQ_STR(body.p, "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":\"one\"},"
                         "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"1\"}]},"
                         "{\"role\":\"user\",\"content\":\"two\"},"
                         "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"2\"}]},"
                         "{\"type\":\"message\",\"role\":\"user\",\"content\":\"three\"}]}");
    for (int i = 0; i < 2; i++) {
        sbuf_free(&in[i]);
        sbuf_free(&out[i]);
    }
    sbuf_free(&body);
}

int main(void)
{
    RUN(test_rebuild_turns_a_string_input_into_a_user_message_after_the_chain);
    RUN(test_rebuild_of_a_three_turn_chain_keeps_every_item_in_order_byte_for_byte);
    RUN(test_rebuild_keeps_every_other_member_in_order_and_as_written);
    RUN(test_rebuild_drops_every_copy_of_input_and_previous_response_id);
    RUN(test_rebuild_without_input_puts_it_where_previous_response_id_stood);
    RUN(test_rebuild_refuses_a_previous_response_id_that_is_not_a_string);
    RUN(test_rebuild_refuses_an_input_neither_string_nor_array);
    RUN(test_rebuild_refuses_a_body_that_is_not_one_json_object);
    RUN(test_rebuild_refuses_a_chain_that_is_not_the_requests);
    RUN(test_rebuild_refuses_a_recorded_turn_that_is_not_an_array);
    RUN(test_rebuild_refuses_an_item_that_would_nest_too_deep_in_the_body);
    RUN(test_rebuild_leaves_out_as_it_was_when_it_fails_midway);
    RUN(test_rebuild_refuses_huge_chains);
    RUN(test_record_input_turns_a_string_into_a_one_message_array);
    RUN(test_record_input_keeps_an_array_as_written_and_reads_store);
    RUN(test_record_input_refuses_what_the_api_would);
    RUN(test_record_output_reads_a_plain_answer_and_a_completed_event);
    RUN(test_record_output_refuses_a_response_without_id_or_output);
    RUN(test_recorded_turns_rebuild_the_next_request);
    return check_summary();
}
