// The knowledge probe: a question as the current user would ask it (POST
// /v1/agents/{name}/knowledge/probe) — whether the FAQ cache would answer it
// (the closest entry, its score against the threshold, the gate that refused
// it) and which passages retrieval would put into the prompt. Nothing runs.

import { api } from "./api.js";
import { h, $, clear, kv, errorBox } from "./dom.js";
import { passageList, fmtScore } from "./timeline.js";
import { state, on, currentAgent } from "./state.js";

// routedBy says what a probe's routed_by means (docs/serve.md).
const routedBy = {
  pre: "pre — the intent picked here",
  rules: "rules",
  fallback: "fallback — no rule matched",
  knowledge: "knowledge — the classifier would decide; the one intent with knowledge",
};

export function initKnowledge() {
  const form = $("#probe-form");
  const question = $("#probe-question");
  const intent = $("#probe-intent");
  const out = $("#probe-result");

  const fillIntents = () => {
    const a = currentAgent();
    clear(intent, h("option", { value: "", text: "(routed)" }),
      (a?.intents || []).map((i) => h("option", { value: i.name, text: i.name })));
  };
  on("agents", fillIntents);
  on("agent", () => { fillIntents(); clear(out); });

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const q = question.value.trim();
    if (!q || !state.agent) return;
    clear(out, h("p", { class: "muted", text: "probing…" }));
    try {
      const res = await api.probe(state.agent, { question: q, intent: intent.value || undefined });
      clear(out, render(res));
    } catch (err) {
      clear(out, errorBox(err));
    }
  });
}

function render(res) {
  const c = res.cache;
  const r = res.retrieval;
  return h("div", { class: "probe" },
    kv([["intent", res.intent], ["routed by", routedBy[res.routed_by] || res.routed_by]]),
    h("article", { class: "card probe-cache" }, h("h3", { text: "FAQ cache" }), c ? cacheDecision(c) : h("p", { class: "muted", text: "This intent has no cache." })),
    h("article", { class: "card probe-retrieval" }, h("h3", { text: "Retrieval" }),
      r ? [h("p", {}, "collection ", h("strong", { text: r.collection }), ` · ${(r.passages || []).length} passages`), passageList(r.passages || [])]
        : h("p", { class: "muted", text: "This intent retrieves no passages." })));
}

function cacheDecision(c) {
  const closest = c.closest;
  const verdict = closest?.verdict;
  return [
    h("p", { class: "cache-answer" }, c.answers
      ? h("span", { class: "badge good", text: "would answer from the cache" })
      : h("span", { class: "badge warn", text: "would not answer from the cache" }),
    c.verify ? " (the judge would check the hit first)" : ""),
    closest
      ? kv([["entry", `${closest.entry} (${closest.kind}${closest.per_user ? ", yours" : ""})`], ["question", closest.question],
        ["score", `${fmtScore(closest.score)} against threshold ${fmtScore(c.threshold)}`],
        ["refused", c.refused], ["gate", verdict && !verdict.passed ? `${verdict.gate}${verdict.words?.length ? ": " + verdict.words.join(", ") : ""}` : ""],
        ["coverage", verdict ? fmtScore(verdict.coverage) : ""]])
      : h("p", { class: "muted", text: "The cache has no entries." }),
    c.error ? h("div", { class: "error", text: c.error }) : null,
  ];
}
