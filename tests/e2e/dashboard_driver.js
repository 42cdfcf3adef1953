// dashboard_driver.js: drives the dashboard in headless Chromium for
// test_dashboard.py (playwright-core, Debian's /usr/bin/chromium). The test
// passes the gateway's address, the admin token and the platform key in the
// environment; each step prints one JSON line on stdout, and the driver
// waits for a line on stdin where the test must change something outside
// the browser (the upstream's answer, stopping the gateway).
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");
const { openDashboard } = require("./dashboard_browser.js");

const BASE = process.env.GATEWAY_URL;
const SHOTS = process.env.SCREENSHOT_DIR;
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function say(step, extra) { process.stdout.write(JSON.stringify({ step, ...extra }) + "\n"); }
async function waitForTest(step) { say(step); const l = await lines.next(); if (l.done) throw new Error("test went away"); }

async function ask(body) {
  const r = await fetch(BASE + "/v1/responses", {
    method: "POST",
    headers: { Authorization: "Bearer " + process.env.PLATFORM_KEY, "Content-Type": "application/json" },
    body: JSON.stringify(body || { model: "gpt-test", input: "hi" }),
  });
  await r.text();
  return { status: r.status, account: r.headers.get("x-switchyard-account") };
}

async function main() {
  const { ctx, page, errors } = await openDashboard();
  page.on("dialog", (d) => { errors.push("dialog: " + d.message()); d.dismiss(); });

  await page.waitForSelector('#pool tr[data-account="a"] [data-state="available"]');
  const stored = await page.evaluate(() => ({ session: Object.values(sessionStorage), local: Object.keys(localStorage) }));
  say("signed-in", { stored });

  // a 429 on a: the request fails over to b, and the page shows it
  const first = await ask();
  const t0 = Date.now();
  await page.waitForSelector('#requests tr [data-outcome="failover"]', { timeout: 2000 });
  const seenMs = Date.now() - t0;
  await page.waitForSelector('#pool tr[data-account="a"] [data-state="cooling"]', { timeout: 2000 });
  const countdown = await page.textContent('#pool tr[data-account="a"] td.cd');
  const attempts = await page.textContent('#requests tbody tr:first-child .att');
  say("failover-seen", { first, seen_ms: seenMs, countdown, attempts });

  // a few more requests for the chart and the list
  for (let i = 0; i < 3; i++) await ask();
  await waitForTest("upstream-a-fixed?");

  // reset a's cooldown from the page (keyboard: focus the button, press Enter)
  const reset = page.locator('#pool button[data-action="reset"][data-account="a"]');
  await reset.focus();
  await page.keyboard.press("Enter");
  await page.waitForSelector('#pool tr[data-account="a"] [data-state="available"]', { timeout: 5000 });
  const after = await ask();
  await page.waitForFunction(() => {
    const row = document.querySelector("#requests tbody tr:first-child .att");
    return row && row.textContent.startsWith("a ok");
  }, null, { timeout: 5000 });
  say("reset-served", { after });

  // keyboard focus survives the page's once-a-second redraw
  await page.locator('#pool button[data-action="disable"][data-account="b"]').focus();
  const before = await page.$eval('#pool tr[data-account="b"]', (tr) => { tr.dataset.old = "1"; return true; });
  await page.waitForSelector('#pool tr[data-account="b"]:not([data-old])'); // the rows were drawn anew
  const focused = await page.evaluate(() => {
    const f = document.activeElement;
    return f ? `${f.dataset.action}:${f.dataset.account}` : null;
  });
  say("focus-kept", { focused, redrawn: before });
  await page.screenshot({ path: path.join(SHOTS, "dashboard.png"), fullPage: true });

  // a narrow window still shows the pool and its actions
  await page.setViewportSize({ width: 420, height: 900 });
  await page.waitForTimeout(300);
  const narrow = await page.evaluate(() => ({
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    resetVisible: !!document.querySelector('#pool button[data-action="reset"]').offsetParent,
  }));
  narrow.errors = errors.slice();
  await page.screenshot({ path: path.join(SHOTS, "dashboard-narrow.png"), fullPage: true });
  say("narrow", narrow);
  await page.setViewportSize({ width: 1440, height: 900 });

  // the request list filtered by account: only what c served or was tried on
  await page.selectOption("#acct-filter", "c");
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll("#requests tbody tr .att")];
    return rows.length > 0 && rows.every((r) => r.textContent.includes("c ok"));
  }, null, { timeout: 5000 });
  const filtered = await page.$$eval("#requests tbody tr", (rows) => rows.length);
  await page.selectOption("#acct-filter", "");
  say("filtered", { rows: filtered });

  // "Add ChatGPT account": the button gives a code to enter, then the outcome
  await page.click("#add-chatgpt");
  await page.fill("#login-name", "dash");
  await page.fill("#login-sort", "-4");          // the new account's place and models, as account add takes them
  await page.fill("#login-models", "gpt-5, o3");
  await page.click('#login-form button[type="submit"]');
  await page.waitForSelector("#login-code", { timeout: 10000 });
  const code = await page.textContent("#login-code");
  const link = await page.getAttribute("#login-status a", "href");
  await page.waitForSelector('#login-status[data-state="approved"]', { timeout: 15000 });
  const outcome = await page.textContent("#login-status");
  await page.waitForSelector('#pool tr[data-account="dash"]', { timeout: 5000 });
  say("signed-in-account", { code, link, outcome });

  // the gateway stops: the page says so
  await waitForTest("stop-gateway?");
  await page.waitForSelector("#down:not([hidden])", { timeout: 10000 });
  const banner = await page.textContent("#down");
  const pill = await page.textContent("#conn");
  const stale = await page.evaluate(() => document.querySelector("#app").classList.contains("stale") &&
    document.querySelector("#pool").closest("section").inert);
  await page.screenshot({ path: path.join(SHOTS, "dashboard-stopped.png"), fullPage: false });
  say("stopped-shown", { banner, pill, stale });
  await ctx.close();
}

main().then(() => process.exit(0), (e) => { say("error", { message: String(e && e.stack || e) }); process.exit(1); });
