// The runs view: your runs, newest first (GET /v1/runs), and the picked one's
// timeline, replayed from its first event by GET /v1/runs/{id}/events — and
// followed live when it is still running.

import { api, follow } from "./api.js";
import { h, $, clear, errorBox, formatTime } from "./dom.js";
import { Timeline } from "./timeline.js";
import { on, emit, select } from "./state.js";

export function initRuns() {
  const list = $("#runs-list");
  const label = $("#runs-run-id");
  const timeline = new Timeline($("#runs-timeline"));
  let following = null;

  async function refresh() {
    try {
      const { runs = [] } = await api.runs();
      clear(list, runs.length ? runs.map(item) : h("li", { class: "muted", text: "No runs yet." }));
    } catch (err) {
      clear(list, errorBox(err));
    }
  }

  function item(r) {
    const stop = r.stop || (r.status === "running" ? "running" : r.status);
    return h("li", { class: "run-item", dataset: { run: r.id }, on: { click: () => open(r.id) } },
      h("div", {}, h("strong", { text: r.agent }), " ",
        h("span", { class: ["badge", stop === "completed" ? "good" : stop === "running" ? "" : "warn"], text: stop || "" }),
        h("span", { class: "muted", text: ` ${formatTime(r.created)}` })),
      h("div", { class: "run-input", text: r.input || "" }),
      h("div", { class: "muted mono", text: `${r.id}${r.conversation ? " · " + r.conversation : ""}` }));
  }

  async function open(id) {
    following?.abort();
    following = new AbortController();
    for (const li of list.children) li.classList.toggle("selected", li.dataset.run === id);
    timeline.reset(id);
    label.textContent = id;
    select(id, timeline.events);
    try {
      await follow({ runID: id, signal: following.signal, onEvent: (m) => { timeline.add(m); emit("selected"); } });
    } catch (err) {
      if (err.name !== "AbortError") timeline.root.append(errorBox(err));
    }
  }

  $("#runs-refresh").addEventListener("click", refresh);
  on("view:runs", refresh);
  on("runs", () => { if (!$("#view-runs").hidden) refresh(); });
  return { open };
}
