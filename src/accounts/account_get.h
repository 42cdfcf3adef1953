/* account_get.h: a GET on an account's own upstream with its credentials,
 * as the background polls make them (the usage poll, the model poll): the
 * bearer token, JSON accepted, and for a ChatGPT login the headers Codex
 * sends (originator, ChatGPT-Account-Id). A transfer on the gateway's curl
 * multi like any other; the token's copy is wiped once curl has it. */
#ifndef SY_ACCOUNT_GET_H
#define SY_ACCOUNT_GET_H
#include "route/pool.h"
#include "upstream/upstream.h"

/* Starts GET url for pa; NULL when it could not start (logged as "<what>
 * could not start"; no callback will come). */
upstream_req *account_get_start(upstream *up, const pool_account *pa, const char *url, long timeout_ms,
                                const upstream_callbacks *cb, void *ud, const char *what);

#endif
