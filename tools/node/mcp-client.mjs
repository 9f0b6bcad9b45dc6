// Drives an MCP server (agentrun mcp over stdio, or agentrun serve's /mcp) with
// the official TypeScript SDK's Client, and prints as JSON what it saw: the
// tools listed, and for each call its result (or error) and the progress
// notifications it got.
//
//   node mcp-client.mjs PLAN_JSON
//
// PLAN_JSON is {"transport": "stdio", "command": ..., "args": [...], "env": {...}}
// or {"transport": "http", "url": ..., "token": ...}, with "steps": a list of
// {"op": "list"}, {"op": "call", "name", "arguments", "progress": bool,
// "cancelAfterProgress": n} and {"op": "terminate"} (HTTP: DELETE the session),
// and "elicit": a reply to every elicitation request, if the client is to offer
// elicitation ({"action": "accept", "content": {...}}).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const plan = JSON.parse(process.argv[2] ?? "null");
if (!plan || !Array.isArray(plan.steps)) {
  console.error("usage: node mcp-client.mjs PLAN_JSON");
  process.exit(2);
}

const transport = plan.transport === "http"
  ? new StreamableHTTPClientTransport(new URL(plan.url), {
      requestInit: { headers: plan.token ? { Authorization: `Bearer ${plan.token}` } : {} },
    })
  : new StdioClientTransport({
      command: plan.command, args: plan.args ?? [],
      env: { ...getDefaultEnvironment(), ...(plan.env ?? {}) }, stderr: "inherit",
    });

const capabilities = plan.elicit ? { elicitation: { form: {} } } : {};
const client = new Client({ name: "agentrun-test", version: "1.0.0" }, { capabilities });
const elicitations = [];
if (plan.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations.push(req.params);
    return plan.elicit;
  });
}

const out = { calls: [], elicitations };
try {
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.sessionId = transport.sessionId ?? null;
  for (const step of plan.steps) {
    if (step.op === "list") {
      out.tools = (await client.listTools()).tools;
    } else if (step.op === "call") {
      const progress = [];
      const abort = new AbortController();
      const options = { signal: abort.signal, timeout: 60000 };
      if (step.progress || step.cancelAfterProgress) {
        options.onprogress = (p) => {
          progress.push(p);
          if (step.cancelAfterProgress && progress.length >= step.cancelAfterProgress) abort.abort("the test cancels");
        };
      }
      const call = { progress };
      try {
        call.result = await client.callTool({ name: step.name, arguments: step.arguments }, undefined, options);
      } catch (err) {
        call.error = { code: err.code ?? null, message: String(err.message ?? err) };
        // The client sends notifications/cancelled as the call is aborted: give it
        // time to reach the server before the client closes.
        if (abort.signal.aborted) await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      out.calls.push(call);
    } else if (step.op === "terminate") {
      await transport.terminateSession();
    }
  }
} catch (err) {
  out.error = String(err.message ?? err);
}
await client.close().catch(() => {});
console.log(JSON.stringify(out));
