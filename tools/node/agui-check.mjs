// Runs an agent of agentrun serve's AG-UI endpoint with the official client,
// @ag-ui/client's HttpAgent, one thread and several runs on it, and prints as
// JSON what each run sent and what the client made of it. Every event, as it
// came over the wire, is checked against @ag-ui/core's schemas (the zod
// schemas it exports, and no key the event's schema does not name), and the
// run's order is checked: RUN_STARTED first with the input's ids, RUN_FINISHED
// or RUN_ERROR last, text messages and tool calls opened, filled and closed in
// turn. The client's own checks (verifyEvents) and its warnings about material
// it strips count too.
//
//   node agui-check.mjs '{"url": URL, "token": TOKEN, "threadId": ID, "runs": [RUN, …]}'
//
// A RUN is {"message": TEXT} (a user message, added to the thread), or
// {"resume": {"approved": BOOL}} (every pending interrupt answered with that
// payload) or {"resume": "cancelled"}; "headers" adds request headers.
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { randomUUID } from "node:crypto";

const config = JSON.parse(process.argv[2] ?? "null");
if (!config?.url || !config?.token || !config?.threadId || !Array.isArray(config.runs)) {
  console.error("usage: node agui-check.mjs '{\"url\": …, \"token\": …, \"threadId\": …, \"runs\": […]}'");
  process.exit(2);
}

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

const byType = new Map(EventSchema.options.map((s) => [s.shape.type.value, s]));

// The events of a response as sent: each SSE event's data, comments skipped.
async function readEvents(body, out) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const take = (block) => {
    const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (data) out.push(JSON.parse(data));
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += value;
    let i;
    while ((i = buffer.indexOf("\n\n")) >= 0) {
      take(buffer.slice(0, i));
      buffer = buffer.slice(i + 2);
    }
  }
  if (buffer.trim()) take(buffer);
}

function check(events, input) {
  const problems = [];
  events.forEach((ev, i) => {
    const schema = byType.get(ev?.type);
    if (!schema) {
      problems.push(`event ${i}: unknown type ${JSON.stringify(ev?.type)}`);
      return;
    }
    const parsed = schema.safeParse(ev);
    if (!parsed.success) problems.push(`event ${i} (${ev.type}): ${parsed.error.message}`);
    for (const key of Object.keys(ev)) {
      if (!(key in schema.shape)) problems.push(`event ${i} (${ev.type}): key ${key} is not in its schema`);
    }
    for (const [key, value] of Object.entries(ev)) {
      if (value === null) problems.push(`event ${i} (${ev.type}): ${key} is null (omit it)`);
    }
  });
  const first = events[0], last = events.at(-1);
  if (first?.type !== "RUN_STARTED") problems.push(`the first event is ${first?.type}, not RUN_STARTED`);
  else if (first.threadId !== input.threadId || first.runId !== input.runId) problems.push("RUN_STARTED does not carry the input's ids");
  if (last?.type !== "RUN_FINISHED" && last?.type !== "RUN_ERROR") problems.push(`the last event is ${last?.type}`);
  if (last?.type === "RUN_FINISHED" && (last.threadId !== input.threadId || last.runId !== input.runId)) problems.push("RUN_FINISHED does not carry the input's ids");
  const open = { text: new Set(), tool: new Set() };
  events.forEach((ev, i) => {
    if (i > 0 && ev.type === "RUN_STARTED") problems.push(`RUN_STARTED again at ${i}`);
    if ((ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR") && i !== events.length - 1) problems.push(`${ev.type} at ${i}, before the end`);
    const kind = ev.type?.startsWith("TEXT_MESSAGE_") ? "text" : ev.type?.startsWith("TOOL_CALL_") && ev.type !== "TOOL_CALL_RESULT" ? "tool" : null;
    if (!kind) return;
    const id = kind === "text" ? ev.messageId : ev.toolCallId;
    if (ev.type.endsWith("_START")) {
      if (open[kind].has(id)) problems.push(`${ev.type} ${id} while it is open`);
      open[kind].add(id);
    } else if (!open[kind].has(id)) {
      problems.push(`${ev.type} ${id} while it is not open`);
    } else if (ev.type.endsWith("_END")) {
      open[kind].delete(id);
    }
    if (ev.type === "TEXT_MESSAGE_CONTENT" && ev.delta === "") problems.push(`an empty TEXT_MESSAGE_CONTENT at ${i}`);
  });
  for (const [kind, ids] of Object.entries(open)) {
    if (ids.size) problems.push(`${kind} still open at the end: ${[...ids]}`);
  }
  return problems;
}

const agent = new HttpAgent({
  url: config.url,
  threadId: config.threadId,
  headers: { Authorization: `Bearer ${config.token}` },
  fetch: async (url, init) => {
    const res = await fetch(url, init);
    current.status = res.status;
    current.agentrunRun = res.headers.get("x-agentrun-run");
    if (!res.ok || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    current.reading = readEvents(mine, current.events);
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  },
});

let current;
const runs = [];
for (const run of config.runs) {
  const input = { threadId: config.threadId, runId: randomUUID() };
  current = { runId: input.runId, events: [], reading: null };
  agent.headers = { Authorization: `Bearer ${config.token}`, ...(run.headers ?? {}) };
  const params = { runId: input.runId };
  if (run.message !== undefined) agent.addMessage({ id: randomUUID(), role: "user", content: run.message });
  if (run.resume !== undefined) {
    params.resume = agent.pendingInterrupts.map((i) =>
      run.resume === "cancelled" ? { interruptId: i.id, status: "cancelled" } : { interruptId: i.id, status: "resolved", payload: run.resume });
  }
  const custom = [];
  let finished = null;
  let failure = null;
  try {
    await agent.runAgent(params, {
      onCustomEvent: ({ event }) => { custom.push({ name: event.name, value: event.value }); },
      onRunFinishedEvent: ({ outcome, result, interrupts }) => { finished = { outcome, result: result ?? null, interrupts: interrupts ?? [] }; },
      onRunErrorEvent: ({ event }) => { failure = { message: event.message, code: event.code ?? null }; },
    });
  } catch (err) {
    failure ??= { message: String(err?.message ?? err), status: err?.status ?? null };
  }
  try {
    await current.reading;
  } catch (err) {
    failure ??= { message: `reading the stream: ${err}` };
  }
  runs.push({
    runId: input.runId,
    status: current.status ?? null,
    agentrunRun: current.agentrunRun ?? null,
    problems: current.events.length ? check(current.events, input) : [],
    events: current.events,
    custom,
    finished,
    failure,
    messages: structuredClone(agent.messages),
    state: structuredClone(agent.state),
    pendingInterrupts: structuredClone(agent.pendingInterrupts),
  });
}
console.log(JSON.stringify({ runs, warnings }));
