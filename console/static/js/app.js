// The console's entry point: it wires the header and the views, and shows the
// view the URL's fragment names (#chat, #runs, #graph, #approvals, #knowledge,
// #memory).

import { $, clear, h } from "./dom.js";
import { emit } from "./state.js";
import { initHeader } from "./status.js";
import { initChat } from "./chat.js";
import { initRuns } from "./runs.js";
import { initGraph } from "./graph.js";
import { initApprovals } from "./approvals.js";
import { initKnowledge } from "./knowledge.js";
import { initMemory } from "./memory.js";
import { messageItem } from "./timeline.js";

const views = ["chat", "runs", "graph", "approvals", "knowledge", "memory"];

function show() {
  const name = views.includes(location.hash.slice(1)) ? location.hash.slice(1) : "chat";
  for (const v of views) {
    $(`#view-${v}`).hidden = v !== name;
    $(`#tabs a[data-view="${v}"]`).classList.toggle("active", v === name);
  }
  document.body.dataset.view = name;
  emit(`view:${name}`);
}

const header = initHeader();
initChat();
initRuns();
initGraph();
initApprovals();
initKnowledge();
initMemory({
  continueConversation(id, messages) {
    $("#chat-conversation").value = id;
    sessionStorage.setItem("agentrun.conversation", id);
    const log = $("#chat-log");
    clear(log, messages.filter((m) => (m.role === "user" || m.role === "assistant") && m.content)
      .map((m) => h("li", { class: ["bubble", m.role === "user" ? "user" : "agent"] }, messageItem(m).querySelector(".msg-text"))));
    location.hash = "#chat";
  },
});
window.addEventListener("hashchange", show);
await header.start();
show();
document.body.dataset.ready = "true";
