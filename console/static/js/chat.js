// The chat view: multi-turn chat with the picked agent in a conversation of the
// page's choosing (POST /v1/agents/{name}/runs with stream: true), the answer's
// text as it streams, and beside it the run's timeline, live.

import { startRun, follow } from "./api.js";
import { h, $, clear, errorBox } from "./dom.js";
import { Timeline } from "./timeline.js";
import { state, on, emit, select } from "./state.js";

export function newConversationID() {
  const bytes = new Uint8Array(6);
  crypto.getRandomValues(bytes);
  return "c-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function initChat() {
  const log = $("#chat-log");
  const form = $("#chat-form");
  const input = $("#chat-input");
  const send = $("#chat-send");
  const conv = $("#chat-conversation");
  const runLabel = $("#chat-run-id");
  const timeline = new Timeline($("#chat-timeline"));
  conv.value = sessionStorage.getItem("agentrun.conversation") || newConversationID();
  const remember = () => sessionStorage.setItem("agentrun.conversation", conv.value.trim());
  remember();
  conv.addEventListener("change", remember);

  $("#chat-new").addEventListener("click", () => {
    conv.value = newConversationID();
    remember();
    clear(log);
    timeline.reset("");
    runLabel.textContent = "";
    input.focus();
  });
  on("agent", () => clear(log));

  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  // Bubbles of runs paused for approval wait for a decision: they look again
  // when an approval is decided in this page, when the chat is shown again, and
  // every few seconds (a decision taken elsewhere).
  const waiting = new Set();
  const wake = () => { for (const w of [...waiting]) w(); };
  on("approvals", wake);
  on("view:chat", wake);

  // handler answers the onEvent of a run shown in bubble: the answer's text as
  // it streams, and the chat's timeline while it shows this run.
  function handler(bubble, answer, progress) {
    let afterCalls = false; // text after a response with calls starts the answer anew
    return (m) => {
      if (m.seq !== null) progress.last = m.seq;
      if (timeline.runID === bubble.dataset.run) timeline.add(m);
      const e = m.data || {};
      if (e.kind === "approval_decided" && !e.depth) progress.decided.push([e.tool, e.passed ? "approved" : "rejected"]);
      if (m.name === "model_response" && e.calls && !e.depth) afterCalls = true;
      if (m.name === "text" && !e.depth) {
        if (afterCalls || progress.fresh) {
          answer.textContent = "";
          afterCalls = progress.fresh = false;
        }
        answer.textContent += e.text || "";
      }
      if (m.name !== "result" && timeline.runID === bubble.dataset.run) emit("selected");
    };
  }

  // followResumed waits until the paused run of bubble is decided, then
  // follows its resumed execution (GET /v1/runs/{id}/events after the pause's
  // result) to its result — which may pause again.
  async function followResumed(bubble, answer, meta, progress) {
    const runID = bubble.dataset.run;
    while (bubble.isConnected && bubble.dataset.stop === "awaiting_approval") {
      await new Promise((resolve) => {
        const done = () => { waiting.delete(done); clearTimeout(timer); resolve(); };
        const timer = setTimeout(done, 5000);
        waiting.add(done);
      });
      if (!bubble.isConnected) return;
      try {
        const after = progress.last;
        progress.fresh = true;
        const show = handler(bubble, answer, progress);
        const data = await follow({ runID, after, onEvent: (m) => {
          if (progress.last === after) clear(meta, "resumed, running…");
          show(m);
        } });
        if (progress.last === after) continue; // still paused: nothing after its result (204)
        const note = bubble.querySelector(".pending");
        if (note) {
          clear(note, h("strong", { text: "Decided: " }),
            progress.decided.map(([tool, how], i) => [i ? ", " : "", h("span", { class: "mono", text: tool }), ` ${how}`]),
            progress.decided.length ? " — " : "", "the run resumed.");
          note.classList.replace("pending", "resumed");
        }
        progress.decided = [];
        showResult(bubble, answer, meta, data);
      } catch (err) {
        if (err.status === 404) return; // the run is no longer kept
        clear(meta, errorBox(err));
        return;
      } finally {
        emit("runs");
      }
    }
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || !state.agent) return;
    input.value = "";
    send.disabled = true;
    log.append(h("li", { class: "bubble user", text }));
    const answer = h("div", { class: "answer-text" });
    const meta = h("div", { class: "meta muted", text: "running…" });
    const bubble = h("li", { class: "bubble agent streaming" }, answer, meta);
    log.append(bubble);
    bubble.scrollIntoView({ block: "end" });
    timeline.reset("");
    const progress = { last: 0, fresh: false, decided: [] };
    try {
      const result = await startRun(state.agent, { input: text, conversation: conv.value.trim() || undefined }, {
        onStart: (runID) => {
          timeline.reset(runID);
          runLabel.textContent = runID || "";
          bubble.dataset.run = runID || "";
          select(runID, timeline.events);
        },
        onEvent: handler(bubble, answer, progress),
      });
      showResult(bubble, answer, meta, result);
      if (bubble.dataset.stop === "awaiting_approval") followResumed(bubble, answer, meta, progress);
    } catch (err) {
      bubble.classList.remove("streaming");
      clear(meta, errorBox(err));
    } finally {
      send.disabled = false;
      emit("selected");
      emit("runs");
    }
  });
}

// showResult puts the run's answer and stop reason in its bubble; a run paused
// for approval says which calls wait and links to the inbox.
function showResult(bubble, answer, meta, data) {
  bubble.classList.remove("streaming");
  const r = data?.result;
  if (!r) {
    clear(meta, errorBox(new Error(data?.error || "the run ended without a result")));
    return;
  }
  if (r.answer) answer.textContent = r.answer;
  bubble.dataset.stop = r.stop || "";
  clear(meta, h("span", { class: ["badge", r.stop === "completed" ? "good" : "warn"], text: r.stop || "" }),
    r.intent ? ` intent ${r.intent}` : "", r.turns ? ` · ${r.turns} turns` : "");
  if (r.stop === "awaiting_approval") {
    const pending = r.pending || [];
    bubble.append(h("div", { class: "pending" },
      h("strong", { text: "Waiting for approval: " }),
      pending.map((p, i) => [i ? ", " : "", h("span", { class: "mono", text: p.tool }), p.message ? ` (${p.message})` : ""]),
      " — ", h("a", { href: "#approvals", class: "inbox-link", text: "open the approvals inbox" })));
    emit("approvals");
  }
}
