/* cli_usage.c: `switchyard usage`, the spend report (requests, tokens and
 * cost from the request log). Its functions are named cli_spend_*, as
 * cli_usage_* name the groups' usage texts. */
#include "admin/cli.h"
#include "admin/cli_internal.h"
#include "base/sbuf.h"
#include "store/store.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void cli_usage_spend(FILE *f)
{
    fputs("usage: switchyard usage [--by key|account|model|day] [--since WHEN] [--json] [--db PATH]\n"
          "  requests, tokens and cost (USD, from policies/prices.lua) in the request log;\n"
          "  WHEN is unix seconds, YYYY-MM-DD[THH:MM[:SS]] (UTC) or Nm, Nh, Nd (the last N minutes, hours,\n"
          "  days), as for logs; default: everything\n",
          f);
}

typedef struct cli_spend_out {
    int json, rows, unpriced;
    sbuf o;
} cli_spend_out;

static void cli_spend_row(void *ud, const usage_row *r)
{
    cli_spend_out *out = ud;
    if (!out->json) {
        cli_line("%-32s %9lld %12lld %12lld %12lld %12lld %12.4f%s", r->group, (long long)r->requests,
               (long long)r->input_tokens, (long long)r->cached_tokens, (long long)r->output_tokens,
               (long long)r->total_tokens, r->cost_usd, r->unpriced ? " *" : "");
        out->unpriced |= r->unpriced > 0;
    } else {
        sbuf_puts(&out->o, out->rows ? ",{\"group\":" : "{\"group\":");
        sbuf_json_str(&out->o, r->group, strlen(r->group));
        sbuf_printf(&out->o, ",\"requests\":%lld,\"input_tokens\":%lld,\"cached_tokens\":%lld,\"output_tokens\":%lld,"
                             "\"total_tokens\":%lld,\"cost_usd\":%.6f,\"unpriced_requests\":%lld}",
                    (long long)r->requests, (long long)r->input_tokens, (long long)r->cached_tokens,
                    (long long)r->output_tokens, (long long)r->total_tokens, r->cost_usd, (long long)r->unpriced);
    }
    out->rows++;
}

int cli_spend_main(int argc, char **argv)
{
    const char *cmd = "usage", *db = NULL, *by = NULL, *since_s = NULL;
    int json = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL},     {"by", &by, NULL},     {"since", &since_s, NULL},
                            {"json", NULL, &json}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc - 1, argv + 1, opts, &help, cli_usage_spend);
    if (rc >= 0)
        return rc;
    double since = 0;
    if (since_s && (since = cli_parse_when(since_s, (double)time(NULL))) < 0) {
        fprintf(stderr, "switchyard %s: --since must be " CLI_WHEN_FORMS ", got '%s'\n", cmd, since_s);
        return CLI_EXIT_USAGE;
    }
    if (by && strcmp(by, "key") && strcmp(by, "account") && strcmp(by, "model") && strcmp(by, "day")) {
        fprintf(stderr, "switchyard %s: --by must be key, account, model or day, got '%s'\n", cmd, by);
        return CLI_EXIT_USAGE;
    }
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    cli_spend_out out = {.json = json, .o = SBUF_INIT};
    if (!json)
        printf("%-32s %9s %12s %12s %12s %12s %12s\n", by ? by : "", "REQUESTS", "INPUT", "CACHED", "OUTPUT",
               "TOTAL", "COST_USD");
    char err[512] = "";
    rc = store_usage_report(s, by, since, cli_spend_row, &out, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    else if (json)
        printf("[%s]\n", out.o.p ? out.o.p : "");
    else if (out.unpriced) /* what the mark at a row's end means */
        printf("* some of the row's requests had no price (a model policies/prices.lua does not list): their cost "
               "is not in COST_USD\n");
    sbuf_free(&out.o);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
