// dashboard_message_driver.js: the request detail's error message in
// headless Chromium, for test_error_messages.py (playwright-core, Debian's
// /usr/bin/chromium). Signs in with the admin token, searches the request
// list for SEARCH_WORDS, opens the one row found and prints one JSON line:
// the ids found, the detail's error message, its attempts' messages and
// each attempt's dialect cell (the translation it used, "–" none).
"use strict";

const path = require("path");
const { openDashboard } = require("./dashboard_browser.js");

const BASE = process.env.GATEWAY_URL;
const SHOTS = process.env.SCREENSHOT_DIR;

function say(step, extra) { process.stdout.write(JSON.stringify({ step, ...extra }) + "\n"); }

async function main() {
  const { ctx, page, errors } = await openDashboard();

  await page.waitForSelector("#requests tbody tr[data-id]");

  // the search box: words of the error message (and the model) find the one request
  const before = await page.$$eval("#requests tbody tr[data-id]", (rows) => rows.length);
  await page.fill("#q", process.env.SEARCH_WORDS);
  await page.press("#q", "Enter");
  await page.waitForFunction((n) => {
    const rows = document.querySelectorAll("#requests tbody tr[data-id]");
    return (rows.length > 0 && rows.length < n) || document.querySelector("#requests tbody td.empty");
  }, before, { timeout: 5000 });
  const found = await page.$$eval("#requests tbody tr[data-id]", (rows) => rows.map((r) => Number(r.dataset.id)));
  if (!found.length) throw new Error("the search found no request");

  await page.locator("#requests tbody tr[data-id]").first().click();
  await page.waitForSelector("#detail[open] #detail-attempts");
  const detail = await page.evaluate(() => {
    const m = document.querySelector("#detail-message");
    return { message: m ? m.textContent : null,
      attempt_messages: [...document.querySelectorAll("#detail-attempts tr.att-msg .errmsg")].map((e) => e.textContent),
      dialects: [...document.querySelectorAll("#detail-attempts td[data-dialect]")].map((e) => e.textContent),
      fits: document.querySelector("#detail").getBoundingClientRect().right <= window.innerWidth &&
        (!m || m.scrollWidth <= m.clientWidth) };
  });
  await page.screenshot({ path: path.join(SHOTS, "dashboard-error-message.png"), fullPage: false });
  detail.found = found;
  detail.errors = errors.slice();
  say("detail", detail);
  await ctx.close();
}

main().then(() => process.exit(0), (e) => { say("error", { message: String(e && e.stack || e) }); process.exit(1); });
