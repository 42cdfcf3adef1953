/* test_resume.c: the continuation request of a cut chat stream (resume.c). */
#include "check.h"
#include "base/json.h"
#include "upstream/resume.h"

static void test_resume_body_appends_the_delivered_text_as_an_assistant_message(void)
{
    const char *in = "{\"model\":\"gpt-5\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                     "\"temperature\":0.2,\"tools\":[]}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    CHECK(doc != NULL);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "Hello \"you\"\n", 12, &out), 0);
    CHECK_EQ_STR(out.p, "{\"model\":\"gpt-5\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                        "{\"role\":\"assistant\",\"content\":\"Hello \\\"you\\\"\\n\"}],\"temperature\":0.2,"
                        "\"tools\":[]}");
    json_value *again = json_parse(out.p, out.len, NULL, 0);
    CHECK(again != NULL);
    CHECK_EQ_INT(json_get(again, "messages")->count, 2);
    json_free(again);
    sbuf_free(&out);
    json_free(doc);
}

static void test_resume_body_keeps_an_empty_message_list_valid(void)
{
    const char *in = "{\"messages\":[]}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "x", 1, &out), 0);
    CHECK_EQ_STR(out.p, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}");
    sbuf_free(&out);
    json_free(doc);
}

static void test_resume_body_needs_a_messages_array(void)
{
    const char *in = "{\"input\":\"hi\"}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "x", 1, &out), -1);
    CHECK_EQ_INT(out.len, 0);
    CHECK_EQ_INT(resume_body_build(NULL, "x", 1, &out), -1);
    sbuf_free(&out);
    json_free(doc);
}

int main(void)
{
    RUN(test_resume_body_appends_the_delivered_text_as_an_assistant_message);
    RUN(test_resume_body_keeps_an_empty_message_list_valid);
    RUN(test_resume_body_needs_a_messages_array);
    return check_summary();
}
