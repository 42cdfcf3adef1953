/* policy_match.c: metered Lua 5.4 pattern matching for the policy sandbox
 * (see policy_match.h). Written for the sandbox from the reference manual's
 * description of patterns (§6.4.1): character classes, sets, the four
 * quantifiers, captures and position captures, %b, %f, back-references and
 * the ^ / $ anchors, with the same results and error messages as the
 * standard library. Each step of the backtracking matcher, each position a
 * plain find tries and each byte a back-reference compares is charged to the
 * meter; the charge raises an error once the meter is spent or expired. */
#include "policy/policy_match.h"
#include <ctype.h>
#include <lauxlib.h>
#include <stdint.h>
#include <string.h>

#define PM_MAX_CAPTURES 32
#define PM_MAX_DEPTH 200        /* nested matcher calls (as Lua's MAXCCALLS) */
#define PM_CHECK_EVERY 1024     /* steps between two looks at the deadline flag */
#define PM_SPECIALS "^$*+?.([%-"

enum { CAP_OPEN = -1, CAP_POSITION = -2 };

typedef struct pm_state {
    lua_State *L;
    match_meter *m;
    const char *src, *src_end; /* subject */
    const char *pat_end;
    int depth;                 /* matcher calls left before "pattern too complex" */
    int level;                 /* captures opened so far */
    struct {
        const char *at;
        ptrdiff_t len;         /* CAP_OPEN, CAP_POSITION or a length */
    } cap[PM_MAX_CAPTURES];
} pm_state;

/* ---------- the meter ---------- */

static void pm_over(lua_State *L, match_meter *m, const char *what)
{
    m->exhausted = 1;
    luaL_error(L, "policy exceeded its %s in a pattern function", what);
}

static void pm_charge(lua_State *L, match_meter *m, long n)
{
    long before = m->steps;
    m->steps += n;
    if (m->steps > m->limit)
        pm_over(L, m, "step limit");
    if (before / PM_CHECK_EVERY != m->steps / PM_CHECK_EVERY && m->expired)
        pm_over(L, m, "time limit");
}

static inline void pm_step(pm_state *s) { pm_charge(s->L, s->m, 1); }

/* ---------- single characters, classes and sets ---------- */

/* Is c in class letter k (%a, %d, ...)? An upper-case letter complements;
 * any other character stands for itself. */
static int pm_class(int c, int k)
{
    int in;
    switch (tolower(k)) {
    case 'a': in = isalpha(c); break;
    case 'c': in = iscntrl(c); break;
    case 'd': in = isdigit(c); break;
    case 'g': in = isgraph(c); break;
    case 'l': in = islower(c); break;
    case 'p': in = ispunct(c); break;
    case 's': in = isspace(c); break;
    case 'u': in = isupper(c); break;
    case 'w': in = isalnum(c); break;
    case 'x': in = isxdigit(c); break;
    case 'z': in = c == 0; break; /* deprecated, still accepted by Lua 5.4 */
    default: return k == c;
    }
    in = in != 0;
    return isupper(k) ? !in : in;
}

/* Where the single-character item starting at p ends. */
static const char *pm_item_end(pm_state *s, const char *p)
{
    char c = *p++;
    if (c == '%') {
        if (p >= s->pat_end)
            luaL_error(s->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c != '[')
        return p;
    if (p < s->pat_end && *p == '^')
        p++;
    /* the first character of a set is taken literally, even a ']' */
    for (int first = 1;; first = 0) {
        if (p >= s->pat_end)
            luaL_error(s->L, "malformed pattern (missing ']')");
        if (*p == ']' && !first)
            return p + 1;
        if (*p++ == '%' && p < s->pat_end)
            p++;
    }
}

/* Is c in the set [..] that runs from set ('[') to close (its ']')? */
static int pm_set(int c, const char *set, const char *close)
{
    int want = 1;
    const char *p = set + 1;
    if (*p == '^') {
        want = 0;
        p++;
    }
    for (; p < close; p++) {
        if (*p == '%' && p + 1 < close) {
            p++;
            if (pm_class(c, (unsigned char)*p))
                return want;
        } else if (p + 2 < close && p[1] == '-') {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
                return want;
            p += 2;
        } else if ((unsigned char)*p == c) {
            return want;
        }
    }
    return !want;
}

/* Does the subject character at sp match the item p..ep? */
static int pm_single(pm_state *s, const char *sp, const char *p, const char *ep)
{
    if (sp >= s->src_end)
        return 0;
    int c = (unsigned char)*sp;
    switch (*p) {
    case '.': return 1;
    case '%': return pm_class(c, (unsigned char)p[1]);
    case '[': return pm_set(c, p, ep - 1);
    default: return (unsigned char)*p == c;
    }
}

/* ---------- the matcher ---------- */

static const char *pm_match(pm_state *s, const char *sp, const char *p);

/* Greedy: take as many as match, then give back one at a time. */
static const char *pm_greedy(pm_state *s, const char *sp, const char *p, const char *ep)
{
    ptrdiff_t n = 0;
    while (pm_single(s, sp + n, p, ep)) {
        pm_step(s);
        n++;
    }
    for (; n >= 0; n--) {
        const char *r = pm_match(s, sp + n, ep + 1);
        if (r)
            return r;
        pm_step(s);
    }
    return NULL;
}

/* Lazy: try the rest first, then take one more. */
static const char *pm_lazy(pm_state *s, const char *sp, const char *p, const char *ep)
{
    for (;;) {
        const char *r = pm_match(s, sp, ep + 1);
        if (r)
            return r;
        if (!pm_single(s, sp, p, ep))
            return NULL;
        sp++;
        pm_step(s);
    }
}

static const char *pm_open(pm_state *s, const char *sp, const char *p, ptrdiff_t what)
{
    if (s->level >= PM_MAX_CAPTURES)
        luaL_error(s->L, "too many captures");
    s->cap[s->level].at = sp;
    s->cap[s->level].len = what;
    s->level++;
    const char *r = pm_match(s, sp, p);
    if (!r)
        s->level--;
    return r;
}

static const char *pm_close(pm_state *s, const char *sp, const char *p)
{
    int l = s->level - 1;
    while (l >= 0 && s->cap[l].len != CAP_OPEN)
        l--;
    if (l < 0)
        luaL_error(s->L, "invalid pattern capture");
    s->cap[l].len = sp - s->cap[l].at;
    const char *r = pm_match(s, sp, p);
    if (!r)
        s->cap[l].len = CAP_OPEN;
    return r;
}

/* %bxy at p (pointing at x). */
static const char *pm_balance(pm_state *s, const char *sp, const char *p)
{
    if (p + 1 >= s->pat_end)
        luaL_error(s->L, "malformed pattern (missing arguments to '%%b')");
    if (sp >= s->src_end || *sp != p[0])
        return NULL;
    int depth = 1;
    while (++sp < s->src_end) {
        pm_step(s);
        if (*sp == p[1]) {
            if (--depth == 0)
                return sp + 1;
        } else if (*sp == p[0]) {
            depth++;
        }
    }
    return NULL;
}

static int pm_capture_index(pm_state *s, int digit)
{
    int l = digit - '1';
    if (l < 0 || l >= s->level || s->cap[l].len == CAP_OPEN)
        return luaL_error(s->L, "invalid capture index %%%d", l + 1);
    return l;
}

/* %1..%9: the text of an earlier capture again. */
static const char *pm_backref(pm_state *s, const char *sp, int digit)
{
    int l = pm_capture_index(s, digit);
    if (s->cap[l].len == CAP_POSITION)
        return NULL; /* a position has no text: Lua's comparison never matches it (found by fuzz_match) */
    size_t len = (size_t)s->cap[l].len;
    pm_charge(s->L, s->m, (long)(len / 64) + 1);
    if ((size_t)(s->src_end - sp) >= len && memcmp(s->cap[l].at, sp, len) == 0)
        return sp + len;
    return NULL;
}

static const char *pm_match_body(pm_state *s, const char *sp, const char *p)
{
    for (;;) {
        pm_step(s);
        if (p == s->pat_end)
            return sp;
        switch (*p) {
        case '(':
            if (p + 1 < s->pat_end && p[1] == ')')
                return pm_open(s, sp, p + 2, CAP_POSITION);
            return pm_open(s, sp, p + 1, CAP_OPEN);
        case ')':
            return pm_close(s, sp, p + 1);
        case '$':
            if (p + 1 == s->pat_end)
                return sp == s->src_end ? sp : NULL;
            break; /* a '$' elsewhere is an ordinary character */
        case '%':
            if (p + 1 >= s->pat_end)
                break; /* pm_item_end reports it */
            if (p[1] == 'b') {
                sp = pm_balance(s, sp, p + 2);
                if (!sp)
                    return NULL;
                p += 4;
                continue;
            }
            if (p[1] == 'f') {
                p += 2;
                if (p >= s->pat_end || *p != '[')
                    luaL_error(s->L, "missing '[' after '%%f' in pattern");
                const char *ep = pm_item_end(s, p);
                int before = sp == s->src ? 0 : (unsigned char)sp[-1];
                int here = sp < s->src_end ? (unsigned char)*sp : 0;
                if (pm_set(before, p, ep - 1) || !pm_set(here, p, ep - 1))
                    return NULL;
                p = ep;
                continue;
            }
            if (isdigit((unsigned char)p[1])) {
                sp = pm_backref(s, sp, (unsigned char)p[1]);
                if (!sp)
                    return NULL;
                p += 2;
                continue;
            }
            break;
        default:
            break;
        }
        /* a single-character item, maybe quantified */
        const char *ep = pm_item_end(s, p);
        char q = ep < s->pat_end ? *ep : '\0';
        if (!pm_single(s, sp, p, ep)) {
            if (q == '*' || q == '?' || q == '-') {
                p = ep + 1; /* zero repetitions are fine */
                continue;
            }
            return NULL;
        }
        switch (q) {
        case '?': {
            const char *r = pm_match(s, sp + 1, ep + 1);
            if (r)
                return r;
            p = ep + 1;
            continue;
        }
        case '+': return pm_greedy(s, sp + 1, p, ep);
        case '*': return pm_greedy(s, sp, p, ep);
        case '-': return pm_lazy(s, sp, p, ep);
        default:
            sp++;
            p = ep;
            continue;
        }
    }
}

static const char *pm_match(pm_state *s, const char *sp, const char *p)
{
    if (s->depth-- == 0)
        luaL_error(s->L, "pattern too complex");
    const char *r = pm_match_body(s, sp, p);
    s->depth++;
    return r;
}

/* ---------- captures to Lua values ---------- */

static void pm_push_capture(pm_state *s, int i, const char *from, const char *to)
{
    if (i >= s->level) {
        if (i != 0)
            luaL_error(s->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(s->L, from, (size_t)(to - from)); /* no captures: the whole match */
        return;
    }
    ptrdiff_t len = s->cap[i].len;
    if (len == CAP_OPEN)
        luaL_error(s->L, "unfinished capture");
    if (len == CAP_POSITION)
        lua_pushinteger(s->L, (lua_Integer)(s->cap[i].at - s->src) + 1);
    else
        lua_pushlstring(s->L, s->cap[i].at, (size_t)len);
}

/* Pushes the captures (or the whole match when there are none and from is
 * given); returns how many values it pushed. */
static int pm_push_captures(pm_state *s, const char *from, const char *to)
{
    int n = s->level == 0 && from ? 1 : s->level;
    luaL_checkstack(s->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        pm_push_capture(s, i, from, to);
    return n;
}

static void pm_init(pm_state *s, lua_State *L, const char *src, size_t ls, const char *p, size_t lp)
{
    s->L = L;
    s->m = lua_touserdata(L, lua_upvalueindex(1));
    s->src = src;
    s->src_end = src + ls;
    s->pat_end = p + lp;
    s->depth = PM_MAX_DEPTH;
    s->level = 0;
}

static void pm_restart(pm_state *s)
{
    s->level = 0;
    s->depth = PM_MAX_DEPTH;
}

/* Lua's rule for a start position: negative counts from the end, and
 * anything before the start is the start. Returns a 1-based position. */
static size_t pm_start(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

/* Does the pattern (which may hold NULs) use any special character? */
static int pm_has_specials(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (p[i] && strchr(PM_SPECIALS, p[i]))
            return 1;
    return 0;
}

/* Plain search for needle in hay, every tried position charged. */
static const char *pm_plain(lua_State *L, match_meter *m, const char *hay, size_t lh, const char *needle, size_t ln)
{
    if (ln == 0)
        return hay;
    if (ln > lh)
        return NULL;
    const char *end = hay + (lh - ln) + 1, *p = hay;
    long cost = (long)(ln / 64) + 1;
    while (p < end) {
        const char *q = memchr(p, needle[0], (size_t)(end - p));
        if (!q)
            return NULL;
        pm_charge(L, m, cost);
        if (memcmp(q + 1, needle + 1, ln - 1) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
}

/* ---------- the library functions ---------- */

static int pm_find_aux(lua_State *L, int find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = pm_start(luaL_optinteger(L, 3, 1), ls) - 1;
    match_meter *m = lua_touserdata(L, lua_upvalueindex(1));
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    pm_charge(L, m, 1);
    if (find && (lua_toboolean(L, 4) || !pm_has_specials(p, lp))) {
        const char *hit = pm_plain(L, m, s + init, ls - init, p, lp);
        if (hit) {
            lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
            lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
            return 2;
        }
        luaL_pushfail(L);
        return 1;
    }
    pm_state st;
    int anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    pm_init(&st, L, s, ls, p, lp);
    const char *from = s + init;
    do {
        pm_restart(&st);
        const char *e = pm_match(&st, from, p);
        if (e) {
            if (find) {
                lua_pushinteger(L, (lua_Integer)(from - s) + 1);
                lua_pushinteger(L, (lua_Integer)(e - s));
                return pm_push_captures(&st, NULL, NULL) + 2;
            }
            return pm_push_captures(&st, from, e);
        }
    } while (from++ < st.src_end && !anchor);
    luaL_pushfail(L);
    return 1;
}

static int pm_find(lua_State *L) { return pm_find_aux(L, 1); }
static int pm_match_fn(lua_State *L) { return pm_find_aux(L, 0); }

/* gmatch's iterator: upvalues meter, subject, pattern, state. */
typedef struct pm_gmatch {
    size_t pos;       /* where the next search starts */
    size_t last;      /* end of the last match, SIZE_MAX before the first */
} pm_gmatch;

static int pm_gmatch_next(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(2), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(3), &lp);
    pm_gmatch *g = lua_touserdata(L, lua_upvalueindex(4));
    pm_state st;
    pm_init(&st, L, s, ls, p, lp);
    for (const char *from = s + g->pos; from <= st.src_end; from++) {
        pm_restart(&st);
        const char *e = pm_match(&st, from, p);
        if (e && (size_t)(e - s) != g->last) {
            g->pos = g->last = (size_t)(e - s);
            return pm_push_captures(&st, from, e);
        }
    }
    g->pos = ls + 1;
    return 0;
}

static int pm_gmatch_fn(lua_State *L)
{
    size_t ls;
    luaL_checklstring(L, 1, &ls);
    luaL_checkstring(L, 2);
    size_t init = pm_start(luaL_optinteger(L, 3, 1), ls) - 1;
    lua_settop(L, 2);
    pm_gmatch *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->pos = init > ls ? ls + 1 : init;
    g->last = SIZE_MAX;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1); /* meter, s, p, state */
    lua_pushcclosure(L, pm_gmatch_next, 4);
    return 1;
}

/* Appends the replacement string for the match from..to to b. */
static void pm_add_string(pm_state *s, luaL_Buffer *b, const char *from, const char *to)
{
    size_t l;
    const char *r = lua_tolstring(s->L, 3, &l);
    const char *end = r + l;
    pm_charge(s->L, s->m, (long)(l / 64) + 1);
    while (r < end) {
        const char *pct = memchr(r, '%', (size_t)(end - r));
        if (!pct) {
            luaL_addlstring(b, r, (size_t)(end - r));
            return;
        }
        luaL_addlstring(b, r, (size_t)(pct - r));
        r = pct + 1;
        if (r >= end || (*r != '%' && !isdigit((unsigned char)*r)))
            luaL_error(s->L, "invalid use of '%c' in replacement string", '%');
        if (*r == '%') {
            luaL_addchar(b, '%');
        } else if (*r == '0') {
            luaL_addlstring(b, from, (size_t)(to - from));
        } else {
            pm_push_capture(s, *r - '1', from, to);
            luaL_tolstring(s->L, -1, NULL);
            lua_remove(s->L, -2);
            luaL_addvalue(b);
        }
        r++;
    }
}

static void pm_add_value(pm_state *s, luaL_Buffer *b, const char *from, const char *to, int type)
{
    lua_State *L = s->L;
    if (type == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int n = pm_push_captures(s, from, to);
        lua_call(L, n, 1);
    } else if (type == LUA_TTABLE) {
        pm_push_capture(s, 0, from, to);
        lua_gettable(L, 3);
    } else {
        pm_add_string(s, b, from, to);
        return;
    }
    if (!lua_toboolean(L, -1)) { /* nil or false: keep the original text */
        lua_pop(L, 1);
        luaL_addlstring(b, from, (size_t)(to - from));
        return;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
}

static int pm_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *src = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int type = lua_type(L, 3);
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    luaL_argexpected(L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION || type == LUA_TTABLE,
                     3, "string/function/table");
    int anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    pm_state st;
    pm_init(&st, L, src, ls, p, lp);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *at = src, *last = NULL;
    lua_Integer n = 0;
    while (n < max) {
        pm_restart(&st);
        const char *e = pm_match(&st, at, p);
        if (e && e != last) {
            n++;
            pm_add_value(&st, &b, at, e, type);
            at = last = e;
        } else if (at < st.src_end) {
            luaL_addchar(&b, *at++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    if (n == 0) {
        lua_pushvalue(L, 1); /* nothing replaced: the subject itself */
    } else {
        luaL_addlstring(&b, at, (size_t)(st.src_end - at));
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, n);
    return 2;
}

void match_install(lua_State *L, match_meter *m)
{
    static const luaL_Reg fns[] = {
        {"find", pm_find}, {"match", pm_match_fn}, {"gmatch", pm_gmatch_fn}, {"gsub", pm_gsub}, {NULL, NULL}};
    lua_pushlightuserdata(L, m);
    luaL_setfuncs(L, fns, 1);
}
