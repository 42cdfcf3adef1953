/* admin_body.c: the admin API's POST bodies read into plain values (see
 * admin_body.h). The checks and the messages are the API's own; the
 * lookups (which account, which key) stay in admin_api.c. */
#include "admin/admin_body.h"
#include "base/json.h"
#include "base/text.h"
#include "core/config.h"
#include "upstream/model_list.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int admin_body_refuse(admin_body *b, const char *code, const char *msg)
{
    admin_body_free(b);
    b->status = 400;
    b->code = code;
    snprintf(b->message, sizeof b->message, "%s", msg);
    return -1;
}

/* The sign-in's "sort" and "models" (admin_body.h); 0, or -1 after
 * admin_body_refuse. models in an array are joined with commas for
 * model_list_normalize, so a name holding a comma is refused here. */
static int admin_login_settings(const json_value *doc, admin_body *out)
{
    const json_value *v = json_get(doc, "sort");
    int64_t sort = 0;
    if (v && v->type != JSON_NULL) {
        if (v->type != JSON_NUMBER || v->num != floor(v->num) || json_num_to_int64(v->num, INT_MIN, INT_MAX, &sort) != 0)
            return admin_body_refuse(out, "invalid_value",
                                     "'sort' must be a whole number from -2147483648 to 2147483647 (as `account add --sort N`)");
        out->has_sort = 1;
        out->sort = (int)sort;
    }
    v = json_get(doc, "models");
    if (!v || v->type == JSON_NULL)
        return 0;
    sbuf in = SBUF_INIT, norm = SBUF_INIT;
    const char *bad = NULL;
    if (v->type == JSON_STRING) {
        if (strlen(v->str) != v->str_len)
            bad = "a name holds a NUL";
        else
            sbuf_puts(&in, v->str);
    } else if (v->type == JSON_ARRAY) {
        for (const json_value *m = v->child; m && !bad; m = m->next) {
            if (m->type != JSON_STRING || strlen(m->str) != m->str_len || strchr(m->str, ',') || !*m->str)
                bad = "every name must be a non-empty string without a comma";
            else {
                if (m != v->child)
                    sbuf_puts(&in, ",");
                sbuf_puts(&in, m->str);
            }
        }
    } else {
        bad = "give a string \"a,b\" or an array of names";
    }
    char err[200] = "", msg[256];
    if (!bad && model_list_normalize(in.p ? in.p : "", &norm, err, sizeof err) != 0)
        bad = err;
    sbuf_free(&in);
    if (bad) {
        sbuf_free(&norm);
        snprintf(msg, sizeof msg, "'models': %s", bad);
        return admin_body_refuse(out, "invalid_value", msg);
    }
    if (norm.len && !(out->models = strdup(norm.p))) {
        sbuf_free(&norm);
        return admin_body_refuse(out, "out_of_memory", "out of memory");
    }
    sbuf_free(&norm);
    return 0;
}

/* A name (a string without NUL), an id (a number 1..INT64_MAX, not cast
 * when out of range), null, or nothing. */
static int admin_ref_read(const json_value *v, admin_ref *r)
{
    memset(r, 0, sizeof *r);
    r->invalid = !v || (v->type != JSON_STRING && v->type != JSON_NUMBER && v->type != JSON_NULL);
    if (!v)
        return 0;
    if (v->type == JSON_NULL)
        r->kind = ADMIN_REF_NULL;
    else if (v->type == JSON_NUMBER) {
        if (json_num_to_int64(v->num, 1, INT64_MAX, &r->id) == 0)
            r->kind = ADMIN_REF_ID;
    } else if (v->type == JSON_STRING && strlen(v->str) == v->str_len) {
        if (!(r->name = strdup(v->str)))
            return -1;
        r->kind = ADMIN_REF_NAME;
    }
    return 0;
}

int admin_body_parse(admin_body_kind kind, const char *buf, size_t len, admin_body *out)
{
    memset(out, 0, sizeof *out);
    char err[160] = "";
    json_value *doc = NULL;
    if (len <= ADMIN_BODY_MAX)
        doc = json_parse(len ? buf : "{}", len ? len : 2, err, sizeof err);
    if (!doc || doc->type != JSON_OBJECT) {
        char msg[256];
        snprintf(msg, sizeof msg, "the body must be a JSON object: %s", doc ? "wrong type" : err[0] ? err : "too large");
        json_free(doc);
        return admin_body_refuse(out, "invalid_json", msg);
    }
    int rc = 0;
    if (kind == ADMIN_BODY_ACCOUNT || kind == ADMIN_BODY_PREFER) {
        if (admin_ref_read(json_get(doc, "account"), &out->account) != 0 ||
            (kind == ADMIN_BODY_PREFER && admin_ref_read(json_get(doc, "key"), &out->key) != 0))
            rc = admin_body_refuse(out, "out_of_memory", "out of memory");
        else if (kind == ADMIN_BODY_ACCOUNT && (out->account.invalid || out->account.kind == ADMIN_REF_NULL))
            rc = admin_body_refuse(out, "invalid_value", ADMIN_BODY_ACCOUNT_MSG);
    } else if (kind == ADMIN_BODY_LOGIN) {
        const json_value *v = json_get(doc, "name");
        if (v && v->type != JSON_NULL &&
            (v->type != JSON_STRING || strlen(v->str) != v->str_len || v->str_len > 127 || text_check_str(v->str)))
            rc = admin_body_refuse(out, "invalid_value", "'name' must be a string of at most 127 bytes of plain text");
        else if (v && v->type == JSON_STRING && v->str_len && !(out->name = strdup(v->str)))
            rc = admin_body_refuse(out, "out_of_memory", "out of memory");
        else
            rc = admin_login_settings(doc, out);
    } else {
        const char *strategy = json_get_str(doc, "strategy"), *rotation = json_get_str(doc, "rotation");
        const char *canon = strategy ? config_strategy_canonical(strategy) : NULL;
        if (!strategy && !rotation)
            rc = admin_body_refuse(out, "invalid_value", "give 'strategy' (ordered | balanced | weighted) and/or 'rotation'");
        else if (strategy && !canon)
            rc = admin_body_refuse(out, "invalid_value", "unknown strategy: expected ordered, balanced or weighted");
        else if (rotation && !config_rotation_valid(rotation))
            rc = admin_body_refuse(out, "invalid_value",
                                   "unknown rotation: expected account_rotation, aggregate_api_rotation, hybrid_rotation "
                                   "or hybrid_aggregate_first_rotation");
        else if (rotation && !(out->rotation = strdup(rotation)))
            rc = admin_body_refuse(out, "out_of_memory", "out of memory");
        else
            out->strategy = canon;
    }
    json_free(doc);
    return rc;
}

void admin_body_free(admin_body *b)
{
    free(b->account.name);
    free(b->key.name);
    free(b->rotation);
    free(b->name);
    free(b->models);
    b->account.name = b->key.name = b->rotation = b->name = b->models = NULL;
    b->has_sort = b->sort = 0;
    b->account.kind = b->key.kind = ADMIN_REF_NONE;
    b->strategy = NULL;
}
