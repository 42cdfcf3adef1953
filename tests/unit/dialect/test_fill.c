/* test_fill.c: a Responses terminal event whose output is empty gets the
 * stream's items (fill.c), and nothing else changes. */
#include "check.h"
#include "dialect/fill.h"
#include <string.h>

#define ITEMS "[{\"type\":\"message\",\"id\":\"m1\"}]"

static void test_an_empty_output_of_response_completed_is_filled_with_the_items(void)
{
    const char *in = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"
                     "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\","
                     "\"output\":[],\"usage\":{\"input_tokens\":1}}}\n\n";
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(fill_output_sse(in, strlen(in), ITEMS, strlen(ITEMS), &out), 1);
    CHECK(strstr(out.p, "\"output\":" ITEMS ",\"usage\"") != NULL);
    CHECK(strncmp(out.p, in, strstr(in, "event: response.completed") - in) == 0); /* the delta as it was */
    sbuf_free(&out);
}

static void test_an_output_that_holds_items_and_other_events_are_left_alone(void)
{
    const char *full = "data: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"id\":\"x\"}]}}\n\n";
    const char *other = "data: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n";
    const char *cut = "data: {\"type\":\"response.completed\",\"response\":{\"output\":[]}}\n"; /* not whole */
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(fill_output_sse(full, strlen(full), ITEMS, strlen(ITEMS), &out), 0);
    CHECK_EQ_INT(fill_output_sse(other, strlen(other), ITEMS, strlen(ITEMS), &out), 0);
    CHECK_EQ_INT(fill_output_sse(cut, strlen(cut), ITEMS, strlen(ITEMS), &out), 0);
    CHECK_EQ_INT((int)out.len, 0);
    sbuf_free(&out);
}

static void test_response_incomplete_with_crlf_lines_and_spaces_is_filled(void)
{
    const char *in = "event: response.incomplete\r\ndata: {\"type\": \"response.incomplete\", \"response\": "
                     "{\"output\": [ ], \"status\": \"incomplete\"}}\r\n\r\n";
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(fill_output_sse(in, strlen(in), ITEMS, strlen(ITEMS), &out), 1);
    CHECK(strstr(out.p, "\"output\": " ITEMS ", \"status\"") != NULL);
    CHECK(strstr(out.p, "\r\n\r\n") != NULL);
    sbuf_free(&out);
}

int main(void)
{
    RUN(test_an_empty_output_of_response_completed_is_filled_with_the_items);
    RUN(test_an_output_that_holds_items_and_other_events_are_left_alone);
    RUN(test_response_incomplete_with_crlf_lines_and_spaces_is_filled);
    return check_summary();
}
