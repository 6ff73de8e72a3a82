// Drives serve's console in Debian's headless Chromium with playwright-core,
// as a person would: sign in, create a session, send a write in default
// mode, answer its permission request (allow, then reject), see a guard
// denial with the provider's reason, see a vote from another host remove a
// request, see hostile tool and model output shown as text with no
// script run and huge output shown cut with a marker, and see a #token=
// link that does not decode ask for the token. It saves a screenshot. Exits non-zero on the first
// unexpected thing, naming it.
// Usage: node drive.mjs <chromium> <console URL> <host token> <workspace> <user data dir> <screenshot.png> <tokenless console URL>
// ACPGUARD_BROWSER_TIMEOUT_MS bounds each wait (default 30000).
import { chromium } from "playwright-core";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const [exe, base, token, ws, userDataDir, shot, tokenless] = process.argv.slice(2);
const timeout = Number(process.env.ACPGUARD_BROWSER_TIMEOUT_MS || 30000);
const t0 = Date.now();
const step = (what) => console.log("step: " + what + " (" + (Date.now() - t0) + " ms)");
function fail(what) {
  console.error("FAIL: " + what);
  process.exitCode = 1;
  throw new Error(what);
}
function check(ok, what) {
  if (!ok) fail(what);
}

const args = [
  "--headless",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");

// Every request the page makes must go to serve: anything else is a failure.
const foreign = [];
const ctx = await chromium.launchPersistentContext(userDataDir, { executablePath: exe, headless: true, args, timeout });
ctx.setDefaultTimeout(timeout);
await ctx.addInitScript(() => {
  window.__violations = [];
  document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));
});
const dialogs = [];
ctx.on("request", (r) => {
  if (![base, tokenless, proxied].some((b) => r.url().startsWith(b + "/"))) foreign.push(r.url());
});
const page = ctx.pages()[0] || (await ctx.newPage());
page.on("dialog", (d) => {
  if (d.type() !== "confirm") {
    dialogs.push(d.message());
    d.dismiss();
  }
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitUntil(f, what) {
  for (const end = Date.now() + timeout; Date.now() < end; await sleep(50)) if (f()) return;
  fail(what);
}

// A loopback proxy in front of serve that can cut the event streams it
// carries, as a network drop would; it tells which resumed and from where.
const up = new URL(base);
const streams = new Set();
const resumed = [];
const proxy = http.createServer((req, res) => {
  const fwd = http.request({ host: up.hostname, port: up.port, path: req.url, method: req.method, headers: { ...req.headers, host: up.host } }, (ur) => {
    res.writeHead(ur.statusCode, ur.headers);
    ur.pipe(res);
  });
  fwd.on("error", () => res.destroy());
  res.on("close", () => fwd.destroy());
  if (req.url.endsWith("/events")) {
    streams.add(res);
    res.on("close", () => streams.delete(res));
    if (req.headers["last-event-id"]) resumed.push(req.headers["last-event-id"]);
  }
  req.pipe(fwd);
});
await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
const proxied = "http://127.0.0.1:" + proxy.address().port;

async function host(method, p, body) {
  const r = await fetch(base + p, {
    method,
    headers: { Authorization: "Bearer " + token, "X-Qwen-Client-Id": "other-host", "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const t = await r.text();
  return { status: r.status, body: t ? JSON.parse(t) : null };
}

async function send(text) {
  await page.locator("#prompt").fill(text);
  await page.locator("#prompt").press("Control+Enter");
}

// lastStatus waits until the newest tool call's status holds want.
async function lastStatus(want) {
  const st = page.locator("#conversation .tool .status").last();
  await st.filter({ hasText: want }).waitFor();
  return st.textContent();
}

try {
  step("the page asks for the token; a wrong one is refused");
  await page.goto(base + "/");
  await page.locator("#signin").waitFor();
  await page.locator("#token").fill("not-the-token");
  await page.locator("#token").press("Enter");
  await page.locator("#notice", { hasText: "serve refused the token" }).waitFor();

  step("sign in");
  await page.locator("#token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#app").waitFor();
  await page.locator("#health", { hasText: "guard required" }).waitFor();
  check(!(await page.content()).includes(token), "the token is in the page's markup");
  check(!page.url().includes(token), "the token is in the URL");

  step("create a session in default mode");
  await page.locator("#mode").selectOption("default");
  await page.getByRole("button", { name: "Create session" }).click();
  await page.locator("#session-title", { hasText: "Session " }).waitFor();

  step("a write asks; Allow runs it");
  const allowed = path.join(ws, "allowed.txt");
  await send(`call write_file {"file_path":${JSON.stringify(allowed)},"content":"hello\\n"}`);
  await page.locator("#pending .request", { hasText: "waiting for your decision" }).waitFor();
  await page.locator("#conversation .tool .status", { hasText: "waiting for your decision" }).waitFor();
  await page.locator("#pending").getByRole("button", { name: "Allow", exact: true }).click();
  await lastStatus("completed");
  await page.locator("#pending .request").waitFor({ state: "detached" });
  check(fs.existsSync(allowed), "allowed.txt was not written after Allow");
  await page.locator("#conversation", { hasText: "+ hello" }).waitFor();

  step("a write asks; Reject leaves no file");
  const rejected = path.join(ws, "rejected.txt");
  await send(`call write_file {"file_path":${JSON.stringify(rejected)},"content":"no"}`);
  await page.locator("#pending").getByRole("button", { name: "Reject", exact: true }).click();
  await lastStatus("rejected:");
  check(!fs.existsSync(rejected), "rejected.txt was written after Reject");

  step("a guard denial shows the provider's reason (the vote by keyboard)");
  await send(`call run_shell_command {"command":"sudo true"}`);
  const allow = page.locator("#pending").getByRole("button", { name: "Allow", exact: true });
  await allow.focus();
  await page.keyboard.press("Enter");
  await lastStatus("denied by policy: Destructive and network shell commands are not allowed by policy");
  await page.locator("#decisions td", { hasText: "Destructive and network shell commands are not allowed by policy" }).waitFor({ timeout: timeout + 6000 });

  step("a vote from another host removes the request from the page");
  const elsewhere = path.join(ws, "elsewhere.txt");
  await send(`call write_file {"file_path":${JSON.stringify(elsewhere)},"content":"x"}`);
  await page.locator("#pending .request").waitFor();
  const sessions = (await host("GET", "/console/api/sessions")).body.sessions;
  const pending = sessions.flatMap((s) => s.pendingPermissions);
  check(pending.length === 1, "the sessions route lists " + pending.length + " pending requests, want 1");
  const v = await host("POST", "/permission/" + pending[0].requestId, { outcome: { outcome: "selected", optionId: "cancel" } });
  check(v.status === 200, "the other host's vote got " + v.status);
  await page.locator("#pending .request").waitFor({ state: "detached" });
  await page.locator("#conversation .note", { hasText: "another host chose “Reject”" }).waitFor();
  await lastStatus("rejected:");

  step("Cancel turn ends a turn waiting on a request");
  await send(`call write_file {"file_path":${JSON.stringify(path.join(ws, "cancelled.txt"))},"content":"x"}`);
  await page.locator("#pending .request").waitFor();
  await page.getByRole("button", { name: "Cancel turn" }).click();
  await page.locator("#pending .request").waitFor({ state: "detached" });
  await page.locator("#conversation .note", { hasText: "turn ended: cancelled" }).waitFor();
  check(!fs.existsSync(path.join(ws, "cancelled.txt")), "cancelled.txt was written after Cancel turn");

  step("a dropped event stream resumes with Last-Event-ID, nothing shown twice");
  const other = await ctx.newPage();
  await other.goto(proxied + "/#token=" + encodeURIComponent(token));
  const sid = (await page.locator("#session-title").textContent()).replace("Session ", "");
  await other.locator("#sessions button", { hasText: sid.slice(0, 8) }).click();
  await other.locator("#conversation .note", { hasText: "turn ended: cancelled" }).waitFor();
  const items = await other.locator("#conversation li").count();
  check(streams.size === 1, streams.size + " event streams through the proxy, want 1");
  for (const res of streams) res.destroy();
  await waitUntil(() => resumed.length === 1, "no event stream resumed with Last-Event-ID");
  const r = await host("POST", "/session/" + sid + "/prompt", { prompt: [{ type: "text", text: "after the drop" }] });
  check(r.status === 202, "prompt after the drop: " + r.status);
  await other.locator("#conversation .assistant", { hasText: "after the drop" }).waitFor();
  await other.waitForFunction((n) => document.querySelectorAll("#conversation li").length >= n, items + 3);
  await other.locator("#conversation .note").last().filter({ hasText: "turn ended: done" }).waitFor();
  const now = await other.locator("#conversation li").count();
  check(now === items + 3, "after the resume the page shows " + (now - items) + " more items, want 3 (no event twice)");
  await other.close();

  step("the decisions filter by outcome and tool");
  await page.locator("#f-outcome").selectOption("allowed");
  await page.locator("#f-tool").fill("write_file");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.locator("#decisions tr").first().waitFor();
  const rows = await page.locator("#decisions tr").allInnerTexts();
  check(rows.length === 1 && rows[0].includes("write_file") && rows[0].includes("allowed"), "filtered decisions: " + JSON.stringify(rows));
  await page.locator("#f-outcome").selectOption("");
  await page.locator("#f-tool").fill("");
  await page.getByRole("button", { name: "Filter" }).click();

  step("hostile output in a yolo session is shown as text");
  await page.locator("#mode").selectOption("yolo");
  await page.getByRole("button", { name: "Create session" }).click();
  await page.locator("#conversation li").first().waitFor({ state: "detached" });
  const hostile = '<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> <a href="javascript:window.__pwned=3">click</a> \u001b[31mred\u001b[0m';
  const evilName = "<img src=x onerror=window.__pwned=4>.txt";
  await send([
    `call write_file {"file_path":${JSON.stringify(path.join(ws, "hostile.txt"))},"content":${JSON.stringify(hostile)}}`,
    `call write_file {"file_path":${JSON.stringify(path.join(ws, evilName))},"content":"x"}`,
    `call run_shell_command {"command":"cat hostile.txt"}`,
    `call run_shell_command {"command":"ls"}`,
  ].join("\n"));
  await page.locator("#conversation .note", { hasText: "turn ended" }).waitFor();
  await send("[x](javascript:window.__pwned=5) " + hostile);
  await page.locator("#conversation .note", { hasText: "turn ended" }).nth(1).waitFor();
  const seen = await page.locator("#conversation").innerText();
  for (const want of ["<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=2">', '<a href="javascript:window.__pwned=3">click</a>',
    "\\x1b[31mred\\x1b[0m", evilName, "[x](javascript:window.__pwned=5)"]) {
    check(seen.includes(want), "the page does not show " + JSON.stringify(want) + " as text:\n" + seen);
  }
  const tags = await page.evaluate(() => document.querySelectorAll("#app img, #app script, #app a, #app iframe, #app object").length);
  check(tags === 0, tags + " elements made of tool or model output");
  const pwned = await page.evaluate(() => window.__pwned);
  check(pwned === undefined, "a script ran: window.__pwned = " + pwned);
  const violations = await page.evaluate(() => window.__violations);
  check(violations.length === 0, "the page tried what its policy forbids: " + violations.join(", "));
  check(dialogs.length === 0, "dialogs opened: " + dialogs.join(", "));

  step("a huge diff and a huge tool output are shown cut, with what is not shown counted");
  const many = path.join(ws, "many.txt");
  await send([
    `call write_file {"file_path":${JSON.stringify(many)},"content":${JSON.stringify("y\n".repeat(40000))}}`,
    `call run_shell_command {"command":"cat many.txt"}`,
  ].join("\n"));
  await page.locator("#conversation .note", { hasText: "turn ended" }).nth(2).waitFor();
  const cut = await page.evaluate(() => [...document.querySelectorAll("#conversation .tool pre")].slice(-6).map((p) => p.textContent));
  const shown = (t) => JSON.stringify(t && t.length) + " characters ending " + JSON.stringify(t && t.slice(-40));
  const diff = cut.find((t) => t.split("\n")[0].endsWith(" " + many));
  check(diff !== undefined && diff.length <= 65536 + 200 && /\n\u2026 \d+ bytes more not shown$/.test(diff), "a diff of 40000 lines shown as " + shown(diff));
  const out = cut.find((t) => t.startsWith("Command: cat many.txt\n"));
  const outMore = out && /\u2026 (\d+) bytes more not shown$/.exec(out);
  check(outMore && out.indexOf("\u2026") === 65536 && 65536 + Number(outMore[1]) >= 80000, "80000 bytes of output shown as " + shown(out));

  step("screenshots, light and dark");
  await page.screenshot({ path: shot, fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: shot.replace(/\.png$/, "") + "-dark.png", fullPage: true });
  await page.emulateMedia({ colorScheme: "light" });

  step("Delete session closes it");
  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Delete session" }).click();
  await page.locator("#session-title", { hasText: "No session selected" }).waitFor();
  await page.waitForFunction(() => document.querySelectorAll("#sessions li").length === 1);

  step("a #token= fragment signs in and leaves the address bar at once");
  const second = await ctx.newPage();
  await second.goto(base + "/#token=" + encodeURIComponent(token));
  await second.locator("#app").waitFor();
  check(!second.url().includes("#"), "the fragment stayed in the address bar: " + second.url());

  step("a #token= fragment that does not decode asks for the token");
  const bad = await ctx.newPage();
  const badErrors = [];
  bad.on("pageerror", (e) => badErrors.push(e.message));
  await bad.goto(base + "/#token=%E0%A4%A");
  await bad.locator("#signin").waitFor();
  await bad.locator("#notice", { hasText: "the sign-in link's token is not valid: paste the token" }).waitFor();
  check(badErrors.length === 0, "the page threw: " + badErrors.join(", "));
  check(!bad.url().includes("#"), "the fragment stayed in the address bar: " + bad.url());
  await bad.locator("#token").fill(token);
  await bad.getByRole("button", { name: "Sign in" }).click();
  await bad.locator("#app").waitFor();
  await bad.close();

  step("a serve without a host token asks for none");
  const third = await ctx.newPage();
  await third.goto(tokenless + "/");
  await third.locator("#app").waitFor();
  check(await third.locator("#signin").isHidden(), "the sign-in shows without a host token");
  check(await third.locator("#signout").isHidden(), "Sign out shows without a host token");

  step("sign out clears the token");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.locator("#signin").waitFor();
  const stored = await page.evaluate((t) => Object.values(sessionStorage).includes(t), token);
  check(!stored, "sessionStorage still holds the token");

  check(foreign.length === 0, "the page requested other addresses: " + foreign.join(", "));
  console.log("ok: the console drove serve in Chromium");
} catch (e) {
  if (!process.exitCode) console.error("FAIL: " + e.message);
  process.exitCode = 1;
  try {
    await page.screenshot({ path: shot, fullPage: true });
  } catch {}
} finally {
  proxy.close();
  proxy.closeAllConnections();
  await ctx.close();
}
