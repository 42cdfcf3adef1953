/* test_log.c: the log's rate limit of repeated lines, and the error
 * messages made fit for the request log (log_redact_message). */
#include "check.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <unistd.h>

static char out_path[] = "/tmp/sy_test_log_XXXXXX";

static size_t lines_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    size_t n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

static void test_a_repeating_call_site_is_cut_to_its_burst_and_counted(void)
{
    unsigned long before = log_suppressed();
    for (int i = 0; i < 1000; i++)
        log_warn("accept(): Too many open files (%d)", i);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "Too many open files"), 100);
    CHECK_EQ_INT(log_suppressed() - before, 900);
}

static void test_other_call_sites_are_not_held_back_by_a_noisy_one(void)
{
    log_error("a different line");
    log_debug("debug lines are never limited %d", 1);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "a different line"), 1);
    for (int i = 0; i < 300; i++)
        log_debug("debug flood %d", i);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "debug flood"), 300);
}


static const char *msg_of(const char *in, size_t max)
{
    static char out[512];
    size_t n = log_redact_message(out, max, in, strlen(in));
    CHECK_EQ_INT(n, strlen(out));
    return out;
}

static void test_an_error_message_keeps_its_words_codes_and_model_names(void)
{
    CHECK_EQ_STR(msg_of("context_length_exceeded: This model's maximum context length is 128000 tokens.", 301),
                 "context_length_exceeded: This model's maximum context length is 128000 tokens.");
    CHECK_EQ_STR(msg_of("unsupported_country_region_territory: The model o3-deep-research-2025-06-26 is not here", 301),
                 "unsupported_country_region_territory: The model o3-deep-research-2025-06-26 is not here");
}

static void test_keys_tokens_and_authorization_values_are_redacted_in_a_message(void)
{
    CHECK_EQ_STR(msg_of("Incorrect API key provided: sk-proj-abcDEF123456ghiJKL789. You can find your key", 301),
                 "Incorrect API key provided: [redacted]. You can find your key");
    /* the masked form an upstream itself sends: its start is still a key's start */
    CHECK_EQ_STR(msg_of("Incorrect API key provided: sk-abc12**************wxyz.", 301),
                 "Incorrect API key provided: [redacted]**************wxyz.");
    CHECK_EQ_STR(msg_of("bad header Authorization: Bearer abc.def and Basic dXNlcg==", 301),
                 "bad header Authorization: Bearer [redacted] and Basic [redacted]==");
    CHECK_EQ_STR(msg_of("token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl expired", 301),
                 "token [redacted] expired");
    CHECK_EQ_STR(msg_of("platform key sy-0123456789abcdefXYZ refused", 301), "platform key [redacted] refused");
    CHECK_EQ_STR(msg_of("key org_sk-abc123 and a task-queue on a risk-based disk-full", 301),
                 "key [redacted] and a task-queue on a risk-based disk-full");
    /* redacted before (the account's own token, by the scrubber): once is enough */
    CHECK_EQ_STR(msg_of("bad credentials: Bearer [redacted] given", 301), "bad credentials: Bearer [redacted] given");
    CHECK_EQ_STR(msg_of("digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 seen", 301),
                 "digest [redacted] seen");
}

static void test_a_message_is_one_line_without_control_characters(void)
{
    CHECK_EQ_STR(msg_of("  line one\r\n\tline two\x1b[31m red \x7f\xc2\x85 end \n", 301),
                 "line one line two [31m red end");
    CHECK_EQ_STR(msg_of("bad \xff\xfe bytes", 301), "bad ?? bytes");
}

static void test_a_long_message_is_cut_to_its_bound_on_a_character_boundary(void)
{
    char in[2000];
    memset(in, 0, sizeof in);
    for (size_t i = 0; i + 3 < sizeof in - 1; i += 3)
        memcpy(in + i, "\xc3\xa9 ", 3); /* "é " */
    const char *out = msg_of(in, 301);
    CHECK(strlen(out) <= 300);
    CHECK(strlen(out) >= 297);
    CHECK_EQ_INT(sbuf_utf8_cut(out, strlen(out), 300), strlen(out)); /* ends on a whole character */
    CHECK_EQ_INT(sbuf_utf8_len(out + strlen(out) - 2, 2), 2);
    /* the word the bound falls in is left out, unless it is the first */
    CHECK_EQ_STR(msg_of("abcdef ghijkl", 10), "abcdef");
    CHECK_EQ_STR(msg_of("abcdefghijkl", 10), "abcdefghi");
    char tiny[1];
    CHECK_EQ_INT(log_redact_message(tiny, 1, "x", 1), 0);
    CHECK_EQ_STR(tiny, "");
}

static void test_a_credential_cut_by_the_input_bound_is_left_out(void)
{
    /* 4090 bytes of words, then a token the 4096-byte bound cuts after 6
     * characters: those 6 could be half a key and are not kept */
    static char in[LOG_MESSAGE_IN + 64];
    memset(in, 'a', sizeof in - 1);
    for (size_t i = 5; i < LOG_MESSAGE_IN - 6; i += 6)
        in[i] = ' ';
    memcpy(in + LOG_MESSAGE_IN - 6, "Zq9XkWm3Pb8VrT5nLc2YhF7g", 24);
    in[LOG_MESSAGE_IN + 18] = '\0';
    char out[5000];
    log_redact_message(out, sizeof out, in, strlen(in));
    CHECK(strstr(out, "Zq9") == NULL);
    CHECK(strlen(out) > 4000);
}

int main(void)
{
    int fd = mkstemp(out_path);
    if (fd < 0 || !freopen(out_path, "w", stderr))
        return 1;
    close(fd);
    log_set_level(LOG_DEBUG);
    RUN(test_a_repeating_call_site_is_cut_to_its_burst_and_counted);
    RUN(test_other_call_sites_are_not_held_back_by_a_noisy_one);
    RUN(test_an_error_message_keeps_its_words_codes_and_model_names);
    RUN(test_keys_tokens_and_authorization_values_are_redacted_in_a_message);
    RUN(test_a_message_is_one_line_without_control_characters);
    RUN(test_a_long_message_is_cut_to_its_bound_on_a_character_boundary);
    RUN(test_a_credential_cut_by_the_input_bound_is_left_out);
    unlink(out_path);
    return check_summary();
}
