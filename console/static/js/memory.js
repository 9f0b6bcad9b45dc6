// Memory and conversations: the current user's long-term facts (GET and DELETE
// /v1/me/memory) and conversations (GET /v1/conversations, GET and DELETE
// /v1/conversations/{id}); a conversation can be continued in the chat.

import { api } from "./api.js";
import { h, $, clear, errorBox, formatTime } from "./dom.js";
import { messageItem } from "./timeline.js";
import { on } from "./state.js";

export function initMemory({ continueConversation }) {
  const facts = $("#memory-facts");
  const convs = $("#conversations-list");
  const detail = $("#conversation-detail");
  const forget = $("#memory-forget");

  async function refresh() {
    forget.textContent = "forget me";
    delete forget.dataset.armed;
    try {
      const m = await api.memory();
      const list = m.facts || [];
      clear(facts, h("p", {}, "user ", h("strong", { class: "mono", text: m.user })),
        list.length
          ? h("table", { class: "facts" }, h("thead", {}, h("tr", {}, ["key", "value", "source", "updated"].map((t) => h("th", { text: t })))),
            h("tbody", {}, list.map((f) => h("tr", {}, h("td", { class: "mono", text: f.key }), h("td", { text: f.value }),
              h("td", { text: f.source || "" }), h("td", { text: formatTime(f.updated) })))))
          : h("p", { class: "muted", text: "No facts." }));
    } catch (err) {
      clear(facts, errorBox(err));
    }
    try {
      const { conversations = [] } = await api.conversations();
      clear(convs, conversations.length
        ? conversations.map((id) => h("li", { class: "conversation-item", dataset: { conversation: id } },
          h("button", { type: "button", class: "link mono", text: id, on: { click: () => show(id) } })))
        : h("li", { class: "muted", text: "No conversations." }));
    } catch (err) {
      clear(convs, errorBox(err));
    }
  }

  async function show(id) {
    clear(detail, h("p", { class: "muted", text: "loading…" }));
    try {
      const c = await api.conversation(id);
      clear(detail, h("article", { class: "card conversation", dataset: { conversation: id } },
        h("header", {}, h("strong", { class: "mono", text: c.id }), ` · ${c.turns} turns `,
          h("button", { type: "button", text: "continue in chat", on: { click: () => continueConversation(c.id, c.messages || []) } }),
          h("button", { type: "button", class: "danger", text: "delete", on: { click: () => remove(c.id) } })),
        h("ol", { class: "request-messages" }, (c.messages || []).map(messageItem))));
    } catch (err) {
      clear(detail, errorBox(err));
    }
  }

  async function remove(id) {
    try {
      await api.deleteConversation(id);
      clear(detail, h("p", { class: "muted", text: `Deleted ${id}.` }));
      refresh();
    } catch (err) {
      detail.prepend(errorBox(err));
    }
  }

  // Forgetting is asked twice: the first click arms the button.
  forget.addEventListener("click", async () => {
    if (!forget.dataset.armed) {
      forget.dataset.armed = "1";
      forget.textContent = "really forget everything?";
      return;
    }
    try {
      await api.forget();
      clear(detail);
      await refresh();
    } catch (err) {
      facts.prepend(errorBox(err));
    }
  });
  $("#memory-refresh").addEventListener("click", refresh);
  on("view:memory", refresh);
  on("identity", () => { if (!$("#view-memory").hidden) refresh(); });
}
