/* test_claude_settings.c: the settings.json editor of `switchyard claude
 * attach`: a new file is Claude Code's 2-space shape; members go after
 * env's last one, indented like their neighbours (spaces, tabs, CRLF, one
 * line); an existing value is replaced in place and its raw original
 * kept; a restore after an attach gives the input back byte for byte,
 * also when other parts of the file changed in between, and keeps a value
 * the user changed; what the editor refuses; the record round-trips. */
#include "check.h"
#include "base/sha256.h"
#include "codex/claude_settings.h"

#define URL "http://127.0.0.1:8787"
static int quiet; /* a refusal the test expects is not noise on stderr */
#define KEY "sy-TESTKEY0123456789"

/* Sets BASE_URL and AUTH_TOKEN (and MODEL when model) on text: the result
 * (caller frees), the originals in set[]. NULL when refused. */
static char *attach(const char *text, claude_env_set set[3], const char *model, int *env_created)
{
    memset(set, 0, 3 * sizeof *set);
    set[0].name = "ANTHROPIC_BASE_URL", set[0].value = URL;
    set[1].name = "ANTHROPIC_AUTH_TOKEN", set[1].value = KEY;
    set[2].name = "ANTHROPIC_MODEL", set[2].value = model;
    sbuf out = SBUF_INIT;
    char err[256] = "";
    int ec = 0;
    if (claude_settings_set(text, strlen(text), set, model ? 3 : 2, env_created ? env_created : &ec, &out, err,
                            sizeof err) != 0) {
        if (!quiet)
            fprintf(stderr, "  set refused: %s\n", err);
        sbuf_free(&out);
        return NULL;
    }
    return out.p ? out.p : calloc(1, 1);
}

static void set_free(claude_env_set set[3])
{
    for (int i = 0; i < 3; i++)
        sbuf_free(&set[i].orig);
}

/* The restore entries for what attach() set. */
static size_t restore_of(const claude_env_set set[3], int with_model, claude_env_restore r[3], char key_sha[65])
{
    sha256_hex(KEY, strlen(KEY), key_sha);
    memset(r, 0, 3 * sizeof *r);
    size_t n = with_model ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        r[i].name = set[i].name;
        r[i].written = i == 1 ? NULL : set[i].value;
        r[i].written_sha = i == 1 ? key_sha : "";
        r[i].orig_present = set[i].orig_present;
        r[i].orig = set[i].orig.p ? set[i].orig.p : "";
        r[i].orig_len = set[i].orig.len;
    }
    return n;
}

static char *detach(const char *text, claude_env_restore *r, size_t n, int env_created, int *empty)
{
    sbuf out = SBUF_INIT;
    char err[256] = "";
    int e = 0;
    if (claude_settings_restore(text, strlen(text), r, n, env_created, &out, empty ? empty : &e, err, sizeof err)) {
        fprintf(stderr, "  restore refused: %s\n", err);
        sbuf_free(&out);
        return NULL;
    }
    return out.p ? out.p : calloc(1, 1);
}

/* attach then detach: the input back, byte for byte. */
static int round_trip_is_identity(const char *text, int with_model)
{
    claude_env_set set[3];
    claude_env_restore r[3];
    char sha[65];
    int created = 0, empty = 0;
    char *a = attach(text, set, with_model ? "gpt-5" : NULL, &created);
    if (!a)
        return 0;
    size_t n = restore_of(set, with_model, r, sha);
    char *d = detach(a, r, n, created, &empty);
    int ok = d && strcmp(d, text) == 0;
    if (!ok)
        fprintf(stderr, "  round trip of:\n%s\n  attached:\n%s\n  gave:\n%s\n", text, a, d ? d : "(refused)");
    free(a), free(d);
    set_free(set);
    return ok;
}

static void test_a_missing_file_becomes_a_two_space_indented_object(void)
{
    claude_env_set set[3];
    int created = 0;
    char *a = attach("", set, NULL, &created);
    CHECK_EQ_STR(a, "{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"" URL "\",\n"
                    "    \"ANTHROPIC_AUTH_TOKEN\": \"" KEY "\"\n  }\n}\n");
    CHECK_EQ_INT(created, 1);
    CHECK_EQ_INT(set[0].orig_present, 0);
    free(a);
    set_free(set);
    /* an empty object is filled the same way, and what follows it stays */
    a = attach("{}\n", set, NULL, NULL);
    CHECK_EQ_STR(a, "{\n  \"env\": {\n    \"ANTHROPIC_BASE_URL\": \"" URL "\",\n"
                    "    \"ANTHROPIC_AUTH_TOKEN\": \"" KEY "\"\n  }\n}\n");
    free(a);
    set_free(set);
}

static void test_members_go_after_envs_last_one_indented_like_it(void)
{
    claude_env_set set[3];
    char *a = attach("{\n    \"env\": {\n        \"FOO\": \"1\"\n    },\n    \"model\": \"opus\"\n}", set, NULL, NULL);
    CHECK_EQ_STR(a, "{\n    \"env\": {\n        \"FOO\": \"1\",\n        \"ANTHROPIC_BASE_URL\": \"" URL "\",\n"
                    "        \"ANTHROPIC_AUTH_TOKEN\": \"" KEY "\"\n    },\n    \"model\": \"opus\"\n}");
    free(a);
    set_free(set);
    /* tabs and CRLF are the file's, so they are what is added */
    a = attach("{\r\n\t\"env\": {\r\n\t\t\"FOO\":\"1\"\r\n\t}\r\n}\r\n", set, NULL, NULL);
    CHECK_EQ_STR(a, "{\r\n\t\"env\": {\r\n\t\t\"FOO\":\"1\",\r\n\t\t\"ANTHROPIC_BASE_URL\":\"" URL "\",\r\n"
                    "\t\t\"ANTHROPIC_AUTH_TOKEN\":\"" KEY "\"\r\n\t}\r\n}\r\n");
    free(a);
    set_free(set);
}

static void test_env_is_added_after_the_last_top_level_member(void)
{
    claude_env_set set[3];
    int created = 0;
    char *a = attach("{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": []}\n}\n", set, NULL, &created);
    CHECK_EQ_STR(a, "{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": []},\n  \"env\": {\n"
                    "    \"ANTHROPIC_BASE_URL\": \"" URL "\",\n    \"ANTHROPIC_AUTH_TOKEN\": \"" KEY "\"\n  }\n}\n");
    CHECK_EQ_INT(created, 1);
    free(a);
    set_free(set);
}

static void test_one_line_files_stay_on_one_line(void)
{
    claude_env_set set[3];
    char *a = attach("{\"a\":1,\"env\":{\"X\":\"y\"}}", set, NULL, NULL);
    CHECK_EQ_STR(a, "{\"a\":1,\"env\":{\"X\":\"y\",\"ANTHROPIC_BASE_URL\":\"" URL "\",\"ANTHROPIC_AUTH_TOKEN\":\"" KEY
                    "\"}}");
    free(a);
    set_free(set);
    a = attach("{ \"a\": 1 }", set, NULL, NULL);
    CHECK_EQ_STR(a, "{ \"a\": 1, \"env\": { \"ANTHROPIC_BASE_URL\": \"" URL "\", \"ANTHROPIC_AUTH_TOKEN\": \"" KEY
                    "\" } }");
    free(a);
    set_free(set);
}

static void test_an_existing_value_is_replaced_in_place_and_its_raw_original_kept(void)
{
    claude_env_set set[3];
    const char *in = "{\"env\": {\"ANTHROPIC_AUTH_TOKEN\" :  \"sk-ant-mine\", \"ANTHROPIC_MODEL\": 42}}";
    char *a = attach(in, set, "gpt-5", NULL);
    CHECK_EQ_STR(a, "{\"env\": {\"ANTHROPIC_AUTH_TOKEN\" :  \"" KEY "\", \"ANTHROPIC_MODEL\": \"gpt-5\", "
                    "\"ANTHROPIC_BASE_URL\" :  \"" URL "\"}}");
    CHECK_EQ_INT(set[1].orig_present, 1);
    CHECK_EQ_STR(set[1].orig.p, "\"sk-ant-mine\"");
    CHECK_EQ_STR(set[2].orig.p, "42"); /* not a string: kept raw, given back raw */
    CHECK_EQ_INT(set[0].orig_present, 0);
    free(a);
    set_free(set);
}

static void test_attach_then_detach_gives_every_shape_back_byte_for_byte(void)
{
    static const char *const shapes[] = {
        "{}",
        "{}\n",
        "{\"env\":{}}",
        "{\n  \"env\": {}\n}\n",
        "{\n  \"model\": \"opus\"\n}\n",
        "{\n    \"env\": {\n        \"ANTHROPIC_BASE_URL\": \"https://x\",\n        \"FOO\": \"1\"\n    }\n}",
        "{\r\n  \"a\": [1, 2,\r\n 3],\r\n  \"env\": {\"ANTHROPIC_MODEL\": \"claude\"}\r\n}\r\n",
        "{\"\\u0065nv\": {\"ANTHROPIC_AUTH_TOKEN\": \"old\\u0021\"}, \"z\": null}",
        "  {\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": []}]}, \"env\": {\"K\": \"v\"}}  \n",
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        CHECK(round_trip_is_identity(shapes[i], 0));
        CHECK(round_trip_is_identity(shapes[i], 1));
    }
}

static void test_detach_keeps_what_changed_elsewhere_and_a_value_the_user_set(void)
{
    claude_env_set set[3];
    claude_env_restore r[3];
    char sha[65];
    int created = 0, empty = 0;
    const char *in = "{\n  \"model\": \"opus\",\n  \"env\": {\n    \"ANTHROPIC_MODEL\": \"claude-x\"\n  }\n}\n";
    char *a = attach(in, set, "gpt-5", &created);
    CHECK(a != NULL);
    /* while attached, the user (or Claude Code) changes the model setting,
     * adds a member to env and sets ANTHROPIC_MODEL to a name of their own */
    char edited[1024];
    snprintf(edited, sizeof edited,
             "{\n  \"model\": \"sonnet\",\n  \"env\": {\n    \"ANTHROPIC_MODEL\": \"mine\",\n"
             "    \"ANTHROPIC_BASE_URL\": \"" URL "\",\n    \"ANTHROPIC_AUTH_TOKEN\": \"" KEY "\",\n"
             "    \"NEW\": \"1\"\n  },\n  \"theme\": \"dark\"\n}\n");
    size_t n = restore_of(set, 1, r, sha);
    char *d = detach(edited, r, n, created, &empty);
    CHECK_EQ_STR(d, "{\n  \"model\": \"sonnet\",\n  \"env\": {\n    \"ANTHROPIC_MODEL\": \"mine\",\n"
                    "    \"NEW\": \"1\"\n  },\n  \"theme\": \"dark\"\n}\n");
    CHECK_EQ_INT(r[0].changed, 0);
    CHECK_EQ_INT(r[1].changed, 0);
    CHECK_EQ_INT(r[2].changed, 1);
    CHECK_EQ_INT(empty, 0);
    free(a), free(d);
    set_free(set);
}

static void test_a_created_env_goes_when_emptied_and_an_empty_file_is_reported(void)
{
    claude_env_set set[3];
    claude_env_restore r[3];
    char sha[65];
    int created = 0, empty = 0;
    char *a = attach("", set, NULL, &created);
    CHECK_EQ_INT(created, 1);
    /* edited while attached (reindented by hand): no longer the bytes
     * attach wrote, so the per-key restore runs */
    char edited[512];
    snprintf(edited, sizeof edited, "{\"env\": {\"ANTHROPIC_BASE_URL\": \"" URL "\", \"ANTHROPIC_AUTH_TOKEN\": \"" KEY
                                    "\"}}");
    size_t n = restore_of(set, 0, r, sha);
    char *d = detach(edited, r, n, created, &empty);
    CHECK_EQ_STR(d, "{}");
    CHECK_EQ_INT(empty, 1);
    free(d);
    /* a blank file (the attach wrote a whole object into it) comes back
     * empty too; the caller puts its original bytes back */
    d = detach(a, r, n, created, &empty);
    CHECK_EQ_STR(d, "{}\n");
    CHECK_EQ_INT(empty, 1);
    free(d);
    /* something the user added keeps the file */
    snprintf(edited, sizeof edited, "{\"env\": {\"ANTHROPIC_BASE_URL\": \"" URL "\", \"ANTHROPIC_AUTH_TOKEN\": \"" KEY
                                    "\"}, \"theme\": \"dark\"}");
    d = detach(edited, r, n, created, &empty);
    CHECK_EQ_STR(d, "{\"theme\": \"dark\"}");
    CHECK_EQ_INT(empty, 0);
    free(a), free(d);
    set_free(set);
}

static void test_the_key_is_compared_by_its_hash(void)
{
    claude_env_set set[3];
    claude_env_restore r[3];
    char sha[65];
    char *a = attach("{}", set, NULL, NULL);
    restore_of(set, 0, r, sha);
    CHECK_EQ_INT(claude_settings_is_written(a, strlen(a), &r[1]), 1);
    CHECK_EQ_INT(claude_settings_is_written(a, strlen(a), &r[0]), 1);
    const char *other = "{\"env\": {\"ANTHROPIC_AUTH_TOKEN\": \"sy-someone-else\"}}";
    CHECK_EQ_INT(claude_settings_is_written(other, strlen(other), &r[1]), 0);
    CHECK_EQ_INT(claude_settings_is_written("{", 1, &r[1]), -1);
    free(a);
    set_free(set);
}

static void test_refuses_what_claude_code_could_not_read_or_attach_could_not_edit(void)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"env\": {}, \"x\": ", "not valid JSON"},
        {"{\"a\": 1,}", "not valid JSON"},
        {"[]", "not a JSON object"},
        {"\xEF\xBB\xBF{}", "not valid JSON"}, /* a BOM: JSON.parse in Claude Code refuses it too */
        {"{\"env\": []}", "\"env\" is not an object"},
        {"{\"env\": \"A=1\"}", "\"env\" is not an object"},
        {"{\"env\": {}, \"env\": {}}", "two \"env\""},
        {"{\"env\": {\"ANTHROPIC_BASE_URL\": \"a\", \"ANTHROPIC_BASE_URL\": \"b\"}}", "sets ANTHROPIC_BASE_URL twice"},
    };
    const char *names[] = {"ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        int rc = claude_settings_check(bad[i].text, strlen(bad[i].text), names, 2, err, sizeof err);
        CHECK_EQ_INT(rc, -1);
        if (!strstr(err, bad[i].why))
            fprintf(stderr, "  %s: err \"%s\", expected \"%s\"\n", bad[i].text, err, bad[i].why);
        CHECK(strstr(err, bad[i].why) != NULL);
        claude_env_set set[3];
        quiet = 1;
        CHECK(attach(bad[i].text, set, NULL, NULL) == NULL);
        quiet = 0;
        set_free(set);
    }
    CHECK_EQ_INT(claude_settings_check("  ", 2, names, 2, NULL, 0), 0);
    const char *twice = "{\"env\":{\"X\":1,\"X\":2}}"; /* not a name attach sets: not its business */
    CHECK_EQ_INT(claude_settings_check(twice, strlen(twice), names, 2, NULL, 0), 0);
}

static void test_env_get_tells_a_string_from_other_values(void)
{
    const char *t = "{\"env\": {\"A\": \"x\\ny\", \"B\": 5}}";
    sbuf v = SBUF_INIT;
    CHECK_EQ_INT(claude_settings_env_get(t, strlen(t), "A", &v), 1);
    CHECK_EQ_STR(v.p, "x\ny");
    sbuf_reset(&v);
    CHECK_EQ_INT(claude_settings_env_get(t, strlen(t), "B", &v), 2);
    CHECK_EQ_STR(v.p, "5");
    CHECK_EQ_INT(claude_settings_env_get(t, strlen(t), "C", &v), 0);
    CHECK_EQ_INT(claude_settings_env_get("{}", 2, "A", &v), 0);
    CHECK_EQ_INT(claude_settings_env_get("nope", 4, "A", &v), -1);
    sbuf_free(&v);
}

static void test_the_record_round_trips_with_the_attach_it_replaces(void)
{
    claude_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.state, sizeof r.state, "attaching");
    snprintf(r.settings, sizeof r.settings, "/h/.claude/settings.json");
    snprintf(r.db, sizeof r.db, "/srv/switchyard.db");
    snprintf(r.gateway, sizeof r.gateway, URL);
    r.key_id = 7;
    snprintf(r.key_prefix, sizeof r.key_prefix, "sy-TEST");
    sha256_hex(KEY, strlen(KEY), r.key_sha);
    r.created_at = 1700000000;
    r.original_present = 1, r.original_mode = 0644;
    sbuf_puts(&r.original, "{\r\n\t\"env\": {\"\\u00e9\": \"\xc3\xa9\"}\r\n}");
    r.n = 2;
    snprintf(r.k[0].name, sizeof r.k[0].name, "ANTHROPIC_BASE_URL");
    r.k[0].orig_present = 1;
    sbuf_puts(&r.k[0].orig, "\"https://old\"");
    sbuf_puts(&r.k[0].written, URL);
    snprintf(r.k[1].name, sizeof r.k[1].name, "ANTHROPIC_AUTH_TOKEN");
    snprintf(r.k[1].written_sha, sizeof r.k[1].written_sha, "%s", r.key_sha);
    r.prev = calloc(1, sizeof *r.prev);
    claude_record_copy(r.prev, &r);
    snprintf(r.prev->state, sizeof r.prev->state, "attached");
    r.prev->key_id = 6;
    sbuf text = SBUF_INIT;
    claude_record_write(&r, &text);
    CHECK(strstr(text.p, KEY) == NULL); /* the record never holds the key */
    claude_record back;
    char err[256] = "";
    CHECK_EQ_INT(claude_record_read(text.p, text.len, &back, err, sizeof err), 0);
    sbuf again = SBUF_INIT;
    claude_record_write(&back, &again);
    CHECK_EQ_STR(again.p, text.p);
    CHECK_EQ_STR(back.original.p, r.original.p);
    CHECK_EQ_INT(back.original_mode, 0644);
    CHECK(back.prev != NULL && back.prev->key_id == 6 && !strcmp(back.prev->state, "attached"));
    CHECK(claude_record_key_get(&back, "ANTHROPIC_AUTH_TOKEN") != NULL);
    claude_record_free(&back);
    CHECK(claude_record_read("{\"version\": 2}", 14, &back, err, sizeof err) == -1);
    sbuf_free(&text), sbuf_free(&again);
    claude_record_free(&r);
    claude_record_free(&back);
}

int main(void)
{
    RUN(test_a_missing_file_becomes_a_two_space_indented_object);
    RUN(test_members_go_after_envs_last_one_indented_like_it);
    RUN(test_env_is_added_after_the_last_top_level_member);
    RUN(test_one_line_files_stay_on_one_line);
    RUN(test_an_existing_value_is_replaced_in_place_and_its_raw_original_kept);
    RUN(test_attach_then_detach_gives_every_shape_back_byte_for_byte);
    RUN(test_detach_keeps_what_changed_elsewhere_and_a_value_the_user_set);
    RUN(test_a_created_env_goes_when_emptied_and_an_empty_file_is_reported);
    RUN(test_the_key_is_compared_by_its_hash);
    RUN(test_refuses_what_claude_code_could_not_read_or_attach_could_not_edit);
    RUN(test_env_get_tells_a_string_from_other_values);
    RUN(test_the_record_round_trips_with_the_attach_it_replaces);
    return check_summary();
}
