/* jwt.h: reads the claims of an OpenAI login's JSON Web Tokens (the id and
 * access tokens of a Codex login) without verifying them: the gateway only
 * needs the expiry and the account identity the token says it carries; the
 * upstream verifies signatures. */
#ifndef SY_JWT_H
#define SY_JWT_H
#include <stdint.h>

typedef struct jwt_claims {
    int64_t exp;                  /* "exp", unix seconds; 0 unknown */
    char email[256];              /* "email" (or the auth claim's profile email) */
    char chatgpt_account_id[128]; /* https://api.openai.com/auth .chatgpt_account_id */
    char plan_type[64];           /* https://api.openai.com/auth .chatgpt_plan_type */
    char client_id[128];          /* "client_id", else the first "aud" that looks like an app id */
} jwt_claims;

/* Decodes the payload of token (header.payload.signature). Returns 0 and
 * fills c (fields not present stay empty / 0), -1 when token is not a JWT
 * with a JSON object payload (c is zeroed). */
int jwt_claims_read(const char *token, jwt_claims *c);

#endif
