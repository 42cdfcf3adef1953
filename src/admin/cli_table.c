/* cli_table.c: the plain tables of `account list` and `status`: each
 * column as wide as its widest cell (its header included), so a long
 * account name moves the columns after it for every row alike instead of
 * pushing its own row out of line (issue 34: a 70-character name did).
 * Cells are escaped as cli_line escapes a line (text_escape: a name from
 * an import file must not move the cursor), and widths are counted in
 * characters of the escaped text, not bytes. */
#include "admin/cli_internal.h"
#include "base/budget.h"
#include "base/sbuf.h"
#include "base/text.h"
#include <stdio.h>
#include <string.h>

/* Characters (UTF-8 sequences) in the n bytes at s: escaped text is valid
 * UTF-8, so each byte that is not a continuation byte starts one. */
static size_t cli_table_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static size_t cli_table_cell_width(const char *cell)
{
    sbuf e = SBUF_INIT;
    text_escape(&e, cell ? cell : "", cell ? strlen(cell) : 0, NULL);
    size_t w = cli_table_chars(e.p ? e.p : "", e.len);
    sbuf_free(&e);
    return w;
}

void cli_table_init(cli_table *t, const char *const *head, const char *align)
{
    memset(t, 0, sizeof *t);
    t->ncols = strlen(align) < CLI_TABLE_COLS ? strlen(align) : CLI_TABLE_COLS;
    t->align = align;
    cli_table_fit(t, head);
}

void cli_table_fit(cli_table *t, const char *const *cells)
{
    for (size_t i = 0; i < t->ncols; i++) {
        size_t w = cli_table_cell_width(cells[i]);
        if (w > t->width[i])
            t->width[i] = w;
    }
}

void cli_table_print(const cli_table *t, const char *const *cells)
{
    sbuf line = SBUF_INIT, e = SBUF_INIT;
    for (size_t i = 0; i < t->ncols; i++) {
        e.len = 0;
        text_escape(&e, cells[i] ? cells[i] : "", cells[i] ? strlen(cells[i]) : 0, NULL);
        size_t w = cli_table_chars(e.p ? e.p : "", e.len), pad = w < t->width[i] ? t->width[i] - w : 0;
        int right = t->align[i] == 'r', last = i + 1 == t->ncols;
        if (i)
            sbuf_append(&line, " ", 1);
        for (size_t k = 0; right && k < pad; k++)
            sbuf_append(&line, " ", 1);
        sbuf_append(&line, e.p ? e.p : "", e.len);
        for (size_t k = 0; !right && !last && k < pad; k++) /* no spaces at the end of a line */
            sbuf_append(&line, " ", 1);
    }
    sbuf_append(&line, "\n", 1);
    fwrite(line.p, 1, line.len, stdout);
    sbuf_free(&e);
    sbuf_free(&line);
}

/* An amount as the dashboard writes it (web/app.js usd()). */
static void cli_table_usd(char *out, size_t n, double v)
{
    if (v > 0 && v < 0.0001)
        snprintf(out, n, "<$0.0001");
    else
        snprintf(out, n, v >= 100 ? "$%.0f" : v >= 1 ? "$%.2f" : "$%.4f", v);
}

void cli_table_budget(char *out, size_t n, double usd, const char *period, double spent, int over)
{
    if (!(usd > 0)) {
        snprintf(out, n, "-");
        return;
    }
    char a[32], b[32], name[32];
    cli_table_usd(a, sizeof a, spent);
    cli_table_usd(b, sizeof b, usd);
    snprintf(out, n, "%s of %s %s%s", a, b, budget_period_name(period && *period ? period : "month", name, sizeof name),
             over ? ", over" : "");
}
