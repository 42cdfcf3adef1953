/* shared_state.c: the rest, login and message texts of shared state (see
 * shared_state.h). Merging only ever lengthens a rest: a message out of
 * order, or a stale key read at a resync, cannot shorten one (a rest
 * cleared by `account reset` is cleared on the instance it was run on; see
 * docs/scale-out.md). */
#include "shared/shared_state.h"
#include "base/text.h"
#include "policy/policy.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A time field: a finite number in [0, now + SHARED_FUTURE_MAX_S]; -1 otherwise. */
static double shared_time(const json_value *obj, const char *key, double now)
{
    const json_value *v = json_get(obj, key);
    if (!v || v->type != JSON_NUMBER || !isfinite(v->num) || v->num < 0 || v->num > now + SHARED_FUTURE_MAX_S)
        return -1;
    return v->num;
}

static int shared_step(const json_value *obj, const char *key)
{
    int64_t s;
    return json_get_int64(obj, key, 0, SHARED_LADDER_MAX, &s) == 0 ? (int)s : -1;
}

void shared_rest_write(const pool_account *pa, sbuf *out)
{
    const account_state *st = &pa->st;
    sbuf_printf(out, "{\"until\":%.3f,\"l429\":%.3f,\"step\":%d,\"class\":", st->cooldown_until, st->last_429_at,
                st->ladder_step);
    sbuf_json_str(out, st->last_error, strnlen(st->last_error, sizeof st->last_error));
    sbuf_printf(out, ",\"brk\":%.3f,\"fam\":[", pa->breaker.state == BREAKER_OPEN ? pa->breaker.open_until : 0.0);
    int first = 1;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++) {
        const account_family *f = &st->fam[i];
        if (!f->family[0])
            continue;
        sbuf_puts(out, first ? "{\"f\":" : ",{\"f\":");
        first = 0;
        sbuf_json_str(out, f->family, strnlen(f->family, sizeof f->family));
        sbuf_puts(out, ",\"m\":");
        sbuf_json_str(out, f->model, strnlen(f->model, sizeof f->model));
        sbuf_printf(out, ",\"until\":%.3f,\"l429\":%.3f,\"step\":%d}", f->until, f->last_429_at, f->ladder_step);
    }
    sbuf_puts(out, "]}");
}

long long shared_rest_ttl_ms(const pool_account *pa, double now)
{
    double last = pa->st.cooldown_until;
    if (pa->breaker.state == BREAKER_OPEN && pa->breaker.open_until > last)
        last = pa->breaker.open_until;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++)
        if (pa->st.fam[i].family[0] && pa->st.fam[i].until > last)
            last = pa->st.fam[i].until;
    if (!(last > now)) /* not resting: the ladder still remembers the 429 for the hour */
        last = now;
    double s = last - now + 3600.0;
    if (!(s >= 60.0))
        s = 60.0;
    if (s > 30.0 * 86400)
        s = 30.0 * 86400;
    return (long long)(s * 1000.0);
}

/* A text member into dst (cap bytes) when it is a string that fits and
 * text_check accepts; else dst stays. */
static void shared_copy_text(const json_value *obj, const char *key, char *dst, size_t cap)
{
    const json_value *v = json_get(obj, key);
    if (v && v->type == JSON_STRING && v->str_len < cap && !text_check(v->str, v->str_len))
        memcpy(dst, v->str, v->str_len + 1);
}

static int shared_family_merge(pool_account *pa, const json_value *f, double now)
{
    const json_value *name = json_get(f, "f");
    if (!name || name->type != JSON_STRING || !name->str_len || name->str_len >= ACCOUNT_FAMILY_MAX ||
        text_check(name->str, name->str_len))
        return 0;
    double until = shared_time(f, "until", now), l429 = shared_time(f, "l429", now);
    int step = shared_step(f, "step");
    account_family *slot = NULL;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++)
        if (strcmp(pa->st.fam[i].family, name->str) == 0)
            slot = &pa->st.fam[i];
    if (!slot) {
        if (until <= now) /* an ended rest does not evict a slot of ours */
            return 0;
        slot = pool_family_slot(pa, name->str);
    }
    int changed = 0;
    if (until > slot->until) {
        slot->until = until;
        changed = 1;
    }
    if (l429 > slot->last_429_at) {
        slot->last_429_at = l429;
        if (step >= 0)
            slot->ladder_step = step;
        changed = 1;
    }
    if (!slot->model[0])
        shared_copy_text(f, "m", slot->model, sizeof slot->model);
    return changed;
}

int shared_rest_merge(pool_account *pa, const json_value *rest, double now)
{
    if (!rest || rest->type != JSON_OBJECT)
        return -1;
    int changed = 0;
    account_state *st = &pa->st;
    double until = shared_time(rest, "until", now), l429 = shared_time(rest, "l429", now);
    if (until > st->cooldown_until) {
        st->cooldown_until = until;
        changed = 1;
    }
    if (l429 > st->last_429_at) {
        int step = shared_step(rest, "step");
        st->last_429_at = l429;
        if (step >= 0)
            st->ladder_step = step;
        shared_copy_text(rest, "class", st->last_error, sizeof st->last_error);
        changed = 1;
    }
    double brk = shared_time(rest, "brk", now);
    if (brk > now && (pa->breaker.state != BREAKER_OPEN || brk > pa->breaker.open_until)) {
        pa->breaker.state = BREAKER_OPEN; /* after it: half-open, one probe (breaker.c) */
        pa->breaker.open_until = brk;
        changed = 1;
    }
    const json_value *fam = json_get(rest, "fam");
    if (fam && fam->type == JSON_ARRAY) {
        size_t i = 0;
        for (const json_value *f = fam->child; f && i < 2 * ACCOUNT_FAMILIES; f = f->next, i++)
            if (f->type == JSON_OBJECT)
                changed |= shared_family_merge(pa, f, now);
    }
    return changed;
}

/* ---------- logins ---------- */

static void shared_login_member(sbuf *out, const char *key, const char *v)
{
    if (!v)
        return;
    sbuf_printf(out, ",\"%s\":", key);
    sbuf_json_str(out, v, strlen(v));
}

void shared_login_write(const account *a, sbuf *out)
{
    sbuf_puts(out, "{\"token\":");
    sbuf_json_str(out, a->token ? a->token : "", a->token ? strlen(a->token) : 0);
    shared_login_member(out, "refresh_token", a->refresh_token);
    shared_login_member(out, "id_token", a->id_token);
    shared_login_member(out, "email", a->email);
    shared_login_member(out, "plan_type", a->plan_type);
    shared_login_member(out, "chatgpt_account_id", a->chatgpt_account_id);
    sbuf_printf(out, ",\"expires_at\":%lld,\"last_refresh_at\":%lld}", (long long)a->token_expires_at,
                (long long)a->last_refresh_at);
}

/* A token: 1..16 KiB, no whitespace or control character. */
static const char *shared_token(const json_value *doc, const char *key)
{
    const json_value *v = json_get(doc, key);
    if (!v || v->type != JSON_STRING || !v->str_len || v->str_len > 16384 || strlen(v->str) != v->str_len)
        return NULL;
    for (size_t i = 0; i < v->str_len; i++)
        if ((unsigned char)v->str[i] <= ' ' || v->str[i] == 0x7f)
            return NULL;
    return v->str;
}

static char *shared_claim(const json_value *doc, const char *key)
{
    const json_value *v = json_get(doc, key);
    if (!v || v->type != JSON_STRING || !v->str_len || v->str_len > 512 || text_check(v->str, v->str_len))
        return NULL;
    return sbuf_strdup_nonempty(v->str);
}

int shared_login_read(const json_value *doc, account *out)
{
    const char *token = doc && doc->type == JSON_OBJECT ? shared_token(doc, "token") : NULL;
    if (!token)
        return -1;
    const json_value *rt = json_get(doc, "refresh_token"), *it = json_get(doc, "id_token");
    const char *refresh = shared_token(doc, "refresh_token"), *id = shared_token(doc, "id_token");
    if ((rt && !refresh) || (it && !id))
        return -1; /* a login half usable is none: the refresh token is what must not be lost */
    int64_t exp = 0, last = 0;
    json_get_int64(doc, "expires_at", 0, INT64_C(1) << 40, &exp);
    json_get_int64(doc, "last_refresh_at", 0, INT64_C(1) << 40, &last);
    out->token = sbuf_strdup_nonempty(token);
    out->refresh_token = sbuf_strdup_nonempty(refresh);
    out->id_token = sbuf_strdup_nonempty(id);
    out->email = shared_claim(doc, "email");
    out->plan_type = shared_claim(doc, "plan_type");
    out->chatgpt_account_id = shared_claim(doc, "chatgpt_account_id");
    out->token_expires_at = exp;
    out->last_refresh_at = last;
    return 0;
}

/* ---------- messages ---------- */

void shared_message_write(sbuf *out, const char *type, const char *from, const char *name, const char *body)
{
    sbuf_puts(out, "{\"t\":");
    sbuf_json_str(out, type, strlen(type));
    sbuf_puts(out, ",\"from\":");
    sbuf_json_str(out, from, strlen(from));
    sbuf_puts(out, ",\"name\":");
    sbuf_json_str(out, name, strlen(name));
    if (body) {
        sbuf_puts(out, ",\"body\":");
        sbuf_puts(out, body);
    }
    sbuf_puts(out, "}");
}

static const char *shared_short_str(const json_value *doc, const char *key)
{
    const json_value *v = json_get(doc, key);
    return v && v->type == JSON_STRING && v->str_len && v->str_len < 256 && strlen(v->str) == v->str_len ? v->str
                                                                                                         : NULL;
}

int shared_message_read(const char *p, size_t n, shared_message *m)
{
    memset(m, 0, sizeof *m);
    if (n > (1u << 20))
        return -1;
    json_value *doc = json_parse(p, n, NULL, 0);
    if (!doc || doc->type != JSON_OBJECT)
        goto bad;
    m->type = shared_short_str(doc, "t");
    m->from = shared_short_str(doc, "from");
    m->name = shared_short_str(doc, "name");
    if (!m->type || !m->from || !m->name)
        goto bad;
    m->body = json_get(doc, "body");
    m->doc = doc;
    return 0;
bad:
    json_free(doc);
    memset(m, 0, sizeof *m);
    return -1;
}

/* ---------- usage numbers ---------- */

static void shared_usage_window(sbuf *out, double used, double window_s, double reset_at)
{
    sbuf_puts(out, "[");
    sbuf_put_fixed(out, used, 3);
    sbuf_puts(out, ",");
    sbuf_put_fixed(out, window_s, 0);
    sbuf_puts(out, ",");
    sbuf_put_fixed(out, reset_at, 3);
    sbuf_puts(out, "]");
}

void shared_usage_write(const account_state *st, sbuf *out)
{
    sbuf_puts(out, "{\"at\":");
    sbuf_put_fixed(out, st->usage_polled_at, 3);
    sbuf_puts(out, ",\"status\":");
    sbuf_put_int(out, st->usage_poll_status);
    sbuf_puts(out, ",\"plan\":");
    sbuf_json_str(out, st->plan_type, strlen(st->plan_type));
    sbuf_puts(out, ",\"p\":");
    shared_usage_window(out, st->primary_used_pct, st->primary_window_s, st->primary_reset_at);
    sbuf_puts(out, ",\"s\":");
    shared_usage_window(out, st->secondary_used_pct, st->secondary_window_s, st->secondary_reset_at);
    sbuf_puts(out, ",\"cr\":[");
    sbuf_put_int(out, st->has_credits);
    sbuf_puts(out, ",");
    sbuf_put_int(out, st->credits_unlimited);
    sbuf_puts(out, ",");
    sbuf_put_fixed(out, st->credits_balance, 2);
    sbuf_puts(out, "]}");
}

/* The i-th number of array a within lo..hi: 0, or -1. */
static int shared_usage_num(const json_value *a, size_t i, double lo, double hi, double *out)
{
    if (!a || a->type != JSON_ARRAY || i >= a->count)
        return -1;
    const json_value *v = a->child;
    for (size_t k = 0; k < i; k++)
        v = v->next;
    if (v->type != JSON_NUMBER || !isfinite(v->num) || v->num < lo || v->num > hi)
        return -1;
    *out = v->num;
    return 0;
}

int shared_usage_merge(account_state *st, const json_value *doc, double now)
{
    if (!doc || doc->type != JSON_OBJECT)
        return -1;
    const json_value *at = json_get(doc, "at"), *plan = json_get(doc, "plan");
    const json_value *p = json_get(doc, "p"), *s = json_get(doc, "s"), *cr = json_get(doc, "cr");
    int64_t status;
    double f[12];
    const double year = 366.0 * 86400;
    if (!at || at->type != JSON_NUMBER || !isfinite(at->num) || at->num <= 0 || at->num > now + 60 ||
        json_get_int64(doc, "status", 0, 999, &status) != 0 || !plan || plan->type != JSON_STRING ||
        plan->str_len >= sizeof st->plan_type || strlen(plan->str) != plan->str_len ||
        (plan->str_len && text_check_str(plan->str)) || shared_usage_num(p, 0, -1, 100, &f[0]) ||
        shared_usage_num(p, 1, 0, year, &f[1]) || shared_usage_num(p, 2, 0, now + year, &f[2]) ||
        shared_usage_num(s, 0, -1, 100, &f[3]) || shared_usage_num(s, 1, 0, year, &f[4]) ||
        shared_usage_num(s, 2, 0, now + year, &f[5]) || shared_usage_num(cr, 0, -1, 1, &f[6]) ||
        shared_usage_num(cr, 1, -1, 1, &f[7]) || shared_usage_num(cr, 2, -1, 1e15, &f[8]))
        return -1;
    if (at->num <= st->usage_polled_at)
        return 0;
    st->usage_polled_at = at->num;
    st->usage_poll_status = (int)status;
    memcpy(st->plan_type, plan->str, plan->str_len + 1);
    st->primary_used_pct = f[0], st->primary_window_s = f[1], st->primary_reset_at = f[2];
    st->secondary_used_pct = f[3], st->secondary_window_s = f[4], st->secondary_reset_at = f[5];
    st->has_credits = (int)f[6], st->credits_unlimited = (int)f[7], st->credits_balance = f[8];
    return 1;
}
