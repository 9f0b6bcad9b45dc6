// The console's client of the serve API (docs/serve.md). Every request goes to
// this page's own origin with fetch — streams too, so that the credentials go in
// headers: in serve mode the bearer token (kept in sessionStorage, for this tab
// only), in dev mode the user and context attributes the page chose.

const tokenKey = "agentrun.token";
const devKey = "agentrun.dev";

export const identity = {
  mode: "unknown", // "dev" or "serve", from GET /v1/status
  token: sessionStorage.getItem(tokenKey) || "",
  user: "",
  attributes: {}, // context attributes, in dev mode
  roles: "", // roles, comma-separated (approver), in dev mode
};

try {
  const dev = JSON.parse(sessionStorage.getItem(devKey) || "{}");
  identity.user = dev.user || "";
  identity.attributes = dev.attributes || {};
  identity.roles = dev.roles || "";
} catch {
  // a broken entry is as none
}

export function setToken(token) {
  identity.token = token.trim();
  if (identity.token) sessionStorage.setItem(tokenKey, identity.token);
  else sessionStorage.removeItem(tokenKey);
}

export function setDevIdentity(user, attributes, roles) {
  identity.user = user.trim();
  identity.attributes = attributes;
  identity.roles = roles.trim();
  sessionStorage.setItem(devKey, JSON.stringify({ user: identity.user, attributes, roles: identity.roles }));
}

// ApiError is an answer other than 2xx: its status and the API's error code.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  if (identity.token) h.Authorization = `Bearer ${identity.token}`;
  if (identity.mode === "dev") {
    if (identity.user) h["X-Agentrun-User"] = identity.user;
    if (Object.keys(identity.attributes).length) h["X-Agentrun-Attributes"] = asciiJSON(identity.attributes);
    if (identity.roles) h["X-Agentrun-Roles"] = identity.roles;
  }
  return h;
}

// asciiJSON is JSON with every character beyond ASCII escaped (\uXXXX): a
// header's value must be Latin-1, and an attribute such as city: 上海 is not.
export function asciiJSON(v) {
  return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

async function failure(res) {
  let code = "", message = "";
  try {
    const body = await res.json();
    code = body.error?.code;
    message = body.error?.message;
  } catch {
    // not JSON
  }
  return new ApiError(res.status, code, message || `${res.status} ${res.statusText}`);
}

// call sends one request and answers its JSON (null for 204).
export async function call(method, path, body, signal) {
  const init = { method, headers: headers(), signal, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  return res.json();
}

const enc = encodeURIComponent;

export const api = {
  status: () => call("GET", "/v1/status"),
  agents: () => call("GET", "/v1/agents"),
  graph: (agent) => call("GET", `/v1/agents/${enc(agent)}/graph`),
  probe: (agent, body) => call("POST", `/v1/agents/${enc(agent)}/knowledge/probe`, body),
  runs: (query = {}) => call("GET", "/v1/runs" + queryString(query)),
  run: (id) => call("GET", `/v1/runs/${enc(id)}`),
  request: (id, seq) => call("GET", `/v1/runs/${enc(id)}/requests/${enc(seq)}`),
  approvals: () => call("GET", "/v1/approvals"),
  decide: (id, callID, body) => call("POST", `/v1/runs/${enc(id)}/approvals/${enc(callID)}`, body),
  conversations: () => call("GET", "/v1/conversations"),
  conversation: (id) => call("GET", `/v1/conversations/${enc(id)}`),
  deleteConversation: (id) => call("DELETE", `/v1/conversations/${enc(id)}`),
  memory: () => call("GET", "/v1/me/memory"),
  forget: () => call("DELETE", "/v1/me/memory"),
};

function queryString(query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

// readEvents parses a text/event-stream body, calling onMessage({seq, name,
// data}) for each event (data parsed as JSON), and returns the last event's id.
export async function readEvents(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let ev = { id: null, name: "message", data: [] };
  let last = null;
  const line = (l) => {
    if (l.endsWith("\r")) l = l.slice(0, -1);
    if (l === "") {
      if (ev.data.length) {
        if (ev.id !== null) last = ev.id;
        let data = ev.data.join("\n");
        try {
          data = JSON.parse(data);
        } catch {
          // left as text
        }
        onMessage({ seq: ev.id === null ? null : Number(ev.id), name: ev.name, data });
      }
      ev = { id: null, name: "message", data: [] };
      return;
    }
    if (l.startsWith(":")) return; // a comment: the heartbeat
    const colon = l.indexOf(":");
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? "" : l.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") ev.id = value;
    else if (field === "event") ev.name = value;
    else if (field === "data") ev.data.push(value);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      line(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
  return last;
}

// follow reads a run's events until its stream ends with the run's result:
// from the response of the POST that started it, or from GET
// /v1/runs/{id}/events after the event `after`. A stream cut short is resumed
// with Last-Event-ID, a few times. It returns the last result's data.
export async function follow({ runID, response, after = 0, onEvent, signal }) {
  let last = after;
  let result = null;
  let endedWithResult = false;
  const seen = (m) => {
    if (m.seq !== null) last = m.seq;
    endedWithResult = m.name === "result";
    if (endedWithResult) result = m.data;
    onEvent?.(m);
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    let res = response;
    response = null;
    try {
      if (!res) {
        const h = headers({ Accept: "text/event-stream" });
        if (last) h["Last-Event-ID"] = String(last);
        res = await fetch(`/v1/runs/${enc(runID)}/events`, { headers: h, signal, cache: "no-store" });
        if (res.status === 204) return result;
        if (!res.ok) throw await failure(res);
      }
      await readEvents(res.body, seen);
      if (endedWithResult) return result;
    } catch (err) {
      if (signal?.aborted || err instanceof ApiError) throw err;
      await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
    }
  }
  throw new Error("the run's stream kept breaking off");
}

// startRun starts a streamed run of agent and follows it, as follow does. It
// calls onStart(runID) as soon as the response names the run.
export async function startRun(agent, body, { onStart, onEvent, signal } = {}) {
  const res = await fetch(`/v1/agents/${enc(agent)}/runs`, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!res.ok) throw await failure(res);
  const runID = res.headers.get("X-Agentrun-Run");
  onStart?.(runID);
  return follow({ runID, response: res, onEvent, signal });
}
