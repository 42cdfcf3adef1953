/* hold.c: what each hold state means and what to do about it (see
 * hold.h). The states are the ones policies/classify.lua names; the
 * advice ends in the reset because the gateway cannot tell when the
 * operator's fix took effect upstream. */
#include "route/hold.h"
#include <stdio.h>
#include <string.h>

static const hold_info hold_known[] = {
    {"deactivated_workspace", "the ChatGPT workspace was deactivated",
     "sign in to another workspace and import the login again"},
    {"workspace_denied", "the login's workspace may not use Codex",
     "have the workspace admin allow Codex, or sign in to another workspace and import the login again"},
    {"region_unsupported", "the upstream does not serve the gateway's country or region",
     "send the gateway's upstream traffic through a supported region (a proxy)"},
    {"account_deactivated", "the upstream account behind this key or login was deactivated",
     "use another account (`switchyard account update --name NAME --token ...` with a key of a live one, or "
     "remove this one)"},
    {"key_refused", "the upstream refuses this key as invalid",
     "update it with `switchyard account update --name NAME --token ...` (a new key clears the hold)"},
};

/* key_refused's advice names the account in its update command too: a new
 * key is the usual fix, and storing it clears the hold by itself. */
static int hold_by_update(const char *state)
{
    return state && (strcmp(state, "key_refused") == 0 || strcmp(state, "account_deactivated") == 0);
}

hold_info hold_describe(const char *state)
{
    for (size_t i = 0; state && i < sizeof hold_known / sizeof *hold_known; i++)
        if (strcmp(state, hold_known[i].state) == 0)
            return hold_known[i];
    hold_info other = {state && *state ? state : "held", "the upstream refused this account for good",
                       "look at its last errors (`switchyard logs --account`) and fix the account"};
    return other;
}

void hold_fix(const char *state, const char *name, char *out, size_t n)
{
    hold_info h = hold_describe(state);
    name = name ? name : "NAME";
    if (hold_by_update(state))
        snprintf(out, n, "update it with `switchyard account update --name %s --token ...` or `switchyard account "
                 "reset --name %s`", name, name);
    else
        snprintf(out, n, "%s, then `switchyard account reset --name %s`", h.fix, name);
}

void hold_reason(const char *state, const char *name, char *out, size_t n)
{
    hold_info h = hold_describe(state);
    char fix[HOLD_TEXT_MAX];
    hold_fix(state, name, fix, sizeof fix);
    snprintf(out, n, "%s: %s; %s", h.state, h.what, fix);
}
