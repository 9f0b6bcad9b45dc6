// The run timeline: every event of a run in order, each kind rendered with what
// it says (runtime/event.go), sub-runs nested under their caller. A Timeline is
// fed the stream's messages as they come (live) or all at once (a past run).

import { api } from "./api.js";
import { h, clear, pretty, kv, errorBox, formatDuration, formatCost } from "./dom.js";

export class Timeline {
  constructor(root) {
    this.root = root;
    this.reset("");
  }

  // reset empties the timeline for run runID.
  reset(runID) {
    this.runID = runID;
    this.events = []; // the events' data, in order, for the graph's path
    this.first = null; // the first event's time
    this.blocks = new Map(); // a sub-run's id → its block's body
    this.lastRequest = new Map(); // a run's id → its last model request's time
    this.lastRow = null;
    this.topRun = "";
    this.list = h("ol", { class: "events" });
    clear(this.root, this.list);
  }

  // add renders one message of a run's stream ({seq, name, data}).
  add(m) {
    if (m.name === "result") {
      this.append(this.list, resultRow(m), null);
      return;
    }
    const e = m.data;
    if (!e || typeof e !== "object") return;
    this.events.push(e);
    const t = Date.parse(e.time);
    if (this.first === null && !Number.isNaN(t)) this.first = t;
    const container = this.containerOf(e);
    if (e.kind === "text" && this.lastRow?.kind === "text" && this.lastRow.container === container) {
      this.lastRow.body.textContent += e.text || "";
      return;
    }
    const row = this.row(m, e, t);
    this.append(container, row, e.kind);
    if (e.kind === "text") this.lastRow.body = row.querySelector(".summary");
  }

  append(container, row, kind) {
    container.appendChild(row);
    this.lastRow = { kind, container };
  }

  // containerOf is where an event goes: the top run's list, or the block of
  // its sub-run, nested in its caller's.
  containerOf(e) {
    if (!e.run_id || !e.depth) {
      if (e.run_id && !this.topRun) this.topRun = e.run_id;
      return this.list;
    }
    let block = this.blocks.get(e.run_id);
    if (!block) {
      const parent = this.blocks.get(e.parent_id) || this.list;
      const body = h("ol", { class: "events" });
      const item = h("li", { class: "subrun", dataset: { run: e.run_id } },
        h("div", { class: "subrun-head" }, h("span", { class: "kind", text: "sub-run" }), " ",
          h("strong", { text: e.agent || "agent" }), " ", h("span", { class: "muted mono", text: e.run_id }),
          e.depth ? h("span", { class: "muted", text: ` depth ${e.depth}` }) : null),
        body);
      parent.appendChild(item);
      this.blocks.set(e.run_id, body);
      block = body;
    }
    return block;
  }

  row(m, e, t) {
    const offset = this.first !== null && !Number.isNaN(t) ? `+${Math.max(0, t - this.first)} ms` : "";
    const r = (renderers[e.kind] || renderOther).call(this, e, m, t);
    return h("li", { class: ["ev", `ev-${e.kind}`, r.tone], dataset: { kind: e.kind, seq: m.seq ?? "" } },
      h("div", { class: "ev-head" },
        h("span", { class: "seq mono", text: m.seq ?? "" }),
        h("span", { class: "kind", text: e.kind }),
        h("span", { class: "summary" }, r.summary),
        h("span", { class: "offset muted", text: offset })),
      r.detail ? h("div", { class: "detail" }, r.detail) : null);
  }
}

const usage = (u) => (u ? `${u.prompt_tokens} in / ${u.completion_tokens} out tokens` : "");
const mono = (text) => h("span", { class: "mono", text });
const pre = (text) => h("pre", { text });
const badge = (text, tone) => h("span", { class: ["badge", tone], text });

// The renderers of each kind: they answer {summary, detail, tone} for an event.
const renderers = {
  state(e) {
    return { summary: [mono(e.from || "·"), " → ", mono(e.state), e.trigger ? h("span", { class: "muted", text: ` on ${e.trigger}` }) : null] };
  },
  intent(e) {
    return { summary: [h("strong", { text: e.intent }), e.routed_by ? h("span", { class: "muted", text: ` routed by ${e.routed_by}` }) : null, e.message ? ` — ${e.message}` : ""] };
  },
  model_request(e, m, t) {
    this.lastRequest.set(e.run_id || "", t);
    const offered = e.offered || [];
    const runID = this.runID;
    const out = h("div", { class: "messages" });
    const button = runID && m.seq ? h("button", {
      type: "button", class: "small", text: "messages",
      on: { click: () => showRequest(out, runID, m.seq) },
    }) : null;
    return {
      summary: [badge(e.purpose || "agent"), ` ${e.messages || 0} messages`,
        offered.length ? [", offered: ", offered.map((n, i) => [i ? ", " : "", mono(n)])] : (e.tools ? `, ${e.tools} tools` : ""),
        button ? " " : "", button],
      detail: button ? out : null,
    };
  },
  model_response(e, m, t) {
    let latency = e.duration_ns;
    const sent = this.lastRequest.get(e.run_id || "");
    if (!latency && sent !== undefined && !Number.isNaN(t)) latency = (t - sent) * 1e6;
    const detail = e.reasoning || e.fallback_from?.length
      ? kv([["reasoning", e.reasoning], ["fallback from", e.fallback_from?.join(", ")]]) : null;
    return {
      summary: [badge(e.purpose || "agent"), e.model ? [" ", mono(e.model)] : null,
        e.finish_reason ? ` ${e.finish_reason}` : "", e.calls ? `, ${e.calls} calls` : "",
        e.usage ? `, ${usage(e.usage)}` : "", latency ? `, ${formatDuration(latency)}` : "",
        e.cost !== undefined ? `, ${formatCost(e.cost)}` : ""],
      detail,
    };
  },
  tool_call(e) {
    return { summary: [h("strong", { text: e.tool }), h("span", { class: "muted mono", text: ` ${e.call_id || ""}` })], detail: e.args ? pre(pretty(e.args)) : null };
  },
  tool_result(e) {
    return {
      summary: [h("strong", { text: e.tool }), e.error ? badge("error", "bad") : badge("ok", "good"), e.duration_ns ? ` ${formatDuration(e.duration_ns)}` : ""],
      detail: [e.error ? h("div", { class: "error", text: e.error }) : null, e.result ? pre(pretty(e.result)) : null],
      tone: e.error ? "bad" : "",
    };
  },
  tool_refused(e) {
    return { summary: [h("strong", { text: e.tool || "(unknown tool)" }), " ", badge(e.refusal || "refused", "bad")], detail: kv([["error", e.error], ["message", e.message], ["arguments", e.args]]), tone: "bad" };
  },
  bind_discarded(e) {
    return { summary: [h("strong", { text: e.tool }), ` tried to set bound parameter `, mono(e.param)] };
  },
  guard(e) {
    return { summary: [badge(e.guard, "warn"), e.purpose ? ` (${e.purpose})` : "", e.message ? ` ${e.message}` : ""], tone: "warn" };
  },
  verdict(e) {
    return {
      summary: [e.passed ? badge("passed", "good") : badge("rejected", "bad"), e.verdict ? ` by ${e.verdict}` : "",
        e.usage ? `, ${usage(e.usage)}` : "", e.cost !== undefined ? `, ${formatCost(e.cost)}` : ""],
      detail: e.missing || e.message ? kv([["missing", e.missing], ["feedback", e.message]]) : null,
      tone: e.passed ? "" : "bad",
    };
  },
  filter(e) {
    return { summary: [h("strong", { text: e.filter }), ` ${e.stage || ""} ${e.action || ""}`, e.message ? ` — ${e.message}` : ""] };
  },
  collect(e) {
    return { summary: [`${e.count || 0} `, mono(e.entity), e.tool ? ` from ${e.tool}` : ""] };
  },
  memory(e) {
    return { summary: [e.level ? badge(e.level) : null, e.count ? ` ${e.count}` : "", e.message ? ` ${e.message}` : ""] };
  },
  cache(e) {
    const c = e.cached;
    return {
      summary: [badge(e.cache || "cache", e.cache === "hit" ? "good" : ""), c ? [" ", mono(c.entry), ` score ${fmtScore(c.score)}`] : "", e.message ? ` — ${e.message}` : ""],
      detail: c ? kv([["kind", c.kind], ["question", c.question], ["gate", c.verdict ? `${c.verdict.passed ? "passed" : "refused"} ${c.verdict.gate || ""}` : ""]]) : null,
    };
  },
  retrieve(e) {
    const ps = e.passages || [];
    return { summary: `${ps.length} passages`, detail: passageList(ps) };
  },
  plan(e) {
    return {
      summary: e.message || `${(e.plan || []).length} steps`,
      detail: h("ol", { class: "plan" }, (e.plan || []).map((p) => h("li", { class: `plan-${p.status}` }, badge(p.status), " ", p.step, p.reason ? ` (${p.reason})` : ""))),
    };
  },
  agent(e) {
    const ended = e.stop !== undefined && e.stop !== "";
    return {
      summary: [h("strong", { text: e.agent }), ended ? [" ended ", badge(e.stop)] : " starts",
        e.call_id ? h("span", { class: "muted mono", text: ` ${e.call_id}` }) : "",
        e.usage ? `, ${usage(e.usage)}` : "", e.cost !== undefined ? `, ${formatCost(e.cost)}` : ""],
      detail: e.message ? h("div", { text: e.message }) : null,
    };
  },
  step(e) {
    return { summary: [h("strong", { text: e.step }), " ", badge(e.step_status, e.step_status === "failed" ? "bad" : "")], detail: e.error ? h("div", { class: "error", text: e.error }) : null };
  },
  text(e) {
    return { summary: e.text || "" };
  },
  approval_requested(e) {
    return { summary: [h("strong", { text: e.tool }), " waits for approval", h("span", { class: "muted mono", text: ` ${e.call_id}` })], detail: [e.message ? h("div", { text: e.message }) : null, e.args ? pre(pretty(e.args)) : null], tone: "warn" };
  },
  approval_decided(e) {
    return { summary: [h("strong", { text: e.tool }), " ", e.passed ? badge("approved", "good") : badge("rejected", "bad"), e.message ? ` — ${e.message}` : ""] };
  },
  remote_agent(e) {
    const r = e.remote || {};
    return { summary: [h("strong", { text: e.tool }), r.state ? [" ", badge(r.state)] : "", r.host ? ` at ${r.host}` : ""], detail: kv([["task", r.task_id], ["context", r.context_id]]) };
  },
  stop(e) {
    return { summary: [badge(e.stop, e.stop === "completed" ? "good" : "warn"), e.usage ? ` ${usage(e.usage)}` : "", e.cost !== undefined ? `, ${formatCost(e.cost)}` : ""], tone: "stop" };
  },
};

function renderOther(e) {
  return { summary: e.message || "", detail: pre(JSON.stringify(e, null, 2)) };
}

function resultRow(m) {
  const d = m.data || {};
  const r = d.result || {};
  return h("li", { class: "ev ev-result", dataset: { kind: "result", seq: m.seq ?? "" } },
    h("div", { class: "ev-head" }, h("span", { class: "seq mono", text: m.seq ?? "" }), h("span", { class: "kind", text: "result" }),
      h("span", { class: "summary" }, r.stop ? badge(r.stop, r.stop === "completed" ? "good" : "warn") : null,
        r.intent ? ` intent ${r.intent}` : "", d.error ? h("span", { class: "error", text: ` ${d.error}` }) : "")),
    r.answer ? h("div", { class: "detail answer", text: r.answer }) : null);
}

export function fmtScore(x) {
  return typeof x === "number" ? x.toFixed(3) : "";
}

export function passageList(ps) {
  return h("ol", { class: "passages" }, ps.map((p) => h("li", {},
    h("span", { class: "mono", text: p.id || "" }), " ",
    h("strong", { text: `${p.source}${p.start_line ? `:${p.start_line}-${p.end_line}` : ""}` }),
    p.heading ? h("span", { class: "muted", text: ` ${p.heading}` }) : null,
    ` score ${fmtScore(p.score)}`,
    p.instructions ? badge("reads like instructions", "warn") : null,
    p.text ? h("div", { class: "passage-text", text: p.text }) : null)));
}

async function showRequest(out, runID, seq) {
  clear(out, h("span", { class: "muted", text: "loading…" }));
  try {
    const req = await api.request(runID, seq);
    clear(out, h("ol", { class: "request-messages" }, (req.messages || []).map(messageItem)));
  } catch (err) {
    clear(out, errorBox(err));
  }
}

// messageItem shows one model message: its role, text and tool calls.
export function messageItem(msg) {
  const calls = msg.tool_calls || [];
  let content = msg.content;
  if (content !== undefined && typeof content !== "string") content = JSON.stringify(content, null, 2);
  return h("li", { class: `msg msg-${msg.role}` },
    h("span", { class: "role", text: msg.role }),
    msg.tool_call_id ? h("span", { class: "muted mono", text: ` ${msg.tool_call_id}` }) : null,
    content ? h("div", { class: "msg-text", text: content }) : null,
    calls.map((c) => h("div", { class: "mono" }, `→ ${c.name}(${c.arguments || ""})`)));
}
