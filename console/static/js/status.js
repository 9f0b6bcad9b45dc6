// The header: the status banner (GET /v1/status, polled every 2 seconds: the
// last load's diagnostics when a spec on disk is invalid), the agent picker
// (GET /v1/agents, fetched again when the specs were reloaded), and who the
// page is: in dev mode a user and context attributes, in serve mode a bearer
// token.

import { api, identity, setToken, setDevIdentity, ApiError } from "./api.js";
import { h, $, clear, formatTime } from "./dom.js";
import { state, emit } from "./state.js";

const pollEvery = 2000;

export function initHeader() {
  const banner = $("#status-banner");
  const picker = $("#agent-picker");
  const description = $("#agent-description");
  let loadedAt = null;

  picker.addEventListener("change", () => {
    state.agent = picker.value;
    sessionStorage.setItem("agentrun.agent", state.agent);
    describe();
    emit("agent");
  });

  function describe() {
    const a = state.agents.find((x) => x.name === state.agent);
    description.textContent = a?.description || "";
  }

  async function loadAgents() {
    try {
      const { agents = [] } = await api.agents();
      state.agents = agents;
      if (banner.dataset.problem) hideBanner();
    } catch (err) {
      showProblem(err);
      return;
    }
    const wanted = state.agent || sessionStorage.getItem("agentrun.agent");
    const previous = state.agent;
    state.agent = state.agents.some((a) => a.name === wanted) ? wanted : state.agents[0]?.name || "";
    clear(picker, state.agents.map((a) => h("option", { value: a.name, text: a.name })));
    picker.value = state.agent;
    describe();
    emit("agents");
    if (previous !== state.agent) emit("agent");
  }

  function hideBanner() {
    banner.hidden = true;
    delete banner.dataset.problem;
    clear(banner);
  }

  // showProblem tells that the server could not be asked (not signed in, not
  // answering), which the next good answer clears.
  function showProblem(err) {
    banner.hidden = false;
    banner.dataset.problem = "1";
    banner.className = "banner bad";
    const unauthorized = err instanceof ApiError && err.status === 401;
    clear(banner, h("strong", { text: unauthorized ? "Not signed in: " : "The server did not answer: " }),
      unauthorized ? "give a bearer token." : err.message);
    if (unauthorized && identity.mode !== "dev") setMode("serve");
  }

  function showStatus(st) {
    if (st.ok) {
      hideBanner();
      return;
    }
    banner.hidden = false;
    delete banner.dataset.problem;
    banner.className = "banner bad";
    clear(banner,
      h("div", {}, h("strong", { text: `The specs on disk did not load${st.checked_at ? ` (${formatTime(st.checked_at)})` : ""}; ` +
        `the agents served are the ones loaded before${st.loaded_at ? `, at ${formatTime(st.loaded_at)}` : ""}. ` }),
      st.diagnostics?.length ? "" : st.error || ""), // the diagnostics say more than the error's summary
      h("ol", { class: "diagnostics" }, (st.diagnostics || []).map(diagnostic)));
  }

  async function poll() {
    let st;
    try {
      st = await api.status();
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) { // a server without the endpoint
        if (banner.dataset.problem) hideBanner();
        return;
      }
      showProblem(err);
      return;
    }
    state.status = st;
    setMode(st.mode === "dev" ? "dev" : "serve");
    showStatus(st);
    if (loadedAt !== null && st.loaded_at !== loadedAt) await loadAgents();
    loadedAt = st.loaded_at;
  }

  async function tick() {
    await poll();
    setTimeout(tick, pollEvery);
  }

  initIdentity(() => { loadAgents(); poll(); emit("identity"); });
  return { start: async () => { await poll(); await loadAgents(); setTimeout(tick, pollEvery); } };
}

// diagnostic shows one problem as validate prints it: where, what, the hint,
// and the source line with a caret under the span.
function diagnostic(d) {
  const where = `${d.file || ""}:${d.line || 0}:${d.col || 0}`;
  const caret = d.source && d.col ? " ".repeat(Math.max(0, d.col - 1)) + "^".repeat(Math.max(1, (d.end_line === d.line && d.end_col > d.col ? d.end_col - d.col : 1))) : "";
  return h("li", { class: ["diagnostic", d.severity] },
    h("div", {}, h("span", { class: "mono where", text: where }), " ", h("span", { class: "badge bad", text: d.severity || "error" }),
      d.path ? h("span", { class: "mono muted", text: ` ${d.path}` }) : null, " ", h("span", { class: "message", text: d.message })),
    d.source ? h("pre", { class: "source", text: `${String(d.line).padStart(4)} | ${d.source}\n     | ${caret}` }) : null,
    d.hint ? h("div", { class: "hint", text: `hint: ${d.hint}` }) : null);
}

function setMode(mode) {
  if (identity.mode === mode) return;
  identity.mode = mode;
  $("#dev-identity").hidden = mode !== "dev";
  $("#serve-identity").hidden = mode !== "serve";
  document.body.dataset.mode = mode;
}

// initIdentity wires the user and attribute fields (dev) and the token field
// (serve); a change is told with changed().
function initIdentity(changed) {
  const user = $("#dev-user");
  const roles = $("#dev-roles");
  roles.value = identity.roles;
  roles.addEventListener("change", () => save());
  const rows = $("#dev-attributes");
  const token = $("#serve-token");
  user.value = identity.user;
  token.value = identity.token;
  const save = () => {
    const attributes = {};
    for (const row of rows.querySelectorAll(".attribute")) {
      const [k, v] = row.querySelectorAll("input");
      if (k.value.trim()) attributes[k.value.trim()] = v.value;
    }
    setDevIdentity(user.value, attributes, roles.value);
    changed();
  };
  const addRow = (k = "", v = "") => {
    const row = h("div", { class: "attribute" },
      h("input", { class: "attr-key", placeholder: "key", size: 6, value: k, on: { change: save } }), "=",
      h("input", { class: "attr-value", placeholder: "value", size: 8, value: v, on: { change: save } }),
      h("button", { type: "button", class: "small", title: "remove", text: "×", on: { click: () => { row.remove(); save(); } } }));
    rows.append(row);
    return row;
  };
  for (const [k, v] of Object.entries(identity.attributes)) addRow(k, v);
  user.addEventListener("change", save);
  $("#dev-add-attribute").addEventListener("click", () => addRow().querySelector("input").focus());
  $("#dev-identity").addEventListener("submit", (ev) => { ev.preventDefault(); save(); });
  $("#serve-identity").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken(token.value);
    changed();
  });
}
