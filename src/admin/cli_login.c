/* cli_login.c: `switchyard account login`: the ChatGPT sign-in run from the
 * gateway's own command line, as Codex CLI runs it (docs/accounts.md,
 * "Logging in from the gateway"). The browser flow waits for the
 * authorization server's redirect on a loopback server here (a poll loop
 * reading up to CLI_LOGIN_PENDING request heads at once, each within
 * CLI_LOGIN_READ_MS: this is the command's own process, not the gateway's
 * loop), every wait bounded by the sign-in's deadline; the device flow polls.
 * Either way the login is stored as `account import` stores a Codex
 * auth.json, so the gateway refreshes it from then on. */
#include "admin/cli_internal.h"
#include "accounts/login_file.h"
#include "accounts/login_flow.h"
#include "accounts/oauth.h"
#include "base/sbuf.h"
#include "base/text.h"
#include "core/config.h"
#include "store/store.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_LOGIN_BROWSER_S 600  /* the browser sign-in's whole time */
#define CLI_LOGIN_HEAD_MAX 16384 /* a callback request's head */
#define CLI_LOGIN_READ_MS 5000   /* one request's head must arrive within this */
/* connections whose heads are read at once: one that sends nothing (or
 * trickles) never holds off the browser's, which arrives whole; past this
 * many the oldest is dropped */
#define CLI_LOGIN_PENDING 16

typedef struct cli_login_args {
    const char *db, *name, *port, *timeout;
    int device, no_browser, help;
} cli_login_args;

static double cli_login_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------- the loopback server ---------- */

static int cli_login_bind(int port, int *actual)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *actual = ntohs(sa.sin_port);
    return fd;
}

/* The value of header name in a head (NUL-terminated in place), or NULL. */
static const char *cli_login_header(char *head, const char *name)
{
    size_t nl = strlen(name);
    for (char *line = strstr(head, "\r\n"); line && line[2] && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        char *p = line + 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            p += nl + 1;
            while (*p == ' ' || *p == '\t')
                p++;
            size_t len = strcspn(p, "\r\n");
            static char val[512];
            if (len >= sizeof val)
                return NULL;
            memcpy(val, p, len);
            while (len && (val[len - 1] == ' ' || val[len - 1] == '\t'))
                len--;
            val[len] = '\0';
            return val;
        }
    }
    return NULL;
}

static void cli_login_reply(int fd, int status, const char *reason, const char *title, const char *text)
{
    char body[1024], head[256];
    int bl = snprintf(body, sizeof body,
                      "<!doctype html><html><head><meta charset=\"utf-8\"><title>switchyard: %s</title></head>"
                      "<body><h1>%s</h1><p>%s</p></body></html>\n",
                      title, title, text);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                      status, reason, bl);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl)
        (void)send(fd, body, (size_t)bl, MSG_NOSIGNAL);
}

/* Opens url in a browser when this machine has a display: xdg-open in a
 * child of its own, its output out of the way; a failure only means the
 * printed URL is what the user has. */
static void cli_login_open_browser(const char *url)
{
    const char *x = getenv("DISPLAY"), *w = getenv("WAYLAND_DISPLAY");
    if ((!x || !*x) && (!w || !*w))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0), dup2(devnull, 1), dup2(devnull, 2);
        }
        setsid();
        execlp("xdg-open", "xdg-open", url, (char *)NULL);
        _exit(127);
    }
}

/* The browser flow: 0 with the login in e, else -1 and the message printed. */
static int cli_login_browser(const char *cmd, const sy_config *cfg, const cli_login_args *a, int port, long timeout_s,
                             login_entry *e)
{
    int actual = 0, fd = cli_login_bind(port, &actual);
    if (fd < 0 && errno == EADDRINUSE && port == LOGIN_CALLBACK_PORT)
        fd = cli_login_bind(LOGIN_CALLBACK_PORT_FALLBACK, &actual); /* registered too, as Codex falls back */
    if (fd < 0) {
        fprintf(stderr, "switchyard %s: cannot listen on 127.0.0.1:%d for the sign-in's callback: %s\n", cmd, port,
                strerror(errno));
        return -1;
    }
    login_pkce pk;
    char state[44], redirect[128], auth_origin[512];
    if (login_pkce_new(&pk) != 0 || login_state_new(state) != 0) {
        fprintf(stderr, "switchyard %s: no randomness for the sign-in: %s\n", cmd, strerror(errno));
        close(fd);
        return -1;
    }
    login_redirect_uri(redirect, sizeof redirect, actual);
    login_url_origin(cfg->oauth_authorize_url, auth_origin, sizeof auth_origin);
    sbuf url = SBUF_INIT;
    login_authorize_url(&url, cfg->oauth_authorize_url, OAUTH_CODEX_CLIENT_ID, redirect, pk.challenge, state);
    printf("Sign in to ChatGPT: open this URL in a browser on this machine:\n\n  %s\n\n", url.p);
    printf("Waiting up to %ld s for the sign-in to come back to %s\n", timeout_s, redirect);
    printf("(from another machine: forward the port first, ssh -L %d:127.0.0.1:%d THIS_HOST; or use --device)\n",
           actual, actual);
    fflush(stdout);
    if (!a->no_browser)
        cli_login_open_browser(url.p);
    sbuf_free(&url);

    int rc = -1;
    double deadline = cli_login_now() + (double)timeout_s;
    char code[2048], why[400], err[512];
    struct {
        int fd;
        size_t got;
        double until;
        char head[CLI_LOGIN_HEAD_MAX];
    } *pend = calloc(CLI_LOGIN_PENDING, sizeof *pend);
    if (!pend) {
        fprintf(stderr, "switchyard %s: out of memory\n", cmd);
        close(fd);
        return -1;
    }
    size_t np = 0;
    for (;;) {
        double now = cli_login_now();
        if (now >= deadline) {
            fprintf(stderr, "switchyard %s: the sign-in did not come back within %ld s; nothing was stored\n", cmd,
                    timeout_s);
            break;
        }
        for (size_t i = 0; i < np;) { /* heads that did not come whole in time */
            if (now < pend[i].until) {
                i++;
                continue;
            }
            cli_login_reply(pend[i].fd, 408, "Request Timeout", "Bad request", "The request did not arrive in time.");
            close(pend[i].fd);
            pend[i] = pend[--np];
        }
        struct pollfd p[1 + CLI_LOGIN_PENDING];
        double wake = deadline;
        p[0] = (struct pollfd){fd, POLLIN, 0};
        for (size_t i = 0; i < np; i++) {
            p[1 + i] = (struct pollfd){pend[i].fd, POLLIN, 0};
            if (pend[i].until < wake)
                wake = pend[i].until;
        }
        int left = (int)((wake - now) * 1000) + 1;
        if (poll(p, 1 + np, left) <= 0)
            continue;
        size_t ready = 0; /* the connection whose head came whole, + 1 */
        for (size_t i = np; i-- > 0 && !ready;) {
            if (!p[1 + i].revents)
                continue;
            ssize_t r = recv(pend[i].fd, pend[i].head + pend[i].got, sizeof pend[i].head - 1 - pend[i].got, 0);
            if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) {
                close(pend[i].fd);
                pend[i] = pend[--np];
                continue;
            }
            if (r > 0) {
                pend[i].got += (size_t)r;
                pend[i].head[pend[i].got] = '\0';
            }
            if (strstr(pend[i].head, "\r\n\r\n"))
                ready = i + 1;
            else if (pend[i].got + 1 >= sizeof pend[i].head) {
                cli_login_reply(pend[i].fd, 431, "Request Header Fields Too Large", "Bad request",
                                "This is the sign-in callback of switchyard.");
                close(pend[i].fd);
                pend[i] = pend[--np];
            }
        }
        if (!ready && (p[0].revents & POLLIN)) {
            int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c >= 0) {
                if (np == CLI_LOGIN_PENDING) { /* the oldest goes */
                    size_t old = 0;
                    for (size_t i = 1; i < np; i++)
                        if (pend[i].until < pend[old].until)
                            old = i;
                    close(pend[old].fd);
                    pend[old] = pend[--np];
                }
                pend[np].fd = c;
                pend[np].got = 0;
                pend[np].head[0] = '\0';
                pend[np].until = now + CLI_LOGIN_READ_MS / 1000.0;
                np++;
            }
        }
        if (!ready)
            continue;
        int c = pend[ready - 1].fd;
        char *head = pend[ready - 1].head;
        pend[ready - 1].fd = -1;
        char method[16], target[8192];
        login_line_rc line = login_request_line(head, method, sizeof method, target, sizeof target);
        if (line != LOGIN_LINE_OK) {
            if (line == LOGIN_LINE_TOO_LONG)
                cli_login_reply(c, 414, "URI Too Long", "Bad request", "This is the sign-in callback of switchyard.");
            else
                cli_login_reply(c, 400, "Bad Request", "Bad request", "This is the sign-in callback of switchyard.");
            memset(head, 0, pend[ready - 1].got);
            close(c);
            pend[ready - 1] = pend[--np];
            continue;
        }
        char host[256] = "", origin[512] = "";
        const char *h = cli_login_header(head, "Host");
        int has_host = h != NULL;
        if (h)
            sbuf_copy_cstr(host, sizeof host, h);
        const char *o = cli_login_header(head, "Origin");
        if (o)
            sbuf_copy_cstr(origin, sizeof origin, o);
        login_callback_kind k = login_callback_check(method, target, has_host ? host : NULL, o ? origin : NULL,
                                                     actual, state, auth_origin, code, sizeof code, why, sizeof why);
        switch (k) {
        case LOGIN_CB_NOT_FOUND:
            cli_login_reply(c, 404, "Not Found", "Not found", "This is the sign-in callback of switchyard.");
            break;
        case LOGIN_CB_BAD_METHOD:
            cli_login_reply(c, 405, "Method Not Allowed", "Not allowed", "The callback takes a GET.");
            break;
        case LOGIN_CB_FOREIGN:
        case LOGIN_CB_BAD_STATE:
            cli_login_reply(c, k == LOGIN_CB_FOREIGN ? 403 : 400, k == LOGIN_CB_FOREIGN ? "Forbidden" : "Bad Request",
                            "Refused", "This callback is not the one this sign-in is waiting for.");
            fprintf(stderr, "switchyard %s: refused %s; still waiting\n", cmd, why);
            break;
        case LOGIN_CB_DENIED:
        case LOGIN_CB_NO_CODE: {
            cli_login_reply(c, 400, "Bad Request", "Sign-in not completed",
                            "The sign-in was not completed. See the terminal; nothing was stored.");
            sbuf esc = SBUF_INIT; /* the authorization server's words: printed escaped */
            text_escape(&esc, why, strlen(why), NULL);
            fprintf(stderr, "switchyard %s: the sign-in was %s (%.*s); nothing was stored\n", cmd,
                    k == LOGIN_CB_DENIED ? "denied" : "not completed", (int)esc.len, esc.p);
            sbuf_free(&esc);
            close(c);
            goto done;
        }
        case LOGIN_CB_CODE:
            if (login_exchange(cfg->oauth_token_url, OAUTH_CODEX_CLIENT_ID, redirect, pk.verifier, code,
                               cfg->oauth_timeout_ms, e, err, sizeof err) == 0) {
                cli_login_reply(c, 200, "OK", "Signed in", "switchyard has the login. You can close this tab.");
                rc = 0;
            } else {
                cli_login_reply(c, 502, "Bad Gateway", "Sign-in failed",
                                "The code could not be exchanged for a login. See the terminal.");
                fprintf(stderr, "switchyard %s: %s; nothing was stored\n", cmd, err);
            }
            close(c);
            goto done;
        }
        memset(target, 0, sizeof target);
        memset(head, 0, pend[ready - 1].got);
        close(c);
        pend[ready - 1] = pend[--np];
    }
done:
    for (size_t i = 0; i < np; i++)
        if (pend[i].fd >= 0)
            close(pend[i].fd);
    memset(pend, 0, CLI_LOGIN_PENDING * sizeof *pend); /* the heads held a code and the state */
    free(pend);
    memset(code, 0, sizeof code);
    memset(&pk, 0, sizeof pk);
    close(fd);
    while (waitpid(-1, NULL, WNOHANG) > 0) { /* a finished xdg-open */
    }
    return rc;
}

/* ---------- device code ---------- */

static int cli_login_device(const char *cmd, const sy_config *cfg, long timeout_s, login_entry *e)
{
    login_device d;
    char err[512], code[2048], verifier[256];
    if (login_device_start(cfg->oauth_device_code_url, OAUTH_CODEX_CLIENT_ID, cfg->oauth_timeout_ms, &d, err,
                           sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return -1;
    }
    time_t now = time(NULL);
    double end = cli_login_now() + (double)(d.expires_at - now);
    int bounded = timeout_s > 0 && timeout_s < d.expires_at - now; /* --timeout ends the wait first */
    if (bounded)
        end = cli_login_now() + (double)timeout_s;
    cli_line("Sign in to ChatGPT: on any device, open %s", d.verify_url);
    if (bounded)
        cli_line("and enter the code %s within %ld s (--timeout; never share it).", d.user_code, timeout_s);
    else
        cli_line("and enter the code %s (it expires in %lld minutes; never share it).", d.user_code,
                 (long long)((d.expires_at - now + 59) / 60));
    fflush(stdout);
    int rc = -1;
    for (;;) {
        login_poll_result r = login_device_poll(cfg->oauth_device_token_url, &d, cfg->oauth_timeout_ms, code,
                                                sizeof code, verifier, sizeof verifier, err, sizeof err);
        if (r == LOGIN_POLL_APPROVED) {
            if (login_exchange(cfg->oauth_token_url, OAUTH_CODEX_CLIENT_ID, d.redirect_uri, verifier, code,
                               cfg->oauth_timeout_ms, e, err, sizeof err) == 0)
                rc = 0;
            else
                fprintf(stderr, "switchyard %s: %s; nothing was stored\n", cmd, err);
            break;
        }
        if (r != LOGIN_POLL_PENDING) {
            const char *what = r == LOGIN_POLL_DENIED    ? "the sign-in was denied"
                               : r == LOGIN_POLL_EXPIRED ? "the device code expired before the sign-in was approved"
                                                         : "the device sign-in failed";
            fprintf(stderr, "switchyard %s: %s (%s); nothing was stored\n", cmd, what, err);
            break;
        }
        double left = end - cli_login_now();
        if (left <= 0) {
            if (bounded)
                fprintf(stderr, "switchyard %s: the sign-in was not approved within --timeout %ld s; nothing was "
                                "stored\n", cmd, timeout_s);
            else
                fprintf(stderr, "switchyard %s: the sign-in was not approved in time (the code expired); "
                                "nothing was stored\n", cmd);
            break;
        }
        double wait = (double)d.interval_s < left ? (double)d.interval_s : left;
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    memset(code, 0, sizeof code);
    memset(verifier, 0, sizeof verifier);
    return rc;
}

/* ---------- the command ---------- */

static void cli_usage_login(FILE *f)
{
    fputs("usage: switchyard account login [--name N] [--device] [--no-browser] [--port N] [--timeout S]\n"
          "                                [--db PATH]\n"
          "  signs in to ChatGPT as Codex CLI does and stores the login as an account (a login whose\n"
          "  ChatGPT account is already stored updates that account); --name defaults to the e-mail.\n"
          "  The browser flow prints the URL to open and waits for it on 127.0.0.1:1455 (--port; 0: any);\n"
          "  --device prints a code to enter on any device instead. --timeout bounds the wait (default\n"
          "  600 s, or the device code's own expiry)\n",
          f);
}

int cli_account_login(int argc, char **argv)
{
    const char *cmd = "account login";
    cli_login_args a = {0};
    const cli_opt opts[] = {
        {"db", &a.db, NULL},          {"name", &a.name, NULL},
        {"port", &a.port, NULL},      {"timeout", &a.timeout, NULL},
        {"device", NULL, &a.device},  {"no-browser", NULL, &a.no_browser},
        {"help", NULL, &a.help},      {NULL, NULL, NULL},
    };
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &a.help, cli_usage_login);
    if (rc >= 0)
        return rc;
    int port = LOGIN_CALLBACK_PORT, timeout = 0;
    if (a.name && !*a.name) {
        fprintf(stderr, "switchyard %s: --name is empty\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if ((a.port && cli_parse_int(cmd, "port", a.port, 0, &port) != 0) ||
        (a.timeout && cli_parse_int(cmd, "timeout", a.timeout, 1, &timeout) != 0))
        return CLI_EXIT_USAGE;
    if (port > 65535) {
        fprintf(stderr, "switchyard %s: --port must be 0..65535, got '%s'\n", cmd, a.port);
        return CLI_EXIT_USAGE;
    }
    if (a.device && (a.port || a.no_browser)) {
        fprintf(stderr, "switchyard %s: --device uses no browser callback; drop --port/--no-browser\n", cmd);
        return CLI_EXIT_USAGE;
    }
    sy_config cfg;
    config_defaults(&cfg);
    if (config_from_env(&cfg) != 0) {
        fprintf(stderr, "switchyard %s: a SWITCHYARD_* setting is invalid (see above)\n", cmd);
        return CLI_EXIT_FAIL;
    }
    store *s = cli_store_open_new(cmd, a.db); /* before the sign-in: a database that will not open wastes none */
    if (!s)
        return CLI_EXIT_FAIL;
    login_list l = {0};
    l.v = calloc(1, sizeof *l.v);
    if (!l.v) {
        store_close(s);
        return CLI_EXIT_FAIL;
    }
    l.n = l.cap = 1;
    login_entry *e = &l.v[0];
    int got = a.device ? cli_login_device(cmd, &cfg, timeout, e)
                       : cli_login_browser(cmd, &cfg, &a, port, timeout ? timeout : CLI_LOGIN_BROWSER_S, e);
    rc = CLI_EXIT_FAIL;
    if (got == 0) {
        snprintf(e->label, sizeof e->label, "the sign-in");
        e->name = a.name ? strdup(a.name) : NULL;
        account_new an;
        char name[128], err[512] = "";
        login_entry_to_account(e, &an, name, sizeof name);
        const char *labels[1] = {e->label};
        int added = 0, updated = 0;
        if (store_accounts_import(s, &an, 1, labels, &added, &updated, err, sizeof err) == 0) {
            if (added)
                cli_line("signed in as %s (plan %s): added account %s", e->email ? e->email : "?",
                         e->plan_type ? e->plan_type : "?", name);
            else
                cli_line("signed in as %s (plan %s): updated the account that holds this ChatGPT login",
                         e->email ? e->email : "?", e->plan_type ? e->plan_type : "?");
            rc = CLI_EXIT_OK;
        } else {
            fprintf(stderr, "switchyard %s: %s; nothing was stored\n", cmd, err);
        }
    }
    login_list_free(&l);
    store_close(s);
    return rc;
}
