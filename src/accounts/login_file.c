/* login_file.c: reading and writing login files (see login_file.h). */
#include "accounts/login_file.h"
#include "base/budget.h"
#include "base/json.h"
#include "base/jwt.h"
#include "base/text.h"
#include "upstream/model_list.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define LOGIN_FILE_MAX (64u << 20)
#define LOGIN_CHATGPT_BASE_URL "https://chatgpt.com/backend-api/codex"

/* ---------- small helpers ---------- */

static void login_entry_free(login_entry *e)
{
    sbuf_secret_free(e->access_token);
    sbuf_secret_free(e->refresh_token);
    sbuf_secret_free(e->id_token);
    free(e->name), free(e->base_url), free(e->account_id), free(e->email), free(e->plan_type), free(e->model_map);
    free(e->models);
    memset(e, 0, sizeof *e);
}

void login_list_free(login_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        login_entry_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int64_t login_time_parse(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!rest)
        return 0;
    int64_t t = (int64_t)timegm(&tm);
    if (*rest == '.')
        while (*++rest >= '0' && *rest <= '9') {
        }
    int sh, sm;
    if ((*rest == '+' || *rest == '-') && sscanf(rest + 1, "%2d:%2d", &sh, &sm) == 2)
        t -= (*rest == '+' ? 1 : -1) * (int64_t)(sh * 3600 + sm * 60);
    return t > 0 ? t : 0;
}

/* The first string member of obj among the names (NULL-terminated list). */
static const char *login_str(const json_value *obj, const char *const *names)
{
    for (; obj && *names; names++) {
        const char *v = json_get_str(obj, *names);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* A time member: unix seconds (or milliseconds) as a number, or RFC 3339 text. */
static int64_t login_time(const json_value *obj, const char *const *names)
{
    for (; obj && *names; names++) {
        json_value *v = json_get(obj, *names);
        int64_t t;
        if (v && v->type == JSON_NUMBER && v->num > 0)
            /* seconds, or milliseconds past 1e11; a time past year 9999 is no time */
            return json_num_to_int64(v->num > 1e11 ? v->num / 1000 : v->num, 1, 253402300799, &t) == 0 ? t : 0;
        if (v && v->type == JSON_STRING)
            return login_time_parse(v->str);
    }
    return 0;
}

/* ---------- one entry ---------- */

static const char *const k_access[] = {"access_token", "accessToken", NULL};
static const char *const k_refresh[] = {"refresh_token", "refreshToken", NULL};
static const char *const k_id[] = {"id_token", "idToken", NULL};
static const char *const k_acct[] = {"chatgpt_account_id", "account_id", "accountId", "chatgptAccountId", NULL};
static const char *const k_email[] = {"email", NULL};
static const char *const k_plan[] = {"plan_type", "planType", "chatgpt_plan_type", NULL};
static const char *const k_name[] = {"name", "label", NULL};
static const char *const k_expires[] = {"token_expires_at", "expires_at", "expiresAt", "expired", NULL};
static const char *const k_last[] = {"last_refresh_at", "last_refresh", "lastRefresh", NULL};

/* Where an entry keeps its tokens: Codex auth.json and our export put them
 * under "tokens", sub2api under "credentials", CodexManager under
 * "authJson"."tokens"; a flat object holds them itself. */
static const json_value *login_token_holder(const json_value *e)
{
    const json_value *auth = json_get(e, "authJson");
    if (!auth)
        auth = json_get(e, "auth_json");
    if (auth && json_get(auth, "tokens"))
        return json_get(auth, "tokens");
    if (json_get(e, "tokens"))
        return json_get(e, "tokens");
    if (json_get(e, "credentials"))
        return json_get(e, "credentials");
    return e;
}

static int login_entry_kind(const json_value *e, login_entry *le, char *err, size_t errlen)
{
    const char *kind = json_get_str(e, "kind");
    const char *platform = json_get_str(e, "platform");
    le->kind = ACCOUNT_CHATGPT;
    const char *bad = kind && account_kind_parse(kind, &le->kind) != 0 ? kind
                      : platform && strcasecmp(platform, "openai") != 0 ? platform : NULL;
    if (bad) { /* the value is quoted on the terminal: escaped, cut on a character */
        sbuf esc = SBUF_INIT;
        text_escape(&esc, bad, sbuf_utf8_cut(bad, strlen(bad), 40), NULL);
        if (bad == kind)
            snprintf(err, errlen, "%s: kind: '%s' is not api_key, chatgpt or aggregate", le->label, esc.p);
        else
            snprintf(err, errlen, "%s: platform: '%s' is not an OpenAI login", le->label, esc.p);
        sbuf_free(&esc);
        return -1;
    }
    const char *type = json_get_str(e, "type"); /* sub2api: "oauth" logins, "apikey" keys */
    if (platform && type && strcasecmp(type, "apikey") == 0)
        le->kind = ACCOUNT_API_KEY;
    return 0;
}

/* Fills what the id and access tokens' claims say and the entry did not. */
static void login_entry_claims(login_entry *le)
{
    jwt_claims c;
    if (le->id_token && jwt_claims_read(le->id_token, &c) == 0) {
        if (!le->email)
            le->email = sbuf_strdup_nonempty(c.email);
        if (!le->account_id)
            le->account_id = sbuf_strdup_nonempty(c.chatgpt_account_id);
        if (!le->plan_type)
            le->plan_type = sbuf_strdup_nonempty(c.plan_type);
    }
    if (le->access_token && jwt_claims_read(le->access_token, &c) == 0) {
        if (c.exp)
            le->expires_at = c.exp;
        if (!le->account_id)
            le->account_id = sbuf_strdup_nonempty(c.chatgpt_account_id);
    }
}

static int login_entry_numbers(const json_value *e, login_entry *le, char *err, size_t errlen)
{
    json_value *sort = json_get(e, "sort");
    if (!sort)
        sort = json_get(e, "priority");
    json_value *conc = json_get(e, "max_concurrency");
    if (!conc)
        conc = json_get(e, "concurrency");
    int64_t sv = 0, cv = -1; /* range-checked before they become ints (json_num_to_int64) */
    if (sort && (sort->type != JSON_NUMBER || json_num_to_int64(sort->num, INT_MIN, INT_MAX, &sv) != 0)) {
        snprintf(err, errlen, "%s: sort: expected an integer number", le->label);
        return -1;
    }
    if (conc && (conc->type != JSON_NUMBER || json_num_to_int64(conc->num, 0, INT_MAX, &cv) != 0)) {
        snprintf(err, errlen, "%s: max_concurrency: expected an integer number >= 0", le->label);
        return -1;
    }
    le->has_sort = sort != NULL;
    le->sort = (int)sv;
    le->max_concurrency = (int)cv;
    return 0;
}

/* An integer setting in [0, INT_MAX]; absent leaves *out as it is. */
static int login_entry_count(const json_value *e, const char *key, login_entry *le, int *out, char *err,
                             size_t errlen)
{
    json_value *v = json_get(e, key);
    int64_t n = 0;
    if (!v || v->type == JSON_NULL)
        return 0;
    if (v->type != JSON_NUMBER || json_num_to_int64(v->num, 0, INT_MAX, &n) != 0 || (double)n != v->num) {
        snprintf(err, errlen, "%s: %s: expected an integer number >= 0", le->label, key);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* A true/false setting; absent leaves *out as it is. */
static int login_entry_flag(const json_value *e, const char *key, login_entry *le, int *out, char *err, size_t errlen)
{
    json_value *v = json_get(e, key);
    if (!v || v->type == JSON_NULL)
        return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE) {
        snprintf(err, errlen, "%s: %s: expected true or false", le->label, key);
        return -1;
    }
    *out = v->type == JSON_TRUE;
    return 0;
}

/* The settings switchyard's export carries beside sort and concurrency
 * (weight, limits, budget, context fallback, enabled), checked as the
 * flags of `account add` are. */
static int login_entry_settings(const json_value *e, login_entry *le, char *err, size_t errlen)
{
    int enabled = 1;
    if (login_entry_count(e, "weight", le, &le->weight, err, errlen) != 0 ||
        login_entry_count(e, "max_rpm", le, &le->max_rpm, err, errlen) != 0 ||
        login_entry_count(e, "max_tpm", le, &le->max_tpm, err, errlen) != 0 ||
        login_entry_flag(e, "context_fallback", le, &le->context_fallback, err, errlen) != 0 ||
        login_entry_flag(e, "enabled", le, &enabled, err, errlen) != 0)
        return -1;
    le->disabled = !enabled;
    json_value *b = json_get(e, "budget_usd");
    if (b && b->type != JSON_NULL && (b->type != JSON_NUMBER || !(b->num >= 0 && b->num < 1e12))) {
        snprintf(err, errlen, "%s: budget_usd: expected an amount in USD >= 0", le->label);
        return -1;
    }
    le->budget_usd = b && b->type == JSON_NUMBER ? b->num : 0;
    json_value *per = json_get(e, "budget_period");
    if (per && per->type != JSON_NULL &&
        (per->type != JSON_STRING || strlen(per->str) >= sizeof le->budget_period ||
         budget_period_valid(per->str) != 0)) {
        snprintf(err, errlen, "%s: budget_period: expected month or <N>d (e.g. 7d)", le->label);
        return -1;
    }
    if (per && per->type == JSON_STRING)
        snprintf(le->budget_period, sizeof le->budget_period, "%s", per->str);
    json_value *pf = json_get(e, "prefill"); /* an operator's word: auto, yes or no */
    if (pf && pf->type != JSON_NULL &&
        (pf->type != JSON_STRING || account_prefill_parse(pf->str, &le->prefill) != 0 ||
         le->prefill == PREFILL_REFUSED)) {
        snprintf(err, errlen, "%s: prefill: expected auto, yes or no", le->label);
        return -1;
    }
    json_value *sp = json_get(e, "speaks"); /* the operator's word on the upstream's dialects */
    if (sp && sp->type != JSON_NULL && (sp->type != JSON_STRING || account_speaks_parse(sp->str, &le->speaks) != 0)) {
        snprintf(err, errlen, "%s: speaks: expected auto, responses, chat or both", le->label);
        return -1;
    }
    return 0;
}

/* What an entry names (and its tokens' claims said) becomes a header
 * (ChatGPT-Account-Id), an account name, log and terminal lines: a value
 * with a control character or invalid UTF-8 refuses the file. */
static int login_entry_check(const login_entry *le, char *err, size_t errlen)
{
    const struct {
        const char *what, *v;
    } f[] = {{"name", le->name},   {"account_id", le->account_id}, {"email", le->email},
             {"plan_type", le->plan_type}, {"base_url", le->base_url}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        const char *why = text_check_str(f[i].v);
        if (why) {
            snprintf(err, errlen, "%s: %s: %s", le->label, f[i].what, why);
            return -1;
        }
    }
    /* tokens go in JSON bodies only, but a token never holds one either */
    const char *bad = text_check_str(le->refresh_token) ? "refresh_token" : text_check_str(le->id_token) ? "id_token" : NULL;
    if (bad) {
        snprintf(err, errlen, "%s: %s: contains a control character or invalid UTF-8", le->label, bad);
        return -1;
    }
    return 0;
}

/* "models": the --models list as switchyard's export writes it ("a,b"),
 * or an array of names; checked as --models is (model_list_normalize). */
static int login_entry_models(const json_value *m, login_entry *le, char *err, size_t errlen)
{
    if (!m || m->type == JSON_NULL)
        return 0;
    sbuf in = SBUF_INIT, out = SBUF_INIT;
    char why[160] = "expected a string of comma-separated model names or an array of names";
    int ok = m->type == JSON_STRING;
    if (ok)
        sbuf_puts(&in, m->str);
    else if (m->type == JSON_ARRAY) {
        ok = 1;
        for (const json_value *v = m->child; v && ok; v = v->next) {
            ok = v->type == JSON_STRING && !strchr(v->str, ',');
            if (ok) {
                sbuf_puts(&in, in.len ? "," : "");
                sbuf_puts(&in, v->str);
            }
        }
    }
    ok = ok && model_list_normalize(in.p ? in.p : "", &out, why, sizeof why) == 0;
    if (ok)
        le->models = sbuf_strdup_nonempty(out.p);
    else
        snprintf(err, errlen, "%s: models: %s", le->label, why);
    sbuf_free(&in);
    sbuf_free(&out);
    return ok ? 0 : -1;
}

static int login_entry_read(const json_value *e, login_entry *le, char *err, size_t errlen)
{
    if (e->type != JSON_OBJECT) {
        snprintf(err, errlen, "%s: expected a JSON object", le->label);
        return -1;
    }
    if (login_entry_kind(e, le, err, errlen) != 0 || login_entry_numbers(e, le, err, errlen) != 0 ||
        login_entry_settings(e, le, err, errlen) != 0)
        return -1;
    const json_value *t = login_token_holder(e);
    le->access_token = sbuf_strdup_nonempty(login_str(t, k_access));
    if (!le->access_token && le->kind != ACCOUNT_CHATGPT)
        le->access_token = sbuf_strdup_nonempty(json_get_str(t, "token"));
    le->refresh_token = sbuf_strdup_nonempty(login_str(t, k_refresh));
    le->id_token = sbuf_strdup_nonempty(login_str(t, k_id));
    le->account_id = sbuf_strdup_nonempty(login_str(t, k_acct));
    if (!le->account_id)
        le->account_id = sbuf_strdup_nonempty(login_str(e, k_acct));
    le->email = sbuf_strdup_nonempty(login_str(e, k_email));
    if (!le->email)
        le->email = sbuf_strdup_nonempty(login_str(t, k_email));
    le->plan_type = sbuf_strdup_nonempty(login_str(e, k_plan));
    le->name = sbuf_strdup_nonempty(login_str(e, k_name));
    le->base_url = sbuf_strdup_nonempty(json_get_str(e, "base_url"));
    json_value *mm = json_get(e, "model_map");
    if (mm && mm->type == JSON_OBJECT) {
        sbuf b = SBUF_INIT;
        json_write(&b, mm);
        le->model_map = sbuf_strdup_nonempty(b.p);
        sbuf_free(&b);
    }
    if (login_entry_models(json_get(e, "models"), le, err, errlen) != 0)
        return -1;
    le->last_refresh_at = login_time(e, k_last);
    le->expires_at = login_time(t, k_expires);
    if (!le->expires_at)
        le->expires_at = login_time(e, k_expires);
    login_entry_claims(le);
    if (!le->access_token && json_get_str(e, "OPENAI_API_KEY")) {
        snprintf(err, errlen, "%s: tokens.access_token: missing: this Codex login uses an API key"
                 " (OPENAI_API_KEY), not ChatGPT; add the key with --token instead", le->label);
        return -1;
    }
    if (!le->access_token) {
        snprintf(err, errlen, "%s: access_token: missing (an export written without --with-secrets holds no tokens)",
                 le->label);
        return -1;
    }
    for (const char *p = le->access_token; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            snprintf(err, errlen, "%s: access_token: contains whitespace or control characters", le->label);
            return -1;
        }
    if (login_entry_check(le, err, errlen) != 0)
        return -1;
    if (le->kind == ACCOUNT_CHATGPT && !le->account_id) {
        snprintf(err, errlen, "%s: account_id: missing (not in the entry nor in its tokens' claims)", le->label);
        return -1;
    }
    return 0;
}

/* ---------- a whole file ---------- */

/* The login objects of a document: an array, an export holding "accounts"
 * (sub2api may wrap it in "data"), or one login. */
static const json_value *login_doc_entries(const json_value *doc, int *single)
{
    *single = 0;
    if (doc->type == JSON_ARRAY)
        return doc;
    const json_value *d = json_get(doc, "data");
    if (d && json_get(d, "accounts"))
        doc = d;
    const json_value *acc = json_get(doc, "accounts");
    if (acc && acc->type == JSON_ARRAY)
        return acc;
    *single = 1;
    return doc;
}

static login_entry *login_list_push(login_list *l)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v)
            abort();
    }
    login_entry *e = &l->v[l->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static int login_doc_add(const char *name, const json_value *doc, size_t *index, login_list *out, char *err,
                         size_t errlen)
{
    int single;
    const json_value *entries = login_doc_entries(doc, &single);
    const json_value *e = single ? entries : entries->child;
    for (; e; e = single ? NULL : e->next) {
        login_entry *le = login_list_push(out);
        ++*index;
        const char *label = e->type == JSON_OBJECT ? login_str(e, k_name) : NULL;
        /* the label goes into error lines on the terminal: the name escaped, cut on a character */
        sbuf esc = SBUF_INIT;
        if (label)
            text_escape(&esc, label, sbuf_utf8_cut(label, strlen(label), 40), NULL);
        snprintf(le->label, sizeof le->label, "%s entry %zu%s%s%s", name, *index, label ? " (" : "",
                 label ? esc.p : "", label ? ")" : "");
        sbuf_free(&esc);
        if (login_entry_read(e, le, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* End of the JSON value starting at p (an object or array): matching
 * brackets outside strings. Returns its length, 0 if it never closes. */
static size_t login_value_end(const char *p, size_t len)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return 0;
}

int login_file_parse(const char *name, const char *text, size_t len, login_list *out, char *err, size_t errlen)
{
    size_t first = out->n, index = 0, off = 0;
    int rc = 0, docs = 0;
    while (rc == 0) {
        while (off < len && (unsigned char)text[off] <= ' ')
            off++;
        if (off >= len)
            break;
        size_t n = text[off] == '{' || text[off] == '[' ? login_value_end(text + off, len - off) : 0;
        char perr[128] = "";
        json_value *doc = n ? json_parse(text + off, n, perr, sizeof perr) : NULL;
        if (!doc) {
            /* entries count from 1 here as in every other message: this is the next one */
            snprintf(err, errlen, "%s entry %zu: not JSON (byte %zu): %s", name, index + 1, off,
                     perr[0] ? perr : "expected an object or an array");
            rc = -1;
            break;
        }
        rc = login_doc_add(name, doc, &index, out, err, errlen);
        json_free(doc);
        off += n;
        docs++;
    }
    if (rc == 0 && index == 0) {
        snprintf(err, errlen, "%s: holds no logins", name);
        rc = -1;
    }
    if (rc != 0) { /* nothing partial */
        for (size_t i = first; i < out->n; i++)
            login_entry_free(&out->v[i]);
        out->n = first;
    }
    (void)docs;
    return rc;
}

int login_file_read(const char *path, login_list *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    sbuf b = SBUF_INIT;
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0 && b.len <= LOGIN_FILE_MAX)
        sbuf_append(&b, buf, n);
    int bad = ferror(f) || b.len > LOGIN_FILE_MAX;
    fclose(f);
    explicit_bzero(buf, sizeof buf);
    int rc = -1;
    if (bad)
        snprintf(err, errlen, "cannot read %s (error or larger than %u bytes)", path, LOGIN_FILE_MAX);
    else
        rc = login_file_parse(path, b.p ? b.p : "", b.len, out, err, errlen);
    sbuf_secret_wipe(&b);
    return rc;
}

void login_entry_to_account(const login_entry *e, account_new *an, char *namebuf, size_t n)
{
    memset(an, 0, sizeof *an);
    if (e->name || e->email) { /* cut on a character, not inside one */
        sbuf_copy_cstr(namebuf, n, e->name ? e->name : e->email);
    } else {
        const char *id = e->account_id ? e->account_id : "login";
        snprintf(namebuf, n, "chatgpt-%.*s", (int)sbuf_utf8_cut(id, strlen(id), 12), id);
    }
    an->name = namebuf;
    an->kind = e->kind;
    an->base_url = e->base_url ? e->base_url : e->kind == ACCOUNT_CHATGPT ? LOGIN_CHATGPT_BASE_URL : NULL;
    an->token = e->access_token;
    an->chatgpt_account_id = e->account_id;
    an->model_map = e->model_map;
    an->models = e->models;
    an->sort = e->sort;
    an->max_concurrency = e->max_concurrency;
    an->weight = e->weight;
    an->max_rpm = e->max_rpm;
    an->max_tpm = e->max_tpm;
    an->budget_usd = e->budget_usd;
    an->budget_period = e->budget_period[0] ? e->budget_period : NULL;
    an->context_fallback = e->context_fallback;
    an->disabled = e->disabled;
    an->prefill = e->prefill;
    an->speaks = e->speaks;
    login_entry_login(e, &an->login);
}

void login_entry_login(const login_entry *e, account_login *out)
{
    out->refresh_token = e->refresh_token;
    out->id_token = e->id_token;
    out->email = e->email;
    out->plan_type = e->plan_type;
    out->token_expires_at = e->expires_at;
    /* a login without a date was current when it was read */
    out->last_refresh_at = e->last_refresh_at ? e->last_refresh_at : (int64_t)time(NULL);
}

/* ---------- export ---------- */

static void login_put_str(sbuf *o, const char *key, const char *v)
{
    if (!v)
        return;
    sbuf_printf(o, ",\"%s\":", key);
    sbuf_json_str(o, v, strlen(v));
}

/* An amount as the shortest JSON number that reads back the same (0.1, not
 * 0.10000000000000001); anything a budget cannot be writes 0 (none). */
static void login_put_usd(sbuf *o, double v)
{
    char b[40];
    if (!(v >= 0 && v < 1e12))
        v = 0;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    sbuf_puts(o, b);
}

void login_file_write(sbuf *out, const account *a, size_t n, int with_secrets)
{
    sbuf_printf(out, "{\"format\":\"switchyard.accounts\",\"version\":1,\"exported_at\":%lld,\"with_secrets\":%s,"
                     "\"accounts\":[",
                (long long)time(NULL), with_secrets ? "true" : "false");
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(out, i ? ",\n" : "\n");
        sbuf_puts(out, "{\"name\":");
        sbuf_json_str(out, a[i].name, strlen(a[i].name));
        sbuf_printf(out, ",\"kind\":\"%s\"", account_kind_name(a[i].kind));
        login_put_str(out, "base_url", a[i].base_url);
        sbuf_printf(out, ",\"sort\":%d,\"max_concurrency\":%d,\"enabled\":%s", a[i].sort, a[i].max_concurrency,
                    a[i].enabled ? "true" : "false");
        sbuf_printf(out, ",\"weight\":%d,\"max_rpm\":%d,\"max_tpm\":%d,\"budget_usd\":", a[i].weight,
                    a[i].max_rpm, a[i].max_tpm);
        login_put_usd(out, a[i].budget_usd);
        login_put_str(out, "budget_period", a[i].budget_period[0] ? a[i].budget_period : NULL);
        sbuf_printf(out, ",\"context_fallback\":%s", a[i].context_fallback ? "true" : "false");
        login_put_str(out, "chatgpt_account_id", a[i].chatgpt_account_id);
        login_put_str(out, "email", a[i].email);
        login_put_str(out, "plan_type", a[i].plan_type);
        if (a[i].model_map)
            sbuf_printf(out, ",\"model_map\":%s", a[i].model_map); /* validated JSON object */
        login_put_str(out, "models", a[i].models && *a[i].models ? a[i].models : NULL);
        /* the operator's word; a refusal the gateway learned is its own finding, learned again elsewhere */
        login_put_str(out, "prefill", a[i].prefill == PREFILL_YES ? "yes" : a[i].prefill == PREFILL_NO ? "no" : NULL);
        /* declared only: what the gateway learned is learned again wherever it is imported */
        login_put_str(out, "speaks", a[i].speaks != SPEAKS_AUTO ? account_speaks_name(a[i].speaks) : NULL);
        sbuf_printf(out, ",\"token_expires_at\":%lld,\"last_refresh_at\":%lld", (long long)a[i].token_expires_at,
                    (long long)a[i].last_refresh_at);
        login_put_str(out, "needs_login", a[i].login_error);
        if (with_secrets) {
            sbuf_puts(out, ",\"tokens\":{\"access_token\":");
            sbuf_json_str(out, a[i].token, strlen(a[i].token));
            login_put_str(out, "refresh_token", a[i].refresh_token);
            login_put_str(out, "id_token", a[i].id_token);
            sbuf_puts(out, "}");
        }
        sbuf_puts(out, "}");
    }
    sbuf_puts(out, "\n]}\n");
}
