// dashboard_browser.js: what the dashboard drivers share (dashboard_driver.js,
// dashboard_fit_driver.js, dashboard_message_driver.js): headless Debian
// Chromium through playwright-core (PLAYWRIGHT_CORE, CHROMIUM, USER_DATA_DIR
// from the test), the page's errors collected, and the sign-in as a user
// does it: the token typed into the focused field, Enter.
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
