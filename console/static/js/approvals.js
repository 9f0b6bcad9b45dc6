// The approvals inbox: your paused runs (every user's for an approver) with the
// calls that wait (GET /v1/approvals); approve or reject each with a reason
// (POST /v1/runs/{id}/approvals/{call_id}); once the last is decided the run
// resumes, and its events are followed here until it finishes.

import { api, follow } from "./api.js";
import { h, $, clear, pretty, errorBox, formatTime, formatIn } from "./dom.js";
import { Timeline } from "./timeline.js";
import { on, emit, select } from "./state.js";

export function initApprovals() {
  const list = $("#approvals-list");
  const count = $("#approvals-count");
  const followed = new Map(); // run id → its card, while it is followed after a decision

  async function refresh() {
    let runs = [];
    try {
      ({ runs = [] } = await api.approvals());
    } catch (err) {
      clear(list, errorBox(err));
      return;
    }
    count.hidden = runs.length === 0;
    count.textContent = String(runs.length);
    const cards = runs.filter((r) => !followed.has(r.run_id)).map(card);
    clear(list, [...followed.values()], cards);
    if (!cards.length && !followed.size) list.append(h("p", { class: "muted", text: "Nothing waits for a decision." }));
  }

  function card(run) {
    const el = h("article", { class: "card approval-run", dataset: { run: run.run_id } },
      h("header", {}, h("strong", { text: run.agent }), " ", h("span", { class: "badge warn", text: run.status }),
        h("span", { class: "muted", text: ` ${run.user || ""} · since ${formatTime(run.created)}${run.expires ? ` · expires ${formatTime(run.expires)} (${formatIn(run.expires) || "now"})` : ""}` }),
        h("div", { class: "muted mono", text: `${run.run_id}${run.conversation ? " · " + run.conversation : ""}` })),
      run.input ? h("blockquote", { text: run.input }) : null);
    for (const a of run.approvals || []) el.append(call(run, a, el));
    return el;
  }

  function call(run, a, el) {
    const reason = h("input", { class: "reason", placeholder: "reason (the model reads it with a rejection)", size: 40 });
    const status = h("div", { class: "decision-status" });
    const decide = async (decision) => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      try {
        const body = { decision, reason: reason.value.trim() || undefined, args_hash: a.args_hash || undefined };
        const answer = await api.decide(run.run_id, a.call_id, body);
        status.textContent = `${decision === "approve" ? "approved" : "rejected"} — the run is ${answer.status}`;
        box.classList.add(decision === "approve" ? "approved" : "rejected");
        if (answer.status === "resumed") {
          followRun(run.run_id, el);
          emit("approvals"); // the chat's bubble of this run follows it too
        }
      } catch (err) {
        clear(status, errorBox(err));
        for (const b of box.querySelectorAll("button")) b.disabled = false;
      }
    };
    const decided = a.decision;
    const box = h("div", { class: "approval", dataset: { call: a.call_id } },
      h("div", {}, h("strong", { class: "mono", text: a.tool }), h("span", { class: "muted mono", text: ` ${a.call_id}` })),
      a.message ? h("p", { class: "approval-message", text: a.message }) : null,
      h("pre", { class: "arguments", text: pretty(a.arguments || "") }),
      decided
        ? h("div", { class: "muted", text: `${decided.approved ? "approved" : "rejected"} by ${decided.by}${decided.reason ? ": " + decided.reason : ""}` })
        : h("div", { class: "decide" }, reason,
          h("button", { type: "button", class: "approve", text: "approve", on: { click: () => decide("approve") } }),
          h("button", { type: "button", class: "reject danger", text: "reject", on: { click: () => decide("reject") } })),
      status);
    return box;
  }

  // followRun shows a resumed run's events in its card until it finishes.
  async function followRun(runID, el) {
    followed.set(runID, el);
    const outcome = h("div", { class: "outcome", text: "resumed, running…" });
    const badge = el.querySelector("header .badge");
    const mark = (text, tone) => { if (badge) { badge.textContent = text; badge.className = `badge ${tone}`; } };
    mark("resumed", "");
    const tl = h("div", { class: "timeline" });
    el.append(outcome, tl);
    const timeline = new Timeline(tl);
    timeline.reset(runID);
    select(runID, timeline.events);
    try {
      const data = await follow({ runID, onEvent: (m) => { timeline.add(m); emit("selected"); } });
      const r = data?.result || {};
      clear(outcome, h("span", { class: ["badge", r.stop === "completed" ? "good" : "warn"], text: r.stop || "?" }), " finished",
        r.answer ? h("div", { class: "answer", text: r.answer }) : null);
      el.dataset.finished = r.stop || "";
      mark(r.stop || "finished", r.stop === "completed" ? "good" : "warn");
    } catch (err) {
      clear(outcome, errorBox(err));
    } finally {
      emit("runs");
      refreshCount();
    }
  }

  async function refreshCount() {
    try {
      const { runs = [] } = await api.approvals();
      count.hidden = runs.length === 0;
      count.textContent = String(runs.length);
    } catch {
      // the banner tells what is wrong
    }
  }

  $("#approvals-refresh").addEventListener("click", () => { followed.clear(); refresh(); });
  on("view:approvals", refresh);
  on("approvals", refreshCount);
  on("identity", () => { followed.clear(); refreshCount(); });
  return { refreshCount };
}
