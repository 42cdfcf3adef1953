/* redis_script.c: Lua scripts run by SHA1 (see redis_script.h). */
#include "core/redis_script.h"
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

void redis_script_init(redis_script *s, const char *text)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    s->text = text;
    s->sha[0] = '\0';
    if (EVP_Digest(text, strlen(text), md, &n, EVP_sha1(), NULL) != 1 || n != 20)
        return; /* no digest: every call goes as text */
    for (unsigned i = 0; i < n; i++)
        snprintf(s->sha + 2 * i, 3, "%02x", md[i]);
}

void redis_script_load(const redis_script *s, redis_link *l)
{
    const char *argv[] = {"SCRIPT", "LOAD", s->text};
    size_t lens[] = {6, 4, strlen(s->text)};
    redis_link_command(l, NULL, NULL, 3, argv, lens);
}

int redis_script_eval(const redis_script *s, redis_link *l, int as_text, redis_reply_fn fn, void *ud, int nkeys,
                      const char *const *keys, int nargs, const char *const *args)
{
    const char *argv[3 + REDIS_SCRIPT_ARGS_MAX];
    size_t lens[3 + REDIS_SCRIPT_ARGS_MAX];
    char nk[16];
    if (nkeys < 0 || nargs < 0 || nkeys + nargs > REDIS_SCRIPT_ARGS_MAX)
        return -1;
    int text = as_text || !s->sha[0];
    snprintf(nk, sizeof nk, "%d", nkeys);
    int argc = 0;
    argv[argc++] = text ? "EVAL" : "EVALSHA";
    argv[argc++] = text ? s->text : s->sha;
    argv[argc++] = nk;
    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    for (int i = 0; i < argc; i++) {
        if (!argv[i])
            return -1;
        lens[i] = strlen(argv[i]);
    }
    return redis_link_command(l, fn, ud, argc, argv, lens);
}

int redis_script_missing(const redis_script *s, redis_link *l, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str || strncmp(r->str, "NOSCRIPT", 8) != 0)
        return 0;
    redis_script_load(s, l);
    return 1;
}
