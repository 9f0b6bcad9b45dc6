// Drives headless Chromium (the system's, through playwright-core) to a page of
// one origin that calls agentrun serve on another, as a web front end does:
// fetch starts a streamed run with the bearer token, asks for a stream token,
// and EventSource follows the run's events with it. Prints as JSON what the
// page saw: the run id (an exposed header), the streamed text and the answer;
// or, where the browser refused (CORS), blocked: true.
//
//   node browser-stream.mjs PAGE_URL API_URL TOKEN AGENT INPUT
import { chromium } from "playwright-core";

const [pageURL, api, token, agent, input] = process.argv.slice(2);
if (!pageURL || !api || !token || !agent || !input) {
  console.error("usage: node browser-stream.mjs PAGE_URL API_URL TOKEN AGENT INPUT");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  await page.goto(pageURL);
  const seen = await page.evaluate(async ({ api, token, agent, input }) => {
    const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
    let run;
    try {
      run = await fetch(`${api}/v1/agents/${agent}/runs`, { method: "POST", headers, body: JSON.stringify({ input, stream: true }) });
    } catch (err) {
      return { blocked: true, error: String(err) };
    }
    const runId = run.headers.get("X-Agentrun-Run");
    await run.body.cancel(); // the run waits for a reader to come back
    const tok = await (await fetch(`${api}/v1/runs/${runId}/stream_token`, { method: "POST", headers })).json();
    return await new Promise((resolve) => {
      const source = new EventSource(api + tok.events_url);
      let text = "";
      const timer = setTimeout(() => { source.close(); resolve({ runId, text, error: "no result within 15s" }); }, 15000);
      source.addEventListener("text", (e) => { text += JSON.parse(e.data).text; });
      source.addEventListener("result", (e) => {
        clearTimeout(timer);
        source.close();
        resolve({ runId, text, answer: JSON.parse(e.data).result.answer });
      });
    });
  }, { api, token, agent, input });
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
