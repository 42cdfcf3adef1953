/* test_toml_edit.c: the format-preserving TOML editor: what it parses and
 * what it refuses (with the line), that edits touch only the bytes of the
 * key they own (comments, CRLF, BOM, strings that look like statements,
 * dotted keys), where new keys and tables go, that removing what was
 * added gives the input back byte for byte, and that an edit, which
 * re-indexes only the statements around it, leaves the index exactly as
 * indexing the edited bytes afresh would. */
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

/* 80,000 headers, half of them [[arrays]] (one path repeated) and a
 * quarter tables under them: indexing compares paths a bounded number of
 * times per header (it scanned every earlier statement per header,
 * quadratic: a 40,000-table config.toml took seconds to attach), and an
 * edit, which re-indexes the statements around it, stays as cheap. */
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

/* An edit parses the few statements around it, not the document: the
 * attach of a 400,000-table config.toml makes nine of them. */
static void test_an_edit_parses_only_the_statements_around_it(void)
{
    enum { N = 20000 };
    sbuf t = SBUF_INIT;
    sbuf_puts(&t, "model = \"o3\"\n");
    for (int i = 0; i < N; i++)
        sbuf_printf(&t, "[t%d]\nk = %d\n", i, i);
    toml_doc *d = parse_ok(t.p);
    CHECK(d != NULL);
    if (!d)
        return;
    CHECK(toml_index_statements(d) >= 2u * N);
    const char *tk[] = {"t7", "k"}, *tnew[] = {"t7", "new"};
    CHECK_EQ_INT(toml_set(d, MP, 1, "\"switchyard\"", NULL, 0), 0); /* a new top-level key */
    CHECK(toml_index_statements(d) <= 2);
    CHECK_EQ_INT(toml_set(d, SY_NAME, 3, "\"switchyard\"", NULL, 0), 0); /* a new table at the end */
    CHECK(toml_index_statements(d) <= 3);
    CHECK_EQ_INT(toml_set(d, SY_URL, 3, "\"u\"", NULL, 0), 0); /* a key added to it */
    CHECK(toml_index_statements(d) <= 2);
    CHECK_EQ_INT(toml_set(d, tk, 2, "\"seven\"", NULL, 0), 0); /* a value replaced */
    CHECK(toml_index_statements(d) <= 2);
    CHECK_EQ_INT(toml_set(d, tnew, 2, "1", NULL, 0), 0); /* a key in a table in the middle */
    CHECK(toml_index_statements(d) <= 2);
    CHECK_EQ_INT(toml_remove(d, tk, 2, NULL, 0), 1);
    CHECK(toml_index_statements(d) <= 2);
    CHECK_EQ_INT(toml_remove(d, SY_URL, 3, NULL, 0), 1);
    CHECK_EQ_INT(toml_remove(d, SY_NAME, 3, NULL, 0), 1);
    CHECK_EQ_INT(toml_remove_empty_table(d, SY_TBL, 2), 1);
    CHECK(toml_index_statements(d) <= 2);
    CHECK(toml_index_check(d));
    toml_free(d);
    sbuf_free(&t);
}

/* A fixed-seed generator: the same documents and edits on every run. */
static uint32_t rnd_state = 12345;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

/* Every kind of edit on every shape (comments, CRLF, BOM, no final line
 * ending, multi-line values, dotted keys, [[arrays]], and values that are
 * themselves several lines or not TOML at all) leaves the index as a fresh
 * parse of the edited bytes would: the in-place update is exact, or the
 * editor fell back to re-indexing everything. A failed edit leaves the
 * bytes as they were. */
static void test_every_edit_leaves_the_index_as_a_fresh_parse_would(void)
{
    /* first by hand: a value that swallows the header below it (a
     * multi-line string closed in a comment) moves the keys after it to
     * the root */
    toml_doc *h = parse_ok("a = 1\n[t]\n# '''\nk = 2\n");
    const char *pa[] = {"a"}, *pk[] = {"k"}, *ptk[] = {"t", "k"};
    CHECK(h && get_is(h, ptk, 2, "2"));
    CHECK(h && toml_set(h, pa, 1, "'''", NULL, 0) == 0);
    CHECK(h && get_is(h, pk, 1, "2") && get_is(h, ptk, 2, NULL) && toml_index_check(h));
    toml_free(h);
    static const char *const parts[] = {
        "a = 1\n", "[t]\n", "[[arr]]\n", "[arr.sub]\n", "x = 2 # c\n", "# comment\n", "\n", "  \n",
        "b.c = \"x\"\n", "m = \"\"\"\nx = 1\n[y]\n\"\"\"\n", "arr2 = [\n  1, # one\n  2,\n]\n", "k = { x = 1 }\n",
        "[model_providers.switchyard]\n", "model_providers.switchyard.name = 'n'\n", "[model_providers]\n",
        "switchyard.base_url = \"u\"\n", "[b]\n", "d = 1979-05-27 07:32:00Z\n", "[\"q.r\"]\n", "a = 'lit'\r\n",
        "[t.u]\r\n", "model_provider = \"openai\"\n", "# '''\n",
    };
    static const char *const p0[] = {"model_provider"}, *p1[] = {"a"}, *p2[] = {"t", "a"},
                             *p3[] = {"model_providers", "switchyard", "name"},
                             *p4[] = {"model_providers", "switchyard", "base_url"}, *p5[] = {"arr", "x"},
                             *p6[] = {"arr", "sub", "x"}, *p7[] = {"b", "c"}, *p8[] = {"b", "d"},
                             *p9[] = {"t", "u", "v"}, *p10[] = {"q.r", "s"}, *p11[] = {"x"};
    static const char *const *const paths[] = {p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11};
    static const size_t npath[] = {1, 1, 2, 3, 3, 2, 3, 2, 2, 3, 2, 1};
    static const char *const raws[] = {
        "1", "\"s\"", "'''x\ny'''", "\"\"\"\n[q]\nr = 1\n\"\"\"", "[\n1,\n]", "1 # c", "{ a = 1 }", "true",
        /* values that are several statements, or no TOML at all */
        "\"\"\"", "'''", "1\n[zz]\nw = 2", "[", "1\n[[arr]]\n", "x\"",
    };
    int fast = 0, edits = 0;
    for (int doc = 0; doc < 400; doc++) {
        sbuf t = SBUF_INIT;
        if (rnd(6) == 0)
            sbuf_puts(&t, "\xEF\xBB\xBF");
        for (uint32_t i = 0, n = rnd(12); i < n; i++)
            sbuf_puts(&t, parts[rnd(sizeof parts / sizeof parts[0])]);
        if (rnd(4) == 0)
            sbuf_puts(&t, rnd(2) ? "# last" : "last = 1"); /* no final line ending */
        toml_doc *d = toml_parse(t.p ? t.p : "", t.len, NULL, 0);
        for (int k = 0; d && k < 12; k++) {
            size_t pi = rnd(sizeof paths / sizeof paths[0]), blen;
            sbuf before = SBUF_INIT;
            const char *b = toml_bytes(d, &blen);
            sbuf_append(&before, b, blen);
            uint32_t op = rnd(5);
            int rc = op < 3   ? toml_set(d, paths[pi], npath[pi], raws[rnd(sizeof raws / sizeof raws[0])], NULL, 0)
                     : op < 4 ? toml_remove(d, paths[pi], npath[pi], NULL, 0)
                              : toml_remove_empty_table(d, paths[pi], npath[pi] - (npath[pi] > 1));
            b = toml_bytes(d, &blen);
            if (rc < 0)
                CHECK(blen == before.len && memcmp(b, before.p ? before.p : "", blen) == 0);
            if (!toml_index_check(d)) {
                fprintf(stderr, "  doc %d edit %d (op %u, path %zu): the index differs from a fresh parse of\n"
                                "---\n%.*s---\n", doc, k, op, pi, (int)blen, b);
                CHECK(0);
                k = 12;
            }
            int changed = blen != before.len || memcmp(b, before.p ? before.p : "", blen) != 0;
            edits += changed;
            fast += changed && toml_index_statements(d) < 4;
            sbuf_free(&before);
        }
        toml_free(d);
        sbuf_free(&t);
    }
    printf("  %d edits, %d of them re-indexed in place\n", edits, fast);
    CHECK(fast > edits / 2);
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
    RUN(test_an_edit_parses_only_the_statements_around_it);
    RUN(test_every_edit_leaves_the_index_as_a_fresh_parse_would);
    RUN(test_a_name_of_more_than_128_parts_is_refused);
    return check_summary();
}
