/* model_catalog.c: GET /v1/models built from the pool (see model_catalog.h). */
#include "route/model_catalog.h"
#include "route/key_rules.h"
#include "upstream/model_list.h"
#include "base/json.h"
#include <string.h>

/* 1 if pa can take requests at all (the catalog's view, not one request's). */
static int model_catalog_usable(const pool_account *pa)
{
    return pa->a.enabled && !pa->a.hold && !pa->a.login_error;
}

/* 1 if the catalog lists model for pa: it serves it and the key allows it. */
static int model_catalog_lists(const pool_account *pa, const char *allowed, const char *model)
{
    return pool_account_serves(pa, model) && (!allowed || !*allowed || key_rules_model_allowed(allowed, model));
}

size_t model_catalog_openai(pool *p, const char *allowed, sbuf *out)
{
    sbuf seen = SBUF_INIT;
    size_t known = 0, listed = 0;
    sbuf_reset(out);
    for (size_t i = 0; i < pool_count(p); i++) {
        const pool_account *pa = pool_at(p, i);
        const char *list = pool_account_models(pa);
        if (!model_catalog_usable(pa) || !list)
            continue;
        known++;
        char name[MODEL_LIST_NAME_MAX + 1];
        for (const char *c = list; *c;) {
            const char *e = strchr(c, ',');
            size_t n = e ? (size_t)(e - c) : strlen(c);
            if (n && n <= MODEL_LIST_NAME_MAX) {
                memcpy(name, c, n);
                name[n] = '\0';
                if (model_catalog_lists(pa, allowed, name) && !(seen.len && model_list_has(seen.p, name))) {
                    if (seen.len)
                        sbuf_append(&seen, ",", 1);
                    sbuf_puts(&seen, name);
                    sbuf_puts(out, listed++ ? ",{\"id\":" : "{\"object\":\"list\",\"data\":[{\"id\":");
                    sbuf_json_str(out, name, n);
                    sbuf_puts(out, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"switchyard\"}");
                }
            }
            if (!e)
                break;
            c = e + 1;
        }
    }
    if (known)
        sbuf_puts(out, listed ? "]}" : "{\"object\":\"list\",\"data\":[]}");
    sbuf_free(&seen);
    return known;
}

size_t model_catalog_codex(pool *p, const char *allowed, sbuf *out)
{
    sbuf seen = SBUF_INIT;
    size_t known = 0, listed = 0;
    sbuf_reset(out);
    for (size_t i = 0; i < pool_count(p); i++) {
        const pool_account *pa = pool_at(p, i);
        if (!model_catalog_usable(pa) || !pa->models_codex_json)
            continue;
        json_value *arr = json_parse(pa->models_codex_json, strlen(pa->models_codex_json), NULL, 0);
        if (!arr || arr->type != JSON_ARRAY) {
            json_free(arr);
            continue;
        }
        known++;
        for (json_value *it = arr->child; it; it = it->next) {
            const char *slug = it->type == JSON_OBJECT ? json_get_str(it, "slug") : NULL;
            if (!slug || strlen(slug) > MODEL_LIST_NAME_MAX || strchr(slug, ',') ||
                !model_catalog_lists(pa, allowed, slug) || (seen.len && model_list_has(seen.p, slug)))
                continue;
            if (seen.len)
                sbuf_append(&seen, ",", 1);
            sbuf_puts(&seen, slug);
            sbuf_puts(out, listed++ ? "," : "{\"models\":[");
            json_write(out, it);
        }
        json_free(arr);
    }
    if (known)
        sbuf_puts(out, listed ? "]}" : "{\"models\":[]}");
    sbuf_free(&seen);
    return known;
}
