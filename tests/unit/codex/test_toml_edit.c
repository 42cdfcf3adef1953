/* test_toml_edit.c: the format-preserving TOML editor: what it parses and
 * what it refuses (with the line), that edits touch only the bytes of the
 * key they own (comments, CRLF, BOM, strings that look like statements,
 * dotted keys), where new keys and tables go, and that removing what was
 * added gives the input back byte for byte. */
#include "check.h"
#include "codex/toml_edit.h"

static toml_doc *parse_ok(const char *text)
{
    char err[256] = "";
    toml_doc *d = toml_parse(text, strlen(text), err, sizeof err);
    if (!d)
        fprintf(stderr, "  parse failed: %s\n", err);
    return d;
}

static const char *bytes_of(const toml_doc *d)
{
    size_t n;
    return toml_bytes(d, &n);
}

static int get_is(const toml_doc *d, const char *const *path, size_t n, const char *want)
{
    sbuf raw = SBUF_INIT;
    int r = toml_get(d, path, n, &raw, NULL, 0);
    int ok = want ? r == 1 && raw.p && strcmp(raw.p, want) == 0 : r == 0;
    if (!ok)
        fprintf(stderr, "  get: r=%d raw=%s want=%s\n", r, raw.p ? raw.p : "(none)", want ? want : "(absent)");
    sbuf_free(&raw);
    return ok;
}

static const char *MP[] = {"model_provider"};
static const char *SY_URL[] = {"model_providers", "switchyard", "base_url"};
static const char *SY_NAME[] = {"model_providers", "switchyard", "name"};
static const char *SY_TBL[] = {"model_providers", "switchyard"};

/* Sets model_provider and one key of the switchyard table, then removes
 * both (and the table if it was added): the bytes must be the input's. */
static int round_trip_is_identity(const char *text)
{
    toml_doc *d = parse_ok(text);
    if (!d)
        return 0;
    int had_table = toml_has_table(d, SY_TBL, 2);
    sbuf mp = SBUF_INIT, url = SBUF_INIT;
    int had_mp = toml_get(d, MP, 1, &mp, NULL, 0) == 1, had_url = toml_get(d, SY_URL, 3, &url, NULL, 0) == 1;
    int ok = toml_set(d, MP, 1, "\"switchyard\"", NULL, 0) == 0 &&
             toml_set(d, SY_URL, 3, "\"http://127.0.0.1:1/v1\"", NULL, 0) == 0;
    ok = ok && get_is(d, MP, 1, "\"switchyard\"") && get_is(d, SY_URL, 3, "\"http://127.0.0.1:1/v1\"");
    ok = ok && (had_url ? toml_set(d, SY_URL, 3, url.p, NULL, 0) == 0 : toml_remove(d, SY_URL, 3, NULL, 0) == 1);
    ok = ok && (had_mp ? toml_set(d, MP, 1, mp.p, NULL, 0) == 0 : toml_remove(d, MP, 1, NULL, 0) == 1);
    if (ok && !had_table)
        ok = toml_remove_empty_table(d, SY_TBL, 2) == 1;
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, bytes_of(d));
    toml_final_newline_restore(&out, text, strlen(text));
    if (ok && strcmp(out.p ? out.p : "", text) != 0) {
        fprintf(stderr, "  round trip changed the file:\n---\n%s---\n%s---\n", text, out.p);
        ok = 0;
    }
    sbuf_free(&mp);
    sbuf_free(&url);
    sbuf_free(&out);
    toml_free(d);
    return ok;
}

static void test_round_trip_of_real_world_shapes_is_byte_identical(void)
{
    static const char *const corpus[] = {
        "",
        "model = \"gpt-5\"\n",
        "# Codex settings\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"mcp-docs\"]\n",
        "model = \"o3\"  # fast\napproval_policy = \"on-request\"\n\n[projects.\"/home/me/src/app.v2\"]\n"
        "trust_level = \"trusted\"\n\n[mcp_servers.fs]\ncommand = \"mcp-fs\"\nenv = { ROOT = \"/tmp\", X = '1' }\n",
        "model = \"gpt-5\"\r\n\r\n[profiles.fast]\r\nmodel = \"o4-mini\"\r\n",
        "\xEF\xBB\xBFmodel = \"gpt-5\"\n[tui]\nnotifications = true\n",
        "model = \"gpt-5\"",
        "[shell_environment_policy]\ninherit = \"core\"\nexclude = [\n  \"AWS_*\", # cloud\n  \"AZURE_*\",\n]\n",
        "instructions = \"\"\"\nmodel_provider = \"fake\"\n[model_providers.switchyard]\n\"\"\"\nmodel = 'x'\n",
        "notify = ['''py''', \"\"\"a\\\n   b\"\"\"]\nmodel_providers.other.name = \"other\"\n"
        "model_providers.other.base_url = \"http://o/v1\"\n",
        "model_provider = \"openai\" # the default\n[model_providers.openai-compat]\nname = \"x\"\n",
        "[model_providers.switchyard]\nname = \"old\"\nbase_url = \"http://old/v1\"\nenv_key = \"SY\"\n",
        "[[hooks]]\ncommand = \"a\"\n[[hooks]]\ncommand = \"b\"\n",
        "dt = 1979-05-27 07:32:00Z\nf = -inf\nh = 0xDEAD_BEEF\n[a]\nb.c = 1\n",
        "# only a comment, no newline",
        "\n\n# header comment\n[x]\n",
    };
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++)
        if (!round_trip_is_identity(corpus[i])) {
            fprintf(stderr, "  corpus[%zu] failed\n", i);
            CHECK(0);
        }
}

static void test_refuses_what_it_cannot_parse_with_the_line(void)
{
    static const char *const bad[][2] = {
        {"model = gpt-5\n", "line 1"},
        {"a = 1\nb = \"unterminated\n", "line 2"},
        {"a = 1\n[table\n", "line 2"},
        {"a = 1 b = 2\n", "line 1"},
        {"a = 1\rb = 2\n", "line 1"},
        {"a = [1, 2\n", "line 2"},
        {"x = { a = 1 \n", "line 2"},
        {"= 1\n", "line 1"},
        {"a = \"\\q\"\n", "line 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        toml_doc *d = toml_parse(bad[i][0], strlen(bad[i][0]), err, sizeof err);
        CHECK(d == NULL);
        if (!strstr(err, bad[i][1]))
            fprintf(stderr, "  case %zu: err '%s', expected '%s'\n", i, err, bad[i][1]);
        CHECK(strstr(err, bad[i][1]) != NULL);
        toml_free(d);
    }
}

static void test_replacing_a_value_keeps_its_comment_and_spacing(void)
{
    toml_doc *d = parse_ok("model_provider   =   'openai'   # mine\nmodel = \"o3\"\n");
    CHECK_EQ_INT(toml_set(d, MP, 1, "\"switchyard\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "model_provider   =   \"switchyard\"   # mine\nmodel = \"o3\"\n");
    toml_free(d);
}

static void test_new_top_level_key_goes_before_the_first_table_and_its_comments(void)
{
    toml_doc *d = parse_ok("# Codex\n\n# the docs server\n[mcp_servers.docs]\ncommand = \"x\"\n");
    CHECK_EQ_INT(toml_set(d, MP, 1, "\"switchyard\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "# Codex\n\nmodel_provider = \"switchyard\"\n# the docs server\n[mcp_servers.docs]\n"
                              "command = \"x\"\n");
    toml_free(d);
    d = parse_ok("model = \"o3\"\n\n[tui]\nx = 1\n");
    CHECK_EQ_INT(toml_set(d, MP, 1, "\"switchyard\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "model = \"o3\"\nmodel_provider = \"switchyard\"\n\n[tui]\nx = 1\n");
    toml_free(d);
}

static void test_new_table_is_appended_with_the_files_line_endings(void)
{
    toml_doc *d = parse_ok("\xEF\xBB\xBFmodel = \"o3\"\r\n");
    CHECK_EQ_INT(toml_set(d, SY_NAME, 3, "\"switchyard\"", NULL, 0), 0);
    CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"u\"", NULL, 0), 0);
    CHECK_EQ_INT(toml_set(d, MP, 1, "\"switchyard\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "\xEF\xBB\xBFmodel = \"o3\"\r\nmodel_provider = \"switchyard\"\r\n\r\n"
                              "[model_providers.switchyard]\r\nname = \"switchyard\"\r\nbase_url = \"u\"\r\n");
    toml_free(d);
}

static void test_statements_inside_multiline_strings_are_not_keys(void)
{
    toml_doc *d = parse_ok("instructions = \"\"\"\nmodel_provider = \"fake\"\n[model_providers.switchyard]\n"
                           "\"\"\"\n");
    CHECK(get_is(d, MP, 1, NULL));
    CHECK_EQ_INT(toml_has_table(d, SY_TBL, 2), 0);
    toml_free(d);
}

static void test_dotted_and_quoted_keys_are_found_and_extended_in_place(void)
{
    toml_doc *d = parse_ok("model_providers.switchyard.name = \"old\"\n\n[tui]\nx = 1\n");
    CHECK(get_is(d, SY_NAME, 3, "\"old\""));
    CHECK_EQ_INT(toml_has_table(d, SY_TBL, 2), 1);
    CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"u\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "model_providers.switchyard.name = \"old\"\nmodel_providers.switchyard.base_url = \"u\"\n"
                              "\n[tui]\nx = 1\n");
    toml_free(d);
    d = parse_ok("[model_providers]\nswitchyard . \"name\" = 'old'\n[projects.\"/a.b/c\"]\ntrust_level = \"trusted\"\n");
    const char *proj[] = {"projects", "/a.b/c", "trust_level"};
    CHECK(get_is(d, SY_NAME, 3, "'old'"));
    CHECK(get_is(d, proj, 3, "\"trusted\""));
    CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"u\"", NULL, 0), 0);
    CHECK_EQ_STR(bytes_of(d), "[model_providers]\nswitchyard . \"name\" = 'old'\nswitchyard.base_url = \"u\"\n"
                              "[projects.\"/a.b/c\"]\ntrust_level = \"trusted\"\n");
    toml_free(d);
}

static void test_keys_inside_inline_tables_are_refused_not_rewritten(void)
{
    const char *text = "model_providers = { switchyard = { name = \"x\", base_url = \"u\" } }\n";
    toml_doc *d = parse_ok(text);
    char err[256] = "";
    sbuf raw = SBUF_INIT;
    CHECK_EQ_INT(toml_get(d, SY_NAME, 3, &raw, err, sizeof err), -1);
    CHECK(strstr(err, "inline") != NULL);
    CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"v\"", err, sizeof err), -1);
    CHECK_EQ_STR(bytes_of(d), text);
    sbuf_free(&raw);
    toml_free(d);
}

static void test_array_of_tables_is_never_edited(void)
{
    toml_doc *d = parse_ok("[[model_providers.switchyard]]\nname = \"x\"\n");
    char err[256] = "";
    CHECK_EQ_INT(toml_set(d, SY_NAME, 3, "\"y\"", err, sizeof err), -1);
    CHECK(strstr(err, "array of tables") != NULL);
    toml_free(d);
}

static void test_empty_table_removal_keeps_a_table_with_user_comments(void)
{
    toml_doc *d = parse_ok("a = 1\n\n[model_providers.switchyard]\n# my note\n");
    CHECK_EQ_INT(toml_remove_empty_table(d, SY_TBL, 2), 0);
    toml_free(d);
    d = parse_ok("a = 1\n\n[model_providers.switchyard]\n\n[b]\nc = 2\n");
    CHECK_EQ_INT(toml_remove_empty_table(d, SY_TBL, 2), 1);
    CHECK_EQ_STR(bytes_of(d), "a = 1\n\n[b]\nc = 2\n");
    toml_free(d);
}

static void test_value_norm_compares_strings_by_content(void)
{
    sbuf a = SBUF_INIT, b = SBUF_INIT, c = SBUF_INIT;
    toml_value_norm("\"switch\\u0079ard\"", 17, &a);
    toml_value_norm("'switchyard'", 12, &b);
    toml_value_norm("0", 1, &c);
    CHECK_EQ_STR(a.p, b.p);
    CHECK_EQ_STR(c.p, "r:0");
    sbuf q = SBUF_INIT, back = SBUF_INIT;
    toml_quote(&q, "a\"b\\c\n\x01");
    CHECK_EQ_STR(q.p, "\"a\\\"b\\\\c\\n\\u0001\"");
    CHECK_EQ_INT(toml_string_decode(q.p, q.len, &back), 0);
    CHECK_EQ_STR(back.p, "a\"b\\c\n\x01");
    sbuf_free(&a), sbuf_free(&b), sbuf_free(&c), sbuf_free(&q), sbuf_free(&back);
}

/* 60,000 headers, a third of them repeated [[arrays]] and a third tables
 * under them: indexing compares paths a bounded number of times per
 * header (it scanned every earlier statement per header, quadratic: a
 * 40,000-table config.toml took seconds to attach), and an edit, which
 * re-indexes, stays as cheap. */
static void test_indexing_work_is_linear_in_the_number_of_tables(void)
{
    enum { N = 20000 };
    sbuf t = SBUF_INIT;
    for (int i = 0; i < N; i++)
        sbuf_printf(&t, "[t%d]\nk = %d\n[[items]]\nname = \"%d\"\n[items.sub]\nx = 1\n[[a%d]]\n", i, i, i, i);
    toml_doc *d = parse_ok(t.p);
    CHECK(d != NULL);
    if (d) {
        printf("  %d headers: %zu path comparisons\n", 4 * N, toml_index_work(d));
        CHECK(toml_index_work(d) <= 8u * N);
        CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"http://x/v1\"", NULL, 0), 0);
        CHECK(toml_index_work(d) <= 8u * N);
        const char *items[] = {"items", "sub", "x"};
        CHECK_EQ_INT(toml_set(d, items, 3, "2", NULL, 0), -1); /* still under the array */
    }
    toml_free(d);
    sbuf_free(&t);
}

static void test_a_name_of_more_than_128_parts_is_refused(void)
{
    sbuf t = SBUF_INIT;
    sbuf_puts(&t, "[a");
    for (int i = 0; i < 128; i++)
        sbuf_puts(&t, ".a");
    sbuf_puts(&t, "]\n");
    char err[256] = "";
    CHECK(toml_parse(t.p, t.len, err, sizeof err) == NULL);
    CHECK(strstr(err, "128 parts") != NULL);
    sbuf_reset(&t);
    sbuf_puts(&t, "[a");
    for (int i = 0; i < 126; i++)
        sbuf_puts(&t, ".a");
    sbuf_puts(&t, "]\nk = 1\n");
    toml_doc *d = parse_ok(t.p);
    CHECK(d != NULL);
    toml_free(d);
    sbuf_free(&t);
}

int main(void)
{
    RUN(test_round_trip_of_real_world_shapes_is_byte_identical);
    RUN(test_refuses_what_it_cannot_parse_with_the_line);
    RUN(test_replacing_a_value_keeps_its_comment_and_spacing);
    RUN(test_new_top_level_key_goes_before_the_first_table_and_its_comments);
    RUN(test_new_table_is_appended_with_the_files_line_endings);
    RUN(test_statements_inside_multiline_strings_are_not_keys);
    RUN(test_dotted_and_quoted_keys_are_found_and_extended_in_place);
    RUN(test_keys_inside_inline_tables_are_refused_not_rewritten);
    RUN(test_array_of_tables_is_never_edited);
    RUN(test_empty_table_removal_keeps_a_table_with_user_comments);
    RUN(test_value_norm_compares_strings_by_content);
    RUN(test_indexing_work_is_linear_in_the_number_of_tables);
    RUN(test_a_name_of_more_than_128_parts_is_refused);
    return check_summary();
}
