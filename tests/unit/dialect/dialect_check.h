/* dialect_check.h: what the dialect wing's unit tests share: a path
 * lookup into a parsed body ("input.0.content.1.type": members by name,
 * array elements by index), and rules as the bundled dialect.lua would
 * give them. Included by test_*.c beside it (not a test itself). */
#ifndef SY_DIALECT_CHECK_H
#define SY_DIALECT_CHECK_H
#include "base/json.h"
#include "policy/policy.h"
#include <stdlib.h>
#include <string.h>

/* The value at path under v, NULL when there is none. */
static inline const json_value *jpath(const json_value *v, const char *path)
{
    char seg[64];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof seg)
            return NULL;
        memcpy(seg, path, n);
        seg[n] = '\0';
        path += n + (path[n] == '.');
        if (v->type == JSON_ARRAY) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            v = *end ? NULL : json_at(v, i);
        } else {
            v = json_get(v, seg);
        }
    }
    return v;
}

/* The string at path, NULL when it is not one. */
static inline const char *jstr(const json_value *v, const char *path)
{
    const json_value *s = jpath(v, path);
    return s && s->type == JSON_STRING ? s->str : NULL;
}

/* The count of the array or object at path, -1 when there is none. */
static inline long jcount(const json_value *v, const char *path)
{
    const json_value *a = jpath(v, path);
    return a && (a->type == JSON_ARRAY || a->type == JSON_OBJECT) ? (long)a->count : -1;
}

static inline void rules_add(char (*list)[POLICY_DIALECT_NAME_MAX], size_t *n, const char *name)
{
    strcpy(list[(*n)++], name);
}

/* The ChatGPT backend's rules for a Responses upstream (docs/clients.md). */
static inline void rules_chatgpt(policy_dialect *r)
{
    memset(r, 0, sizeof *r);
    r->stream = 1;
    r->store_off = 1;
    r->input_list = 1;
    r->strip_item_ids = 1;
    strcpy(r->system_role, "developer");
    r->has_instructions = 1;
    strcpy(r->instructions, "You are a helpful assistant.");
    static const char *const drop[] = {"max_output_tokens", "temperature", "top_p", "frequency_penalty",
                                       "presence_penalty"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        rules_add(r->drop, &r->n_drop, drop[i]);
}

/* A Chat-only relay's rules: what it ignores anyway. */
static inline void rules_chat_relay(policy_dialect *r)
{
    memset(r, 0, sizeof *r);
    static const char *const ignore[] = {"include", "reasoning.summary", "truncation", "store", "metadata",
                                         "prompt_cache_key", "tools.web_search", "tools.web_search_preview",
                                         "tools.file_search"};
    for (size_t i = 0; i < sizeof ignore / sizeof ignore[0]; i++)
        rules_add(r->ignore, &r->n_ignore, ignore[i]);
}

#endif
