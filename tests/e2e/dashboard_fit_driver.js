// dashboard_fit_driver.js: the dashboard's layout, spend, search and
// request detail in headless Chromium, for test_dashboard.py
// (playwright-core, Debian's /usr/bin/chromium). The test passes the
// gateway's address and the admin token in the environment, and the names
// it made long (LONG_ACCOUNT, HELD_ACCOUNT, SEARCH_WORD); each step prints
// one JSON line on stdout with what the page showed, and the test judges it.
"use strict";

const path = require("path");
const { openDashboard } = require("./dashboard_browser.js");

const BASE = process.env.GATEWAY_URL;
const SHOTS = process.env.SCREENSHOT_DIR;
const LONG = process.env.LONG_ACCOUNT;

function say(step, extra) { process.stdout.write(JSON.stringify({ step, ...extra }) + "\n"); }

// What a width shows: sideways overflow of the page, the pool table against
// its card, every card (section.card) and every scrolling box (.scroll) in
// it against its own width, each action button: inside the viewport and the
// element at its centre (not hidden under anything, not scrolled away in its
// card), and each held account's fix: its text and whether it shows whole.
async function measure(page) {
  return page.evaluate(() => {
    const label = (e) => e.id || (e.querySelector("h2") || {}).id || e.className;
    const out = {
      width: window.innerWidth,
      overflow: document.documentElement.scrollWidth - window.innerWidth,
      poolOverflow: (() => { const s = document.querySelector("#pool").closest(".scroll"); return s.scrollWidth - s.clientWidth; })(),
      buttons: [], names: [], cards: [], fixes: [],
    };
    for (const card of document.querySelectorAll("#app section.card")) {
      if (!card.offsetParent) continue; /* hidden (the alerts card without its endpoint) */
      out.cards.push({ card: label(card), box: "card", scrollWidth: card.scrollWidth, clientWidth: card.clientWidth });
      for (const s of card.querySelectorAll(".scroll")) {
        const t = s.querySelector("table");
        out.cards.push({ card: label(card), box: t && t.id ? "#" + t.id : "scroll", scrollWidth: s.scrollWidth,
          clientWidth: s.clientWidth });
      }
    }
    for (const f of document.querySelectorAll("#pool .hold-fix")) {
      const r = f.getBoundingClientRect();
      out.fixes.push({ account: f.dataset.account, text: f.textContent, scrollWidth: f.scrollWidth,
        clientWidth: f.clientWidth, shown: r.width > 0 && r.height > 0 && !!f.offsetParent,
        inView: r.left >= 0 && r.right <= window.innerWidth });
    }
    for (const b of document.querySelectorAll("#pool button[data-action]")) {
      const r0 = b.getBoundingClientRect();
      window.scrollTo(0, Math.max(0, r0.top + window.scrollY - window.innerHeight / 2));
      const r = b.getBoundingClientRect();
      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      out.buttons.push({ action: b.dataset.action, account: b.dataset.account, left: r.left, right: r.right,
        visible: !!b.offsetParent, onTop: hit === b || b.contains(hit) });
    }
    window.scrollTo(0, 0);
    for (const td of document.querySelectorAll("#pool td.name, #spend-accounts td.name, #keys td.name, #spend-models td.name")) {
      const span = td.querySelector(".cut");
      out.names.push({ title: td.title, text: td.textContent, cut: !!span && span.scrollWidth > span.clientWidth,
        right: td.getBoundingClientRect().right });
    }
    return out;
  });
}

async function main() {
  const { ctx, page, errors } = await openDashboard();

  await page.waitForSelector(`#pool tr[data-account="${LONG}"]`);
  await page.waitForSelector(`#spend-accounts tr[data-name="${LONG}"] .budget`);
  await page.waitForSelector(`#pool tr.row-held[data-account="${process.env.HELD_ACCOUNT}"]`);

  // fits at 1024, 1280, 1440 and 1920 px with the long names, and on a phone
  for (const width of [1024, 1280, 1440, 1920, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForTimeout(400);
    const m = await measure(page);
    m.searchVisible = await page.evaluate(() => {
      const r = document.querySelector("#q").getBoundingClientRect();
      return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth;
    });
    await page.screenshot({ path: path.join(SHOTS, `dashboard-${width}.png`), fullPage: true });
    say("width", m);
  }
  await page.setViewportSize({ width: 1440, height: 900 });

  // a cut name is one click from whole: the click opens it in place (and it
  // stays open across the next polls' redraws); a second click cuts it again
  const cutState = () => page.evaluate((name) => {
    const span = document.querySelector(`#pool tr[data-account="${CSS.escape(name)}"] td.name .cut`);
    const s = span.closest(".scroll");
    return { cut: span.scrollWidth > span.clientWidth, text: span.textContent, overflow: s.scrollWidth - s.clientWidth };
  }, LONG);
  const closed = await cutState();
  await page.click(`#pool tr[data-account="${LONG}"] td.name .cut`);
  await page.waitForTimeout(1500); /* a poll or more: the redrawn row keeps it open */
  const opened = await cutState();
  await page.click(`#pool tr[data-account="${LONG}"] td.name .cut`);
  const again = await cutState();
  say("expand", { closed, opened, again });

  // spend: the long account's amount today and against its budget
  const spend = await page.evaluate((name) => {
    const tr = document.querySelector(`#spend-accounts tr[data-name="${CSS.escape(name)}"]`);
    const b = tr.querySelector(".budget");
    return { today: tr.querySelector("td.today").textContent, budget: b.querySelector(".amount").textContent,
      spent: parseFloat(b.dataset.spent), usd: parseFloat(b.dataset.budget), title: b.title,
      models: [...document.querySelectorAll("#spend-models tbody tr")].map((r) => r.dataset.name),
      total: document.querySelector("#spend-total").textContent };
  }, LONG);
  say("spend", spend);

  // alerts: the held account's event, listed with what became of it (no
  // webhook in this test: unsent, and the card says so)
  await page.waitForSelector("#alerts-card:not([hidden]) #alerts tr[data-kind=\"account_held\"]", { timeout: 10000 });
  const alerts = await page.evaluate(() => ({
    rows: [...document.querySelectorAll("#alerts tr[data-alert-id]")].map((r) => ({
      kind: r.dataset.kind, subject: r.querySelector("td.subject") ? r.querySelector("td.subject").textContent : "",
      message: r.querySelector("td.message").textContent,
      outcome: r.querySelector("td.outcome [data-outcome]").dataset.outcome })),
    note: (() => { const n = document.querySelector("#alerts-note"); return n && !n.hidden ? n.textContent : ""; })(),
    raised: document.querySelector("#alert-stats [data-stat=raised] dd").textContent,
  }));
  say("alerts", alerts);

  // revoked keys: hidden until asked for
  const keyNames = () => page.$$eval("#keys tbody tr[data-key]", (rows) => rows.map((r) => r.dataset.key));
  const before = await keyNames();
  await page.check("#show-revoked");
  await page.waitForFunction(() => [...document.querySelectorAll("#keys tbody tr")].some((r) => r.classList.contains("row-disabled")));
  const after = await keyNames();
  await page.uncheck("#show-revoked");
  say("revoked", { before, after });

  // search: the words typed in the box, answered by the gateway
  await page.fill("#q", process.env.SEARCH_WORD);
  await page.press("#q", "Enter");
  await page.waitForFunction((w) => {
    const rows = [...document.querySelectorAll("#requests tbody tr[data-id]")];
    return rows.length > 0 && rows.every((r) => r.textContent.toLowerCase().includes(w.toLowerCase()));
  }, process.env.SEARCH_WORD, { timeout: 5000 });
  const found = await page.$$eval("#requests tbody tr[data-id]", (rows) => rows.map((r) => Number(r.dataset.id)));
  await page.fill("#q", "no-request-has-this-word");
  await page.press("#q", "Enter");
  await page.waitForSelector("#requests tbody td.empty", { timeout: 5000 });
  const none = await page.textContent("#requests tbody td.empty");
  await page.click("#search-clear");
  await page.waitForSelector("#requests tbody tr[data-id]", { timeout: 5000 });
  say("search", { found, none });

  // detail: a click on a row opens the request with its attempts
  const first = page.locator("#requests tbody tr[data-id]").first();
  const id = Number(await first.getAttribute("data-id"));
  await first.click();
  await page.waitForSelector("#detail[open] #detail-attempts");
  const detail = await page.evaluate(() => {
    const facts = {};
    for (const d of document.querySelectorAll("#detail .facts div")) facts[d.dataset.fact] = d.querySelector("dd").textContent;
    return { facts, attempts: [...document.querySelectorAll("#detail-attempts tbody tr:not(.att-msg)")].map((r) => r.textContent),
      title: document.querySelector("#detail-h").textContent,
      fits: document.querySelector("#detail").getBoundingClientRect().right <= window.innerWidth };
  });
  await page.screenshot({ path: path.join(SHOTS, "dashboard-detail.png"), fullPage: false });
  await page.keyboard.press("Escape");
  await page.waitForSelector("#detail:not([open])", { state: "attached" });
  detail.id = id;
  detail.errors = errors.slice();
  say("detail", detail);
  await ctx.close();
}

main().then(() => process.exit(0), (e) => { say("error", { message: String(e && e.stack || e) }); process.exit(1); });
