// Drives agentrun's web console in headless Chromium (the system's, through
// playwright-core), as cmd/agentrun/console_test.go asks, against `agentrun dev`
// and `agentrun serve --ui`: it chats with an offline agent, checks the answer
// and the timeline's tool call, approves a call that waits (and sees the
// chat follow the resumed run to its answer), probes the knowledge, looks at
// memory and conversations and the runs list, has the Go side edit the spec
// on disk and waits for the page to show dev's reload and then the
// diagnostics — and, on the server in serve mode, checks that the page with
// one user's token lists none of another user's runs. It saves a screenshot of each view and
// fails if any request left the page's origin or the page logged an error.
//
//   node console-e2e.mjs CONFIG_JSON
//
// CONFIG_JSON: {url, mode: "dev"|"serve", user, token, artifacts, readme,
// skip: [step…], isolation: {url, token, foreignRun, ownRun}}. Lines on stdout
// starting with "@" talk to the test: "@edit NAME" asks it to edit the spec
// (it answers a line on stdin once the file is saved), "@shot PATH" names a
// screenshot, and "@result JSON" is the last.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { copyFileSync } from "node:fs";
import { join } from "node:path";

const cfg = JSON.parse(process.argv[2] || "{}");
const skip = new Set(cfg.skip || []);
const timeout = 20000;
const stdin = createInterface({ input: process.stdin });
const answers = stdin[Symbol.asyncIterator]();

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const outside = []; // requests that left the server's origin
const problems = []; // errors the pages logged
const seen = {};

function watch(page, origin) {
  page.on("request", (req) => {
    const u = req.url();
    if (!u.startsWith(origin + "/") && !u.startsWith("data:")) outside.push(u);
  });
  page.on("console", (msg) => {
    // An API's error answer is logged by the browser too: the views show those.
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) problems.push(`console: ${msg.text()}`);
  });
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.setDefaultTimeout(timeout);
}

async function shot(page, name) {
  const path = join(cfg.artifacts, `${name}.png`);
  await page.screenshot({ path });
  console.log(`@shot ${path}`);
  return path;
}

async function edit(what) {
  console.log(`@edit ${what}`);
  const { value } = await answers.next();
  if (value !== "ok") throw new Error(`the test did not edit the spec: ${value}`);
}

function step(name, fn) {
  if (skip.has(name)) return Promise.resolve();
  return fn().catch((err) => {
    err.message = `${name}: ${err.message}`;
    throw err;
  });
}

async function chat(page, text, stop) {
  const before = await page.locator("#chat-log .bubble.agent").count();
  await page.fill("#chat-input", text);
  await page.click("#chat-send");
  const bubble = page.locator("#chat-log .bubble.agent").nth(before);
  await bubble.locator(`xpath=self::*[@data-stop="${stop}"]`).waitFor().catch(async (err) => {
    throw new Error(`the run did not stop with ${stop}: ${await bubble.innerText().catch(() => "")} (${err.message})`);
  });
  return bubble;
}

let current = null; // the page a failure is screenshotted from
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  current = page;
  const origin = new URL(cfg.url).origin;
  watch(page, origin);
  await page.goto(`${cfg.url}/ui/`);
  await page.waitForSelector("body[data-ready=true]");

  // Who the page is: a user and attributes in dev mode, a token in serve mode.
  if (cfg.mode === "dev") {
    await page.waitForSelector("#dev-identity:not([hidden])");
    await page.fill("#dev-user", cfg.user);
    await page.press("#dev-user", "Tab");
    await page.click("#dev-add-attribute");
    await page.fill("#dev-attributes .attribute:last-child .attr-key", "city");
    await page.fill("#dev-attributes .attribute:last-child .attr-value", "上海");
    await page.press("#dev-attributes .attribute:last-child .attr-value", "Tab");
  } else {
    await page.waitForSelector("#serve-identity:not([hidden])");
    await page.fill("#serve-token", cfg.token);
    await page.press("#serve-token", "Enter");
  }
  await page.waitForSelector('#agent-picker option[value="shop-support"]', { state: "attached" });
  await page.selectOption("#agent-picker", "shop-support");

  await step("chat", async () => {
    const bubble = await chat(page, "Where is my order A1002?", "completed");
    seen.answer = await bubble.locator(".answer-text").innerText();
    const call = page.locator('#chat-timeline [data-kind="tool_call"]', { hasText: "get_order_detail" });
    await call.waitFor();
    seen.toolCall = await call.first().innerText();
    await page.locator('#chat-timeline [data-kind="result"]').waitFor();
    seen.timelineKinds = await page.locator("#chat-timeline .ev").evaluateAll((els) => els.map((e) => e.dataset.kind));
  });
  await step("messages", async () => {
    await page.locator('#chat-timeline [data-kind="model_request"] button').first().click();
    await page.locator("#chat-timeline .request-messages li").first().waitFor();
    seen.requestMessages = await page.locator("#chat-timeline .request-messages li").count();
  });
  const chatShot = await shot(page, "chat-timeline");
  if (cfg.readme) copyFileSync(chatShot, cfg.readme);

  await step("approval", async () => {
    const bubble = await chat(page, "Please cancel my order A1003", "awaiting_approval");
    seen.pending = await bubble.locator(".pending").innerText();
    const runID = await bubble.getAttribute("data-run");
    await bubble.locator(".inbox-link").click();
    await page.waitForSelector("#view-approvals:not([hidden])");
    const call = page.locator(".approval-run .approval", { hasText: "cancel_order" });
    await call.waitFor();
    seen.approval = await call.innerText();
    await shot(page, "approvals");
    await call.locator("input.reason").fill("confirmed with the customer by phone");
    await call.locator("button.approve").click();
    const finished = page.locator(".approval-run[data-finished]");
    await finished.waitFor();
    seen.resumedStop = await finished.getAttribute("data-finished");
    seen.resumedOutcome = await finished.locator(".outcome").innerText();
    seen.decided = await finished.locator('.timeline [data-kind="approval_decided"]').innerText();
    await shot(page, "approvals-decided");

    // Back in the chat, the paused run's bubble has followed it to its answer.
    await page.click('#tabs a[data-view="chat"]');
    const resumed = page.locator(`#chat-log .bubble.agent[data-run="${runID}"][data-stop="completed"]`);
    await resumed.waitFor();
    seen.chatResumedAnswer = await resumed.locator(".answer-text").innerText();
    seen.chatResumedPending = await resumed.locator(".pending").count();
    const decidedRow = page.locator('#chat-timeline [data-kind="approval_decided"]');
    await decidedRow.waitFor();
    // The pause and the decision at the top of the timeline's pane.
    await page.locator('#chat-timeline [data-kind="approval_requested"]').evaluate((e) => e.scrollIntoView({ block: "start" }));
    seen.chatResumedNote = await resumed.locator(".resumed").innerText();
    seen.chatResumedKinds = await page.locator("#chat-timeline .ev").evaluateAll((els) => els.map((e) => e.dataset.kind));
    const resumedShot = await shot(page, "chat-resumed");
    if (cfg.readme) copyFileSync(resumedShot, cfg.readme); // the README's: a chat, an approval, the timeline
  });

  await step("graph", async () => {
    await page.click('#tabs a[data-view="graph"]');
    await page.locator(".graph-svg .node").first().waitFor();
    await page.locator(".graph-svg .node.on-path").first().waitFor();
    seen.graphNodes = await page.locator(".graph-svg .node").count();
    seen.graphPath = await page.locator(".graph-svg .node.on-path").evaluateAll((els) => els.map((e) => e.dataset.id));
    seen.graphEdgesOnPath = await page.locator(".graph-svg .edge.on-path").count();
    await shot(page, "graph");
  });

  await step("knowledge", async () => {
    await page.click('#tabs a[data-view="knowledge"]');
    await page.fill("#probe-question", "配送费怎么算？");
    await page.selectOption("#probe-intent", "faq");
    await page.click('#probe-form button[type="submit"]');
    await page.locator("#probe-result .probe").waitFor();
    seen.probe = await page.locator("#probe-result").innerText();
    await shot(page, "knowledge-probe");
  });

  await step("memory", async () => {
    await page.click('#tabs a[data-view="memory"]');
    const item = page.locator("#conversations-list .conversation-item").first();
    await item.waitFor();
    await item.locator("button").click();
    await page.locator("#conversation-detail .conversation .request-messages li").first().waitFor();
    seen.conversation = await page.locator("#conversation-detail .conversation").innerText();
    seen.memory = await page.locator("#memory-facts").innerText();
    await shot(page, "memory-conversations");
  });

  await step("runs", async () => {
    await page.click('#tabs a[data-view="runs"]');
    await page.locator("#runs-list .run-item").nth(1).waitFor();
    seen.runs = await page.locator("#runs-list .run-item").count();
    await page.locator("#runs-list .run-item").last().click();
    await page.locator('#runs-timeline [data-kind="result"]').waitFor();
    seen.replayedKinds = await page.locator("#runs-timeline .ev").evaluateAll((els) => els.map((e) => e.dataset.kind));
    await shot(page, "runs");
  });

  await step("reload", async () => {
    await page.click('#tabs a[data-view="chat"]');
    await edit("description");
    await page.locator("#agent-description", { hasText: "小满外卖客服" }).waitFor();
    seen.description = await page.locator("#agent-description").innerText();
    await edit("invalid");
    await page.locator("#status-banner:not([hidden]) .diagnostic").first().waitFor();
    seen.diagnostics = await page.locator("#status-banner").innerText();
    await shot(page, "diagnostics");
  });
  await context.close();

  await step("isolation", async () => {
    const iso = cfg.isolation;
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const p = await ctx.newPage();
    current = p;
    watch(p, new URL(iso.url).origin);
    await p.goto(`${iso.url}/ui/#runs`);
    await p.waitForSelector("body[data-ready=true]");
    await p.waitForSelector("#serve-identity:not([hidden])");
    await p.fill("#serve-token", iso.token);
    await p.press("#serve-token", "Enter");
    await p.click("#runs-refresh");
    await p.locator(`#runs-list .run-item[data-run="${iso.ownRun}"]`).waitFor();
    seen.isolationRuns = await p.locator("#runs-list .run-item").evaluateAll((els) => els.map((e) => e.dataset.run));
    await p.click('#tabs a[data-view="approvals"]');
    await p.locator(`.approval-run[data-run="${iso.ownRun}"]`).waitFor();
    seen.isolationApprovals = await p.locator(".approval-run").evaluateAll((els) => els.map((e) => e.dataset.run));
    const foreign = await p.evaluate(async (id) => {
      const headers = { Authorization: `Bearer ${sessionStorage.getItem("agentrun.token")}` };
      return [(await fetch(`/v1/runs/${id}`, { headers })).status, (await fetch(`/v1/runs/${id}/approvals`, { headers })).status];
    }, iso.foreignRun);
    seen.isolationForeignStatus = foreign;
    await shot(p, "isolation");
    await ctx.close();
  });

  seen.outside = outside;
  seen.problems = problems;
  console.log("@result " + JSON.stringify(seen));
} catch (err) {
  seen.outside = outside;
  seen.problems = problems;
  console.log("@result " + JSON.stringify(seen));
  console.error(err.stack || String(err));
  process.exitCode = 1;
  if (current) await shot(current, "failure").catch(() => {});
} finally {
  await browser.close();
  stdin.close();
}
