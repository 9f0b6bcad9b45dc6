// The graph view: the agent's intents, tools, domains, sub-agents and state
// machine (GET /v1/agents/{name}/graph), drawn as SVG with layout.js, and the
// path of the selected run highlighted: the intent it chose, the tools it
// called and the state transitions it took.

import { api } from "./api.js";
import { h, s, $, clear, errorBox } from "./dom.js";
import { layered } from "./layout.js";
import { state, on } from "./state.js";

const nodeHeight = 30;

// textWidth estimates a label's width: wide (CJK) characters count double.
function textWidth(label) {
  let n = 0;
  for (const ch of label) n += ch.codePointAt(0) > 0x2e80 ? 2 : 1;
  return n * 7.2;
}

// pathOf is what a run's events say it went through: node ids and taken
// transitions ("from|to|trigger").
export function pathOf(events) {
  const nodes = new Set();
  const moves = new Set();
  for (const e of events || []) {
    switch (e.kind) {
      case "intent":
        if (e.intent) nodes.add(`intent:${e.intent}`);
        break;
      case "tool_call":
        if (e.tool) nodes.add(`tool:${e.tool}`);
        break;
      case "agent":
        if (e.agent) nodes.add(`agent:${e.agent}`);
        break;
      case "state":
        if (e.state) nodes.add(`state:${e.state}`);
        if (e.from) {
          nodes.add(`state:${e.from}`);
          moves.add(`state:${e.from}|state:${e.state}|${e.trigger || ""}`);
        }
        break;
    }
  }
  return { nodes, moves };
}

export function initGraph() {
  const canvas = $("#graph-canvas");
  const detail = $("#graph-detail");
  const pathLabel = $("#graph-path");
  let graph = null;
  let loadedFor = "";
  let drawn = null;

  async function load(force) {
    if (!state.agent || (!force && loadedFor === state.agent && graph)) return highlight();
    loadedFor = state.agent;
    try {
      graph = await api.graph(state.agent);
      drawn = draw(canvas, graph, (n) => clear(detail, h("strong", { text: n.label || n.id }), ` (${n.kind}) `, n.detail || ""));
      highlight();
    } catch (err) {
      graph = null;
      clear(canvas, errorBox(err));
    }
  }

  function highlight() {
    if (!drawn) return;
    const { nodes, moves } = pathOf(state.selected.events);
    for (const [id, el] of drawn.nodes) el.classList.toggle("on-path", nodes.has(id));
    for (const { e, el } of drawn.edges) {
      const triggers = e.kind === "transition" ? e.triggers.filter((t) => moves.has(`${e.from}|${e.to}|${t}`)) : [];
      const taken = e.kind === "transition" ? triggers.length > 0 : nodes.has(e.from) && nodes.has(e.to);
      el.classList.toggle("on-path", taken);
      el.querySelector("path").setAttribute("marker-end", taken ? "url(#arrow-on-path)" : "url(#arrow)");
      const label = el.querySelector("text");
      if (label) label.textContent = triggers.length && e.triggers.length > 1 ? triggers.join(", ") : e.label;
      if (taken) el.parentNode.insertBefore(el, drawn.firstNode); // over the edges not taken
    }
    const picked = [...nodes].filter((id) => drawn.nodes.has(id));
    pathLabel.textContent = state.selected.runID
      ? `path of ${state.selected.runID}: ${picked.length} nodes, ${moves.size} transitions` : "pick or start a run to see its path";
  }

  on("view:graph", () => load(false));
  on("agent", () => { graph = null; drawn = null; if (!$("#view-graph").hidden) load(true); });
  on("agents", () => { graph = null; drawn = null; if (!$("#view-graph").hidden) load(true); });
  on("selected", () => { if (!$("#view-graph").hidden) highlight(); });
}

// draw renders the graph into canvas; it answers the elements of its nodes
// and edges, to highlight.
function draw(canvas, graph, onPick) {
  const nodes = (graph.nodes || []).map((n) => ({ ...n, w: Math.max(60, textWidth(n.label || n.id) + 24), h: nodeHeight }));
  const edges = bundle(graph.edges || []);
  const layout = layered(nodes, edges, { groups: (graph.groups || []).map((g) => g.nodes || []), colGap: 110 });
  const svg = s("svg", { class: "graph-svg", role: "img", "aria-label": `graph of ${graph.agent}` },
    s("defs", {}, arrow("arrow", "arrowhead"), arrow("arrow-on-path", "arrowhead on-path")));
  let width = layout.width, height = layout.height;
  const byID = new Map(nodes.map((n) => [n.id, n]));
  for (const g of graph.groups || []) {
    const members = (g.nodes || []).map((id) => layout.pos.get(id)).filter(Boolean);
    if (!members.length) continue;
    const x0 = Math.min(...members.map((p) => p.x)) - 8, y0 = Math.min(...members.map((p) => p.y)) - 20;
    const x1 = Math.max(...members.map((p) => p.x + p.w)) + 8, y1 = Math.max(...members.map((p) => p.y + p.h)) + 8;
    svg.append(s("g", { class: "group", dataset: { group: g.id } },
      s("rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8 }),
      s("text", { x: x0 + 6, y: y0 + 13, text: g.label || g.id })));
  }
  const drawnEdges = [];
  const labels = new Labels([...layout.pos.values()]);
  const cols = columns(layout.pos);
  edges.forEach((e, i) => {
    const a = layout.pos.get(e.from), b = layout.pos.get(e.to);
    if (!a || !b) return;
    const { d, lx, ly, dip, bottom } = edgePath(a, b, e.from === e.to, layout.back.has(i), cols);
    height = Math.max(height, bottom + 8);
    let text = null;
    if (e.label) {
      // Room for the widest label it may show: its own, or one trigger of a path.
      const w = Math.max(textWidth(e.label), ...e.triggers.map(textWidth)) * 0.85 + 6;
      const at = labels.place(lx, ly, w, dip);
      text = s("text", { x: at.x, y: at.y, "text-anchor": "middle", text: e.label });
      width = Math.max(width, at.x + w / 2 + 4);
      height = Math.max(height, at.y + 6);
    }
    const el = s("g", { class: ["edge", `edge-${e.kind || "link"}`], dataset: { from: e.from, to: e.to } },
      e.triggers.length > 1 ? s("title", { text: `${e.from} → ${e.to}: ${e.triggers.join(", ")}` }) : null,
      s("path", { d, "marker-end": "url(#arrow)" }), text);
    drawnEdges.push({ e, el });
    svg.append(el);
  });
  svg.setAttribute("width", Math.ceil(width));
  svg.setAttribute("height", Math.ceil(height));
  svg.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`);
  const drawnNodes = new Map();
  for (const n of nodes) {
    const p = layout.pos.get(n.id);
    const el = s("g", { class: ["node", `node-${n.kind}`], dataset: { id: n.id }, tabindex: 0, on: { click: () => onPick(byID.get(n.id)) } },
      s("title", { text: n.detail ? `${n.label}: ${n.detail}` : n.label || n.id }),
      s("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: n.kind === "state" ? 15 : 4 }),
      s("text", { x: p.x + p.w / 2, y: p.y + p.h / 2 + 4, "text-anchor": "middle", text: n.label || n.id }));
    drawnNodes.set(n.id, el);
    svg.append(el);
  }
  clear(canvas, svg);
  return { nodes: drawnNodes, edges: drawnEdges, firstNode: drawnNodes.values().next().value || null };
}

// bundle draws a state machine's transitions between the same two states as
// one edge: its label is its trigger, or, for many, how many there are (each
// is listed in its title, and a path's shows on it).
function bundle(edges) {
  const out = [];
  const byPair = new Map();
  for (const e of edges) {
    if (e.kind !== "transition") {
      out.push({ ...e, triggers: [] });
      continue;
    }
    const pair = `${e.from}|${e.to}`;
    let b = byPair.get(pair);
    if (!b) {
      b = { ...e, triggers: [] };
      byPair.set(pair, b);
      out.push(b);
    }
    b.triggers.push(e.label || "");
  }
  for (const b of byPair.values()) {
    const named = b.triggers.filter(Boolean);
    b.label = named.length > 2 ? `${named.length} triggers` : named.join(", ");
  }
  return out;
}

// Labels places edge labels where they overlap no node and no label placed
// before: at their edge's middle, else a little above or below it.
class Labels {
  constructor(nodes) {
    this.boxes = nodes.map((p) => ({ x0: p.x - 2, y0: p.y - 2, x1: p.x + p.w + 2, y1: p.y + p.h + 2 }));
  }

  place(x, y, w, dip) {
    const box = ([dx, dy]) => ({ x0: x + dx - w / 2, y0: y + dy - 11, x1: x + dx + w / 2, y1: y + dy + 3 });
    const free = (b) => !this.boxes.some((o) => b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1);
    // A label of an edge looping below its nodes goes further down, not up;
    // failing that, a little to a side.
    const dys = dip ? [0, 13, 26, 39, 52] : [0, -12, 12, -24, 24, -36, 36];
    const tries = [0, -w / 3, w / 3].flatMap((dx) => dys.map((dy) => [dx, dy]));
    const at = tries.find((t) => free(box(t))) ?? [0, 0];
    this.boxes.push(box(at));
    return { x: x + at[0], y: y + at[1] };
  }
}

function arrow(id, cls) {
  return s("marker", { id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: cls }));
}

// edgePath is a curve from a's right to b's left; an edge going back (to its
// own layer or an earlier one) loops below both nodes.
// columns are the nodes of each part's layers, top to bottom: where a long
// edge finds its way through.
function columns(pos) {
  const cols = new Map();
  for (const p of pos.values()) {
    const k = `${p.part}:${p.layer}`;
    if (!cols.has(k)) cols.set(k, []);
    cols.get(k).push(p);
  }
  for (const c of cols.values()) c.sort((p, q) => p.y - q.y);
  return cols;
}

// lane is where an edge crosses column c nearest to y: between two of its
// nodes, or above or below them all.
function lane(c, y) {
  const gaps = [c[0].y - 12, c[c.length - 1].y + c[c.length - 1].h + 12];
  for (let i = 1; i < c.length; i++) gaps.push((c[i - 1].y + c[i - 1].h + c[i].y) / 2);
  return gaps.reduce((best, g) => (Math.abs(g - y) < Math.abs(best - y) ? g : best));
}

// edgePath is a curve from a's right to b's left, crossing the layers between
// them in the gaps between their nodes; an edge going back (to its own layer
// or an earlier one) loops below both nodes.
function edgePath(a, b, self, back, cols) {
  if (self) {
    const x = a.x + a.w, y = a.y + a.h / 2;
    return { d: `M ${x} ${y - 6} C ${x + 40} ${y - 30}, ${x + 40} ${y + 30}, ${x} ${y + 6}`, lx: x + 34, ly: y - 16, bottom: y + 30 };
  }
  if (back || b.layer <= a.layer) {
    const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y + b.h;
    const dip = Math.max(y1, y2) + 30 + Math.abs(x1 - x2) * 0.08;
    return { d: `M ${x1} ${y1} C ${x1} ${dip}, ${x2} ${dip}, ${x2} ${y2}`, lx: (x1 + x2) / 2, ly: dip - 4, dip: true, bottom: dip };
  }
  const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
  const pts = [[x1, y1]];
  for (let l = a.layer + 1; l < b.layer; l++) {
    const c = cols.get(`${a.part}:${l}`);
    if (!c) continue;
    const y = lane(c, y1 + ((y2 - y1) * (l - a.layer)) / (b.layer - a.layer));
    pts.push([Math.min(...c.map((p) => p.x)), y], [Math.max(...c.map((p) => p.x + p.w)), y]);
  }
  pts.push([x2, y2]);
  let d = `M ${x1} ${y1}`;
  for (let i = 1; i < pts.length; i++) {
    const [px, py] = pts[i - 1], [x, y] = pts[i];
    const mx = (px + x) / 2;
    d += i % 2 === 0 && i < pts.length - 1 ? ` L ${x} ${y}` : ` C ${mx} ${py}, ${mx} ${y}, ${x} ${y}`;
  }
  // The label: midway along the last stretch, between two layers' columns.
  const [px, py] = pts[pts.length - 2];
  const [lx, ly] = [(px + x2) / 2, (py + y2) / 2 - 4];
  return { d, lx, ly, bottom: Math.max(...pts.map(([, y]) => y)) };
}
