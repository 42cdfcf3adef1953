/* jwt.c: JWT payload decoding (base64url, no verification) and the claims
 * an OpenAI login carries (see jwt.h). */
#include "base/jwt.h"
#include "base/json.h"
#include "base/sbuf.h"
#include <string.h>

static int jwt_b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-' || c == '+')
        return 62;
    if (c == '_' || c == '/')
        return 63;
    return -1;
}

/* base64url (padding optional) into out; -1 on a bad character. */
static int jwt_b64_decode(const char *s, size_t n, sbuf *out)
{
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=')
            break;
        int v = jwt_b64_value((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char ch = (char)((acc >> bits) & 0xff);
            sbuf_append(out, &ch, 1);
        }
    }
    return 0;
}

static void jwt_copy(char *dst, size_t n, const char *src)
{
    if (src && *src)
        sbuf_copy_cstr(dst, n, src);
}

static void jwt_client_id(const json_value *doc, jwt_claims *c)
{
    jwt_copy(c->client_id, sizeof c->client_id, json_get_str(doc, "client_id"));
    if (c->client_id[0])
        return;
    json_value *aud = json_get(doc, "aud");
    if (aud && aud->type == JSON_STRING && strncmp(aud->str, "app_", 4) == 0)
        jwt_copy(c->client_id, sizeof c->client_id, aud->str);
    for (json_value *a = aud && aud->type == JSON_ARRAY ? aud->child : NULL; a; a = a->next)
        if (a->type == JSON_STRING && strncmp(a->str, "app_", 4) == 0) {
            jwt_copy(c->client_id, sizeof c->client_id, a->str);
            return;
        }
}

int jwt_claims_read(const char *token, jwt_claims *c)
{
    memset(c, 0, sizeof *c);
    const char *dot1 = token ? strchr(token, '.') : NULL;
    const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot2)
        return -1;
    sbuf raw = SBUF_INIT;
    json_value *doc = NULL;
    if (jwt_b64_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &raw) == 0 && raw.len)
        doc = json_parse(raw.p, raw.len, NULL, 0);
    sbuf_free(&raw);
    if (!doc || doc->type != JSON_OBJECT) {
        json_free(doc);
        return -1;
    }
    double exp = json_get_num(doc, "exp", 0);
    c->exp = exp > 0 && exp < 1e12 ? (int64_t)exp : 0;
    jwt_copy(c->email, sizeof c->email, json_get_str(doc, "email"));
    json_value *auth = json_get(doc, "https://api.openai.com/auth");
    if (auth) {
        jwt_copy(c->chatgpt_account_id, sizeof c->chatgpt_account_id, json_get_str(auth, "chatgpt_account_id"));
        jwt_copy(c->plan_type, sizeof c->plan_type, json_get_str(auth, "chatgpt_plan_type"));
    }
    json_value *profile = json_get(doc, "https://api.openai.com/profile");
    if (!c->email[0] && profile)
        jwt_copy(c->email, sizeof c->email, json_get_str(profile, "email"));
    jwt_client_id(doc, c);
    json_free(doc);
    return 0;
}
