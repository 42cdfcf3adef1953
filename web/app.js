/* The dashboard's behaviour: sign in with the admin token (sessionStorage
   only), poll the admin API every second, draw the pool, spend, the last
   hour and the requests (searched and paged on the gateway, one opened in
   detail on a click), and send the actions. Plain DOM, no framework. */
"use strict";

const POLL_MS = 1000;
const SLOW_EVERY = 5;            // keys, spend and policy: every 5th poll
const PAGE = 30;                 // requests per page
const TOKEN_KEY = "switchyard.admin_token";
const $ = (sel) => document.querySelector(sel);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  timer: null, polls: 0, offset: 0, lastOk: 0, down: false,
  accounts: [], keys: [], seen: new Set(), busy: false, settingsDirty: false,
  search: { q: "", since: "", until: "" }, // the applied search (the form may hold an edit not yet applied)
  before: null, pages: [], next: null,      // paging: the page's cursor, the newer pages' cursors, the next one
  loginId: null,                            // the sign-in the page follows ("Add ChatGPT account")
  loginSettings: false,                     // it asked for a sort or models
  alertsAbsent: false,                      // the gateway has no /admin/api/alerts (404): not asked again
  opened: new Set(),                        // the cut texts a click opened whole (their data-open keys)
};

/* ---------- small helpers ---------- */

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined)
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return e;
}

function dur(s) {
  if (s === null || s === undefined || s < 0) return "–";
  s = Math.ceil(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d" + Math.floor(s % 86400 / 3600) + "h";
}

function clock(ts) {
  const d = new Date(ts * 1000);
  return d.toLocaleTimeString([], { hour12: false });
}

function serverNow() { return Date.now() / 1000 + state.offset; }

function usd(v) {
  if (v === null || v === undefined) return "–";
  if (v > 0 && v < 0.0001) return "<$0.0001";
  return "$" + (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(4));
}

function count(n) {
  if (n === null || n === undefined || n < 0) return "–";
  if (n >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
  return String(n);
}

/* A cell whose text may be long: cut with an ellipsis by the stylesheet,
   the whole text on hover and a click away (the click opens it in place,
   wrapped inside the same width, so the table does not grow; it stays open
   across the redraws of the polls: state.opened holds its key, by default
   the text itself). */
function cut(tag, cls, text, key) {
  key = key || text;
  return el(tag, { class: cls || null, title: text },
    el("span", { class: state.opened.has(key) ? "cut open" : "cut", "data-open": key, text }));
}

class HttpError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function api(path, body) {
  const opts = { headers: { Authorization: "Bearer " + state.token }, cache: "no-store" };
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch("/admin/api/" + path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok) throw new HttpError(r.status, (data && data.error && data.error.message) || ("HTTP " + r.status));
  return data;
}

/* ---------- sign in / out ---------- */

function showSignin(msg) {
  stopPolling();
  state.token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  $("#app").hidden = true;
  $("#signin").hidden = false;
  $("#signout").hidden = true;
  $("#signin-msg").textContent = msg || "";
  setConn("signed out", "");
  $("#token").value = "";
  $("#token").focus();
}

function showApp() {
  $("#signin").hidden = true;
  $("#app").hidden = false;
  $("#signout").hidden = false;
  startPolling();
}

$("#signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  state.token = $("#token").value.trim();
  if (!state.token) return;
  try {
    await api("overview");
  } catch (e) {
    return showSignin(e.status === 401 || e.status === 403 ? "That token was not accepted: " + e.message : e.message);
  }
  sessionStorage.setItem(TOKEN_KEY, state.token);
  showApp();
});

$("#signout").addEventListener("click", () => showSignin(""));

/* ---------- polling ---------- */

function setConn(text, cls) {
  const c = $("#conn");
  c.textContent = text;
  c.className = "pill " + cls;
}

function startPolling() {
  stopPolling();
  state.polls = 0;
  poll();
}

function stopPolling() {
  if (state.timer) clearTimeout(state.timer);
  state.timer = null;
}

async function poll() {
  state.timer = null;
  const slow = state.polls++ % SLOW_EVERY === 0;
  try {
    const [ov, ac, rq, tl, keys, pol, sp, al] = await Promise.all([
      api("overview"), api("accounts"), api("requests?" + requestQuery()), api("timeline?minutes=60&bucket=60"),
      slow ? api("keys") : null, slow ? api("policy") : null,
      slow ? api("spend" + ($("#show-revoked").checked ? "?revoked=1" : "")) : null,
      /* the alerts are extra: their failure must not make the gateway look down */
      slow && !state.alertsAbsent ? api("alerts").catch((e) => e) : null,
    ]);
    state.offset = ov.now - Date.now() / 1000;
    state.lastOk = ov.now;
    markUp();
    renderSummary(ov);
    renderSettings(ov);
    state.accounts = ac.accounts;
    renderPool();
    renderAccountFilter();
    renderRequests(rq);
    renderChart(tl);
    if (keys) { state.keys = keys.keys; renderKeys(); }
    if (pol) renderPolicy(pol);
    if (sp) renderSpend(sp);
    if (al) renderAlerts(al);
  } catch (e) {
    if (e.status === 401 || e.status === 403) return showSignin("The gateway no longer accepts this token: " + e.message);
    markDown(e);
  }
  if ($("#app").hidden) return;
  state.timer = setTimeout(poll, POLL_MS);
}

/* While the gateway is unreachable the last figures stay visible but can
   be neither clicked nor focused. */
function setInert(on) {
  for (const s of document.querySelectorAll("#app > section, #app > .cols")) s.inert = on;
}

function markUp() {
  state.down = false;
  setInert(false);
  $("#app").classList.remove("stale");
  $("#down").hidden = true;
  setConn("live", "live");
}

/* The gateway stopped (or the network did): say so plainly, grey out the
   last known state, stop the countdowns, keep retrying. */
function markDown(e) {
  state.down = true;
  setInert(true);
  $("#app").classList.add("stale");
  const since = state.lastOk ? " — last update " + clock(state.lastOk) : "";
  const b = $("#down");
  b.textContent = "Gateway unreachable" + since + ". The figures below are stale; retrying every second. (" +
    (e && e.message ? e.message : "no answer") + ")";
  b.hidden = false;
  setConn("unreachable", "down");
}

/* ---------- rendering ---------- */

function renderSummary(ov) {
  const a = ov.accounts, s = ov.since_start;
  const items = [
    ["requests", s.requests], ["failovers", s.failovers], ["preflight switches", s.preflight_switches],
    ["in flight", ov.active_requests], ["available", a.available + " / " + a.total], ["cooling", a.cooling],
    ["breaker open", a.breaker_open], ["held", a.held || 0], ["disabled", a.disabled], ["policy fallbacks", ov.policy.fallbacks_total],
    ["log queue", ov.writer.pending_logs], ["dropped logs", ov.writer.dropped_logs],
    /* the database file deleted, replaced, unreadable or truncated under the gateway, or writes failing */
    ["database", ov.writer.file_problem || (ov.writer.failing ? "writes failing: " + ov.writer.last_error : "ok")],
    ["up", dur(ov.now - ov.started_at)],
  ];
  const dl = $("#summary");
  dl.replaceChildren(...items.map(([k, v]) => el("div", {}, el("dt", { text: k }), el("dd", { text: v }))));
  $("#where").textContent = ov.listen + (ov.draining ? " · draining" : "");
}

function renderSettings(ov) {
  if (state.settingsDirty || document.activeElement === $("#strategy") || document.activeElement === $("#rotation")) return;
  $("#strategy").value = ov.strategy;
  $("#rotation").value = ov.rotation;
}

function usageBar(w, u) {
  const poll = u && u.poll_status >= 400
    ? el("small", { class: "bad-text", title: "the last usage poll was answered with HTTP " + u.poll_status,
      text: " poll " + u.poll_status }) : null;
  if (!w || w.used_pct === null) return el("span", { class: "muted" }, "–", poll);
  const pct = Math.max(0, Math.min(100, w.used_pct));
  const cls = pct >= 90 ? "fill high" : pct >= 70 ? "fill mid" : "fill";
  const fill = el("span", { class: cls });
  fill.style.width = pct + "%"; /* CSSOM, which the page's CSP allows (a style attribute it would not) */
  const span = w.window_s ? " of " + dur(w.window_s) : "";
  return el("span", { class: "bar", title: w.used_pct.toFixed(1) + "% used" + span },
    el("span", { class: "track" }, fill),
    Math.round(pct) + "%", w.resets_in_s !== null ? el("small", { text: "↻ " + dur(w.resets_in_s) }) : null, poll);
}

function actionButton(label, action, acct, extra) {
  return el("button", {
    type: "button", "data-action": action, "data-account": acct.name, "aria-label": label + " " + acct.name,
    onclick: (ev) => act(ev.currentTarget, "accounts/" + action, { account: acct.name }), ...extra,
  }, label);
}

/* Re-rendering replaces the rows every second: the control that had the
   keyboard focus gets it back in the new rows. */
function keepFocus(container, render) {
  const f = document.activeElement;
  const had = f && container.contains(f) ? { action: f.dataset.action, account: f.dataset.account } : null;
  render();
  if (!had) return;
  const again = container.querySelector(`[data-action="${had.action}"][data-account="${CSS.escape(had.account || "")}"]`);
  if (again && !again.disabled) again.focus();
}

function renderPool() {
  keepFocus($("#pool"), renderPoolRows);
}

/* The error column: a refused login says what to do; a hold (out of the
   pool until an operator acts) only its state, since what to do is on a row
   of its own under the account (holdRow); else the last failure's class. */
function lastError(a) {
  if (a.login && a.login.needs_login) return "log in again: " + a.login.needs_login;
  if (a.hold) return a.hold.state;
  return a.last_error || "–";
}

function holdText(a) {
  return a.hold.state + ": " + a.hold.what + ". To fix: " + a.hold.fix;
}

/* A held account's why and fix, whole and wrapped on the row under it:
   the fix is a command the operator has to read (and copy), so it is never
   cut and never hover-only. The box sticks to the visible part of the
   table when the table scrolls (a phone). */
function holdRow(a) {
  return el("tr", { class: "hold-row", "data-hold-for": a.name },
    el("td", { colspan: 13 }, el("div", { class: "hold-fix", "data-account": a.name },
      el("b", { text: a.hold.state }), ": " + a.hold.what + ". To fix: ", el("code", { text: a.hold.fix }),
      a.hold.detail ? el("span", { class: "muted", text: " Upstream said: " + a.hold.detail }) : null)));
}

/* The account's row opened (a click on its name): every figure of the row,
   those of the columns a narrow window hides too, whole. */
function moreRow(a) {
  const w = (x) => (!x || x.used_pct === null ? "–" : Math.round(x.used_pct) + "%" +
    (x.resets_in_s !== null && x.resets_in_s !== undefined ? " (resets in " + dur(x.resets_in_s) + ")" : ""));
  const facts = [
    ["account", a.name], ["kind", a.kind + (a.usage.plan_type ? " · " + a.usage.plan_type : "")],
    ["ladder", a.ladder_step || "–"], ["breaker", a.breaker || "–"],
    ["in flight", a.inflight + (a.max_concurrency ? " / " + a.max_concurrency : "")],
    ["5 h window", w(a.usage.primary)], ["weekly window", w(a.usage.secondary)],
    ["success", Math.round(a.health.success_rate * 100) + "%"],
    ["latency", a.health.latency_ema_ms ? Math.round(a.health.latency_ema_ms) + " ms" : "–"],
    ["last error", a.hold ? a.hold.state : lastError(a)],
  ];
  return el("tr", { class: "more-row", "data-more-for": a.name },
    el("td", { colspan: 13 }, el("dl", { class: "facts more" }, facts.map(([k, v]) =>
      el("div", { "data-fact": k }, el("dt", { text: k }), el("dd", { text: v }))))));
}

function renderPoolRows() {
  const now = serverNow();
  const tb = $("#pool tbody");
  if (!state.accounts.length) {
    tb.replaceChildren(el("tr", {}, el("td", { colspan: 13, class: "empty",
      text: "No accounts yet: add one with 'switchyard account add'." })));
    return;
  }
  tb.replaceChildren(...state.accounts.map((a) => {
    const left = a.cooldown_until ? a.cooldown_until - now : 0;
    const key = "pool:" + a.name, open = state.opened.has(key);
    const name = cut("td", "name", a.name, key);
    const span = name.firstChild;  /* a control: it opens the row's detail, by keyboard too */
    span.tabIndex = 0;
    span.setAttribute("role", "button");
    span.setAttribute("aria-expanded", String(open));
    span.dataset.action = "more";
    span.dataset.account = a.name;
    const row = el("tr", { class: "row-" + a.state + (open ? " open" : ""), "data-account": a.name },
      name,
      el("td", { class: "c-kind", text: a.kind + (a.usage.plan_type ? " · " + a.usage.plan_type : "") }),
      el("td", {}, el("span", { class: "badge s-" + a.state, "data-state": a.state, text: a.state.replace("_", " ") })),
      el("td", { class: left > 0 ? "cd on" : "cd", "data-cooldown-until": a.cooldown_until || "" }, left > 0 ? dur(left) : "–"),
      el("td", { class: "num c-ladder", text: a.ladder_step || "–" }),
      el("td", { class: "c-breaker", text: a.breaker || "–" }),
      el("td", { class: "num c-infl", text: a.inflight + (a.max_concurrency ? " / " + a.max_concurrency : "") }),
      el("td", { class: "c-5h" }, usageBar(a.usage.primary, a.usage)),
      el("td", { class: "c-week" }, usageBar(a.usage.secondary)),
      el("td", { class: "num c-health", text: Math.round(a.health.success_rate * 100) + "%" }),
      el("td", { class: "num c-health", text: a.health.latency_ema_ms ? Math.round(a.health.latency_ema_ms) + " ms" : "–" }),
      cut("td", a.hold ? "c-err held" : "c-err", lastError(a), "err:" + a.name),
      el("td", { class: "actions" },
        a.enabled ? actionButton("Disable", "disable", a) : actionButton("Enable", "enable", a),
        actionButton("Reset", "reset", a, { disabled: !(left > 0 || a.ladder_step || a.fail_streak || a.hold),
          title: a.hold ? "put the account back in the pool (after the fix)" : "clear the cooldown, the 429 ladder and the breaker" })));
    return [row, a.hold ? holdRow(a) : null, open ? moreRow(a) : null].filter(Boolean);
  }).flat());
}

/* A click on a cut text opens it whole (a second click cuts it again); a
   pool account's name opens its detail row as well. In the request list a
   click opens the request's detail instead, which shows every value whole. */
function toggleCut(span) {
  const key = span.dataset.open;
  if (state.opened.has(key)) state.opened.delete(key); else state.opened.add(key);
  if (key.startsWith("pool:")) return renderPool();
  for (const s of document.querySelectorAll(".cut[data-open]"))
    if (s.dataset.open === key) s.classList.toggle("open", state.opened.has(key));
}

$("#app").addEventListener("click", (ev) => {
  const span = ev.target.closest(".cut[data-open]");
  if (span && !span.closest("tr.link")) toggleCut(span);
});
$("#pool").addEventListener("keydown", (ev) => {
  const span = ev.target.closest(".cut[data-open]");
  if (span && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); toggleCut(span); }
});

/* The request list's account filter follows the pool (served by or tried on). */
function renderAccountFilter() {
  const sel = $("#acct-filter");
  const names = state.accounts.map((a) => a.name);
  const have = [...sel.options].slice(1).map((o) => o.value);
  if (names.join("\n") === have.join("\n")) return;
  const cur = sel.value;
  sel.replaceChildren(el("option", { value: "", text: "(all)" }),
    ...names.map((n) => el("option", { value: n, text: n, selected: n === cur })));
}

/* Countdowns move between polls (and stop when the gateway is gone). */
function tickCountdowns() {
  if (state.down) return;
  const now = serverNow();
  for (const td of document.querySelectorAll("#pool td.cd")) {
    const until = parseFloat(td.dataset.cooldownUntil || "0");
    td.textContent = until > now ? dur(until - now) : "–";
    td.classList.toggle("on", until > now);
  }
}
setInterval(tickCountdowns, 250);

function attemptsView(tried) {
  const wrap = el("span", { class: "att" });
  tried.forEach((t, i) => {
    if (i) wrap.append(el("span", { class: "arrow", text: "→" }));
    const what = t.outcome + (t.class && t.outcome !== "ok" ? " " + t.class : "") + (t.status ? " " + t.status : "");
    /* the translation the attempt used (docs/clients.md): client>upstream */
    const via = t.dialect ? ` translated ${t.dialect}` : t.adapted ? " adapted" : "";
    wrap.append(el("span", { class: "step o-" + t.outcome, "data-outcome": t.outcome,
      title: `${t.account}: ${t.outcome}${t.class ? " (" + t.class + ")" : ""}, HTTP ${t.status || "–"}, ${t.ms} ms, model ${t.model}${via}` +
        (t.message ? "\n" + t.message : "") },
      el("b", { text: t.account }), " " + what, t.dialect ? el("span", { class: "via", text: " ⇄" }) : ""));
  });
  if (!tried.length) wrap.append(el("span", { class: "muted", text: "no account tried" }));
  return wrap;
}

/* The query of the request list: the applied search, the filters, the page. */
function requestQuery() {
  const p = new URLSearchParams({ limit: String(PAGE) });
  if (state.search.q) p.set("q", state.search.q);
  const since = state.search.since ? Date.parse(state.search.since) / 1000 : 0;
  const until = state.search.until ? Date.parse(state.search.until) / 1000 : 0;
  if (since > 0) p.set("since", String(since));
  if (until > 0) p.set("until", String(until));
  if ($("#failed-only").checked) p.set("failed", "1");
  if ($("#acct-filter").value) p.set("account", $("#acct-filter").value);
  if (state.before) p.set("before", String(state.before));
  return p.toString();
}

function searching() {
  return !!(state.search.q || state.search.since || state.search.until || $("#failed-only").checked ||
    $("#acct-filter").value);
}

function renderRequests(rq) {
  const rows = rq.requests;
  state.next = rq.next_before;
  $("#older").disabled = !rq.next_before;
  $("#newest").disabled = !state.before;
  const where = state.before ? "older than #" + state.before : "newest";
  $("#req-status").textContent = rows.length + " shown · " + where +
    (rq.scan_limited ? " · this page searched " + rq.scan_max + " requests; Older searches on" : "");
  const tb = $("#requests tbody");
  if (!rows.length) {
    tb.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "empty",
      text: searching() ? (rq.next_before ? "No match in this stretch of the log; Older searches further back."
        : "No matching requests.") : "No requests yet." })));
    return;
  }
  const first = state.seen.size === 0;
  tb.replaceChildren(...rows.map((r) => {
    const fresh = !first && !state.before && !state.seen.has(r.id);
    state.seen.add(r.id);
    const open = () => openDetail(r.id);
    return el("tr", { "data-id": r.id, class: fresh ? "fresh link" : "link", tabindex: 0,
      title: "request #" + r.id + ": click for the details" + (r.error_message ? "\n" + r.error_message : ""), onclick: open,
      onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(); } } },
      el("td", { class: "mono", text: clock(r.ts) }),
      cut("td", "c-key", r.key || "–"),
      el("td", { class: "c-ep mono", text: r.endpoint + (r.stream ? " ⇣" : "") }),
      cut("td", "c-model", r.model || "–"),
      el("td", { class: "num st-" + String(r.status)[0], text: r.status }),
      el("td", { class: "num", text: Math.round(r.latency_ms) }),
      el("td", { class: "num c-cost", text: r.cost_usd === null ? "–" : usd(r.cost_usd) }),
      el("td", { class: "c-att" }, attemptsView(r.tried)));
  }));
  if (state.seen.size > 2000) state.seen = new Set(rows.map((r) => r.id));
}

/* ---------- one request in detail ---------- */

async function openDetail(id) {
  const dlg = $("#detail");
  let r;
  try {
    r = (await api("request?id=" + encodeURIComponent(id))).request;
  } catch (e) {
    if (e.status === 401 || e.status === 403) return showSignin(e.message);
    return showMessage("Request #" + id + ": " + e.message);
  }
  const tok = (v) => (v === null || v === undefined || v < 0 ? "–" : String(v));
  const facts = [
    ["request", "#" + r.id], ["time", new Date(r.ts * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC")],
    ["endpoint", r.endpoint + (r.stream ? " (stream)" : "")],
    ["model", r.model || "–"], ["sent upstream as", r.upstream_model || "–"], ["key", r.key || "–"],
    ["account", r.account || "–"], ["status", String(r.status)], ["error", r.error_class || "none"],
    ["latency", Math.round(r.latency_ms) + " ms"], ["attempts", String(r.attempts)],
    ["input tokens", tok(r.input_tokens)], ["cached tokens", tok(r.cached_tokens)],
    ["output tokens", tok(r.output_tokens)], ["total tokens", tok(r.total_tokens)],
    ["cost", r.cost_usd === null ? "unknown (no price or no usage)" : "$" + r.cost_usd.toFixed(6)],
    ["strategy", r.strategy || "–"], ["resumed", r.resumed ? "yes" : "no"],
  ];
  const dl = el("dl", { class: "facts" }, facts.map(([k, v]) => el("div", { "data-fact": k },
    el("dt", { text: k }), el("dd", { text: v, title: v }))));
  let at = 0;
  const steps = el("table", { class: "grid", id: "detail-attempts" },
    el("thead", {}, el("tr", {}, ["#", "account", "model", "dialect", "outcome", "class", "status", "started", "ms"].map((h) =>
      el("th", { class: ["#", "status", "started", "ms"].includes(h) ? "num" : null, text: h })))),
    el("tbody", {}, r.tried.length ? r.tried.map((t, i) => {
      const row = el("tr", {},
        el("td", { class: "num", text: i + 1 }), cut("td", "", t.account), cut("td", "", t.model),
        el("td", { "data-dialect": t.dialect || "", text: t.dialect || (t.adapted ? "adapted" : "–") }),
        el("td", {}, el("span", { class: "badge o-" + t.outcome, text: t.outcome })),
        el("td", { text: t.class || "–" }), el("td", { class: "num", text: t.status || "–" }),
        el("td", { class: "num", text: "+" + at + " ms" }), el("td", { class: "num", text: t.ms }));
      at += t.ms || 0;
      /* what a failed attempt's upstream said, on a line of its own under it */
      return t.message ? [row, el("tr", { class: "att-msg" }, el("td", {}),
        el("td", { colspan: 8, class: "errmsg", text: t.message }))] : row;
    }).flat() : [el("tr", {}, el("td", { colspan: 9, class: "empty", text: "no account was tried" }))]));
  $("#detail-h").textContent = "Request #" + r.id;
  /* what the client was told when it failed (stored sanitized, at most 300 bytes) */
  const said = r.error_message ? [el("h2", { class: "sub", text: "error message" }),
    el("p", { class: "errmsg", id: "detail-message", text: r.error_message })] : [];
  $("#detail-body").replaceChildren(dl, ...said, el("h2", { class: "sub", text: "attempts" }),
    el("div", { class: "scroll" }, steps));
  if (!dlg.open) dlg.showModal();
  $("#detail-close").focus();
}

$("#detail-close").addEventListener("click", () => $("#detail").close());
$("#detail").addEventListener("click", (ev) => { if (ev.target === $("#detail")) $("#detail").close(); });

function renderChart(tl) {
  const W = 600, H = 150, PAD = 0, n = Math.round(3600 / tl.bucket_s);
  const byT = new Map(tl.buckets.map((b) => [Math.round((b.t - tl.since) / tl.bucket_s), b]));
  let max = 1;
  for (const b of tl.buckets) max = Math.max(max, b.requests);
  const bw = (W - PAD) / n;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const tot = tl.buckets.reduce((a, b) => [a[0] + b.requests, a[1] + b.failovers, a[2] + b.failed], [0, 0, 0]);
  svg.setAttribute("aria-label", `Last hour: ${tot[0]} requests, ${tot[1]} failovers, ${tot[2]} failed`);
  const rect = (x, y, w, h, cls) => {
    const r = document.createElementNS(ns, "rect");
    r.setAttribute("x", x); r.setAttribute("y", y); r.setAttribute("width", w); r.setAttribute("height", h);
    r.setAttribute("class", cls);
    svg.append(r);
  };
  const scale = (v) => (H - 4) * v / max;
  for (let i = 0; i < n; i++) {
    const b = byT.get(i);
    if (!b) continue;
    const x = PAD + i * bw + 0.5, w = Math.max(1, bw - 1);
    rect(x, H - PAD - scale(b.requests), w, scale(b.requests), "r");
    if (b.failovers) rect(x, H - PAD - scale(Math.min(b.failovers, max)), w / 2, scale(Math.min(b.failovers, max)), "f");
    if (b.failed) rect(x + w / 2, H - PAD - scale(b.failed), w / 2, scale(b.failed), "e");
  }
  const line = document.createElementNS(ns, "line");
  line.setAttribute("x1", 0); line.setAttribute("x2", W); line.setAttribute("y1", H - 0.5); line.setAttribute("y2", H - 0.5);
  line.setAttribute("class", "axis");
  svg.append(line);
  /* labels in HTML: the SVG stretches to the card's width, text would too */
  const axis = el("div", { class: "chart-x" }, el("span", { text: "−60 min" }), el("span", { text: "−30 min" }),
    el("span", { text: "now" }));
  const peak = el("div", { class: "chart-x" }, el("span", { text: "peak " + max + "/min" }),
    el("span", { text: `${tot[0]} requests · ${tot[1]} failovers · ${tot[2]} failed` }));
  $("#chart").replaceChildren(peak, svg, axis);
  $("#chart").dataset.failovers = tot[1];
}

/* Revoked keys (every attach and detach leaves one) only when asked for. */
function renderKeys() {
  const tb = $("#keys tbody");
  if (tb.contains(document.activeElement)) return; /* do not pull a list away from under the user */
  const all = $("#show-revoked").checked;
  const keys = state.keys.filter((k) => all || !k.revoked);
  const hidden = state.keys.length - keys.length;
  $("#revoked-count").textContent = all ? "" : "(" + hidden + " hidden)";
  if (!keys.length) {
    tb.replaceChildren(el("tr", {}, el("td", { colspan: 3, class: "empty",
      text: hidden ? "Only revoked keys." : "No platform keys." })));
    return;
  }
  tb.replaceChildren(...keys.map((k) => {
    const sel = el("select", { "aria-label": "preferred account of key " + k.name, "data-key": k.id,
      onchange: (ev) => act(ev.currentTarget, "keys/prefer", { key: k.id, account: ev.currentTarget.value || null }) },
      el("option", { value: "", text: "(none)" }),
      state.accounts.map((a) => el("option", { value: a.name, text: a.name, selected: a.name === k.preferred_account })));
    return el("tr", { class: k.revoked ? "row-disabled" : null, "data-key": k.name },
      cut("td", "name", k.name + (k.revoked ? " (revoked)" : "")),
      el("td", { class: "mono", text: k.prefix + "…" }), el("td", { class: "c-pref" }, sel));
  }));
}

/* ---------- spend ---------- */

/* "$3.20 of $50 · monthly, resets in 12d" with a bar, or "no budget". */
function budgetView(b) {
  if (!b) return el("span", { class: "muted", text: "no budget" });
  const pct = b.usd > 0 ? Math.max(0, Math.min(100, 100 * b.spent_usd / b.usd)) : 0;
  const fill = el("span", { class: b.over ? "fill high" : pct >= 70 ? "fill mid" : "fill" });
  fill.style.width = pct + "%";
  const period = b.period === "month" ? "monthly" : b.period;
  const left = b.resets_at ? b.resets_at - serverNow() : null;
  const text = usd(b.spent_usd) + " of " + usd(b.usd);
  return el("span", { class: "bar budget" + (b.over ? " over" : ""), "data-spent": b.spent_usd, "data-budget": b.usd,
    title: `${text} in this ${period} period` + (left !== null ? `; it resets in ${dur(left)}` : "") + (b.over ? "; over budget" : "") },
    el("span", { class: "track" }, fill),
    /* "$3.20" and "of $50" may go on two lines when the card is narrow */
    el("span", { class: "amount" }, el("span", { text: usd(b.spent_usd) }), " ", el("span", { text: "of " + usd(b.usd) })),
    el("small", { text: period + (b.over ? " · over" : "") }));
}

function spendRow(name, cls, t, b) {
  return el("tr", { "data-name": name, class: cls },
    cut("td", "name", name),
    el("td", { class: "num today", text: usd(t.cost_usd), title: t.requests + " requests today" }),
    el("td", { class: "num c-tok", text: count(t.input_tokens) + " / " + count(t.output_tokens),
      title: `input ${t.input_tokens} (cached ${t.cached_tokens}), output ${t.output_tokens}` }),
    el("td", {}, budgetView(b)));
}

function renderSpend(sp) {
  const empty = (n, text) => el("tr", {}, el("td", { colspan: n, class: "empty", text }));
  const accts = sp.accounts;
  $("#spend-accounts tbody").replaceChildren(...(accts.length
    ? accts.map((a) => spendRow(a.name, a.budget && a.budget.over ? "row-over" : null, a.today, a.budget))
    : [empty(4, "No accounts.")]));
  $("#spend-keys tbody").replaceChildren(...(sp.keys.length
    ? sp.keys.map((k) => spendRow(k.name + (k.revoked ? " (revoked)" : ""), k.revoked ? "row-disabled" : null, k.today, k.budget))
    : [empty(4, "No platform keys.")]));
  const models = sp.models.slice().sort((x, y) => y.today.cost_usd - x.today.cost_usd || y.today.requests - x.today.requests);
  $("#spend-models tbody").replaceChildren(...(models.length ? models.map((m) => el("tr", { "data-name": m.model },
    cut("td", "name", m.model),
    el("td", { class: "num c-tok", text: m.today.requests }),
    el("td", { class: "num", text: count(m.today.input_tokens), title: String(m.today.input_tokens) }),
    el("td", { class: "num c-tok", text: count(m.today.cached_tokens), title: String(m.today.cached_tokens) }),
    el("td", { class: "num", text: count(m.today.output_tokens), title: String(m.today.output_tokens) }),
    el("td", { class: "num", text: usd(m.today.cost_usd) }))) : [empty(6, "No requests today.")]));
  const total = accts.reduce((s, a) => s + a.today.cost_usd, 0);
  $("#spend-total").textContent = usd(total) + " today across the pool";
}

/* ---------- alerts ---------- */

const ALERT_STATS = ["raised", "sent", "failed", "suppressed", "unsent", "dropped", "queued"];
const ALERT_ROWS = 100;

/* GET /admin/api/alerts: {webhook, stats{raised,...}, alerts[{id, at,
   last_at, count, kind, subject, state, message, outcome, detail}] newest
   first; a storm of one event is one row with its count}. A gateway
   without the route (404) hides the card for good; any other failure keeps
   what was shown. Every field is read defensively: a missing or mistyped
   one shows as "–", never breaks the page. */
function renderAlerts(r) {
  const card = $("#alerts-card");
  if (r instanceof Error) {
    if (r.status === 404) { state.alertsAbsent = true; card.hidden = true; }
    if (r.status === 401 || r.status === 403) throw r;
    return;
  }
  if (!r || typeof r !== "object") return;
  card.hidden = false;
  const str = (v) => (v === null || v === undefined || v === "" ? "–" : String(v));
  const stats = r.stats && typeof r.stats === "object" ? r.stats : {};
  $("#alert-stats").replaceChildren(...ALERT_STATS.map((k) => el("div", { "data-stat": k, class: "st-" + k },
    el("dt", { text: k }), el("dd", { text: Number.isFinite(stats[k]) ? count(stats[k]) : "–" }))));
  $("#alerts-note").hidden = r.webhook !== false;
  const tb = $("#alerts tbody");
  const list = Array.isArray(r.alerts) ? r.alerts.filter((a) => a && typeof a === "object").slice(0, ALERT_ROWS) : [];
  if (!list.length) {
    tb.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "empty", text: "No alerts since start." })));
    return;
  }
  tb.replaceChildren(...list.map((a) => {
    const at = Number(a.at), outcome = str(a.outcome);
    const when = Number.isFinite(at) && at > 0 ? new Date(at * 1000) : null;
    return el("tr", { "data-alert-id": str(a.id), "data-kind": str(a.kind) },
      el("td", { class: "mono time", text: when ? clock(at) : "–", title: when ? when.toISOString() : null }),
      el("td", { class: "kind mono c-akind", text: str(a.kind) }),
      cut("td", "subject c-asubj", str(a.subject), "alert-subject:" + str(a.subject)),
      el("td", { class: "message", text: str(a.message) + (Number(a.count) > 1 ? " (×" + Number(a.count) + ")" : "") }),
      el("td", { class: "outcome" }, el("span", { class: "badge a-" + outcome.replace(/[^a-z_]/g, ""),
        "data-outcome": outcome, text: outcome }),
        a.detail ? el("small", { class: "detail", text: String(a.detail) }) : null));
  }));
}

function renderPolicy(p) {
  const last = p.last_reload;
  const box = $("#policy");
  box.replaceChildren(
    el("div", { class: "row" }, el("b", { text: "source" }), p.source),
    el("div", { class: "row" }, el("b", { text: "fallbacks" }), String(p.fallbacks_total),
      p.last_fallback ? el("span", { class: "bad-text", text: " · " + p.last_fallback }) : null),
    el("div", { class: "row" }, el("b", { text: "reload" }), last
      ? el("span", { class: last.ok ? "ok-text" : "bad-text", text: (last.ok ? "ok" : "refused: " + last.error) + " at " + clock(last.at) })
      : el("span", { class: "muted", text: "none since start" })),
    ...p.files.map((f) => el("div", { class: "row" }, el("b", { text: f.hook }),
      el("code", { title: f.path + "\nsha256 " + f.sha256, text: f.sha256.slice(0, 12) }),
      f.fallbacks ? el("span", { class: "bad-text", text: f.fallbacks + " fallbacks" }) : null)));
}

/* ---------- actions ---------- */

/* An action's failure, shown (and announced) above the page for a while. */
function showMessage(text) {
  const m = $("#msg");
  m.textContent = text;
  m.hidden = false;
  clearTimeout(showMessage.timer);
  showMessage.timer = setTimeout(() => { m.hidden = true; }, 8000);
}

async function act(control, path, body) {
  control.disabled = true;
  try {
    await api(path, body);
    state.polls = 0; // fetch keys and policy again with the next poll
  } catch (e) {
    if (e.status === 401 || e.status === 403) return showSignin(e.message);
    showMessage(e.message);
  } finally {
    control.disabled = false;
  }
  stopPolling();
  poll();
}

$("#settings").addEventListener("change", () => { state.settingsDirty = true; });
$("#settings").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.settingsDirty = false;
  act(ev.submitter || $("#settings button[type=submit]"), "settings",
    { strategy: $("#strategy").value, rotation: $("#rotation").value });
});
$("#reload").addEventListener("click", (ev) => act(ev.currentTarget, "policy/reload", {}));
/* The request list: a search (or a filter) starts from the newest page
   again; Older and Newest page with the gateway's cursor. */
function requeryRequests() {
  state.seen.clear();
  stopPolling();
  poll();
}

function applySearch() {
  state.search = { q: $("#q").value.trim(), since: $("#since").value, until: $("#until").value };
  state.before = null;
  state.pages = [];
  requeryRequests();
}

$("#search").addEventListener("submit", (ev) => { ev.preventDefault(); applySearch(); });
$("#search-clear").addEventListener("click", () => {
  $("#q").value = $("#since").value = $("#until").value = "";
  $("#failed-only").checked = false;
  $("#acct-filter").value = "";
  applySearch();
});
for (const f of ["#failed-only", "#acct-filter", "#since", "#until"])
  $(f).addEventListener("change", applySearch);
$("#older").addEventListener("click", () => {
  if (!state.next) return;
  state.pages.push(state.before);
  state.before = state.next;
  requeryRequests();
});
$("#newest").addEventListener("click", () => {
  state.before = null;
  state.pages = [];
  requeryRequests();
});
$("#show-revoked").addEventListener("change", () => { renderKeys(); state.polls = 0; stopPolling(); poll(); });

/* ---------- "Add ChatGPT account": the device-code sign-in run by the gateway ---------- */

const LOGIN_DONE = new Set(["approved", "denied", "expired", "failed"]);

function showLogin(v) {
  const st = $("#login-status");
  st.dataset.state = v.state;
  st.replaceChildren();
  if (v.state === "pending" && v.user_code) {
    const url = /^https?:\/\//.test(v.verification_url || "") ? v.verification_url : null;
    st.append("Open ", url ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: url }) : "the sign-in page",
      " on any device, sign in to ChatGPT and enter the code ", el("code", { id: "login-code", text: v.user_code }),
      v.expires_at ? ` (it expires at ${clock(v.expires_at)}; never share it). ` : ". ", "Waiting for the approval…");
  } else if (v.state === "starting" || v.state === "storing") {
    st.textContent = v.state === "starting" ? "Asking for a code…" : "Approved: storing the login…";
  } else if (v.state === "approved") {
    st.append(v.updated ? "Signed in: updated account " : "Signed in: added account ", el("b", { text: v.account }),
      v.updated ? " (it already held this login" + (state.loginSettings
        ? "; its sort and models stay as they were: change them with 'switchyard account update')." : ").") : ".");
  } else {
    st.textContent = (v.state === "denied" ? "Denied: " : v.state === "expired" ? "Expired: " : "Failed: ") + (v.error || "");
  }
}

async function followLogin(id) {
  state.loginId = id;
  while (state.loginId === id) {
    await new Promise((r) => setTimeout(r, 1000));
    if (state.loginId !== id) return;
    let v;
    try { v = await api("accounts/login?id=" + encodeURIComponent(id)); }
    catch (e) {
      if (e.status === 401 || e.status === 403) return showSignin(e.message);
      if (e.status === 404) { state.loginId = null; return showLogin({ state: "failed", error: e.message }); }
      continue; // the gateway is away for a moment: ask again
    }
    showLogin(v);
    if (LOGIN_DONE.has(v.state)) {
      state.loginId = null;
      state.polls = 0; // the pool, keys and spend again with the next poll
    }
  }
}

function toggleLogin(open) {
  $("#login-panel").hidden = !open;
  $("#add-chatgpt").setAttribute("aria-expanded", String(open));
  if (open) $("#login-name").focus(); else state.loginId = null;
}

$("#add-chatgpt").addEventListener("click", () => toggleLogin($("#login-panel").hidden));
$("#login-close").addEventListener("click", () => toggleLogin(false));
$("#login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const btn = ev.submitter || $("#login-form button[type=submit]");
  const name = $("#login-name").value.trim();
  /* the new account's sort and models, as `account add --sort --models`
     takes them; the gateway checks them (a 400 says what is wrong) */
  const sort = $("#login-sort").value.trim(), models = $("#login-models").value.trim();
  const body = {};
  if (name) body.name = name;
  if (sort !== "") {
    if (!/^[+-]?\d+$/.test(sort)) return showLogin({ state: "failed", error: "sort must be a whole number" });
    body.sort = Number(sort);
  }
  if (models) body.models = models;
  state.loginSettings = sort !== "" || !!models;
  btn.disabled = true;
  showLogin({ state: "starting" });
  try {
    const v = await api("accounts/login", body);
    showLogin(v);
    if (!LOGIN_DONE.has(v.state)) followLogin(v.id);
  } catch (e) {
    if (e.status === 401 || e.status === 403) return showSignin(e.message);
    showLogin({ state: "failed", error: e.message });
  } finally {
    btn.disabled = false;
  }
});

/* ---------- start ---------- */

if (state.token) showApp(); else showSignin("");
