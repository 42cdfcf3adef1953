// dashboard_browser.js: what the dashboard drivers share (dashboard_driver.js,
// dashboard_fit_driver.js, dashboard_message_driver.js): headless Debian
// Chromium through playwright-core (PLAYWRIGHT_CORE, CHROMIUM, USER_DATA_DIR
// from the test), the page's errors collected (but for the 404 of an
// absent alerts route), and the sign-in as a user does it: the token typed
// into the focused field, Enter.
"use strict";

const { chromium } = require(process.env.PLAYWRIGHT_CORE);

// Opens GATEWAY_URL/admin/ signed in with ADMIN_TOKEN; returns { ctx, page,
// errors } (errors: page errors and console errors, in order).
async function openDashboard() {
  const ctx = await chromium.launchPersistentContext(process.env.USER_DATA_DIR, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1440, height: 900 },
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    // a gateway without GET /admin/api/alerts answers the page's one try
    // with 404, which Chromium logs; the page hides the alerts card then
    // (web/app.js renderAlerts) and asks no more: not an error of the page
    if (/\/admin\/api\/alerts$/.test((m.location() || {}).url || "") && / 404 /.test(m.text())) return;
    errors.push(m.text());
  });
  await page.goto(process.env.GATEWAY_URL + "/admin/");
  // sign in with the keyboard: the token field has focus
  await page.waitForSelector("#token:focus");
  await page.keyboard.type(process.env.ADMIN_TOKEN);
  await page.keyboard.press("Enter");
  return { ctx, page, errors };
}

module.exports = { chromium, openDashboard };
