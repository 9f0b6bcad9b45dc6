// A small layered graph layout (in the manner of Sugiyama's): cycles broken by
// reversing the back edges a depth-first search finds, nodes put in layers by
// their longest path from a source, layers ordered by a few barycenter sweeps,
// then placed left to right. A group whose members no edge joins (the tools,
// the domains) is kept to one layer, and a group's members are kept together
// in each layer, so the groups' boxes do not overlap. It is a pure function of
// its input, so the same graph is always drawn the same way.

// layered places nodes ([{id, w, h}]) and edges ([{from, to}]); it answers
// {pos: Map id → {x, y, w, h, layer, part}, width, height, back: Set of the indices of
// the edges drawn against the layers' direction}. The graph's parts — nodes
// joined by edges or by being in one of groups ([[id…]]) — are laid out each
// on its own and stacked, so a state machine does not mingle with the intents.
export function layered(nodes, edges, { groups = [], colGap = 80, rowGap = 22, margin = 20, partGap = 36 } = {}) {
  const parts = components(nodes, edges, groups);
  const pos = new Map();
  const back = new Set();
  let width = 0, y = 0;
  for (const [k, part] of parts.entries()) {
    const inPart = new Set(part.map((n) => n.id));
    const partEdges = edges.map((e, i) => ({ e, i })).filter(({ e }) => inPart.has(e.from) && inPart.has(e.to));
    const partGroups = groups.map((g) => g.filter((id) => inPart.has(id))).filter((g) => g.length);
    const l = layoutPart(part, partEdges.map(({ e }) => e), partGroups, { colGap, rowGap, margin });
    for (const [id, p] of l.pos) pos.set(id, { ...p, y: p.y + y, part: k });
    for (const j of l.back) back.add(partEdges[j].i);
    width = Math.max(width, l.width);
    y += l.height - margin + partGap;
  }
  return { pos, width, height: y - partGap + margin, back };
}

// components splits the nodes into the parts edges and groups join, in the
// order of their first node.
function components(nodes, edges, groups) {
  const parent = new Map(nodes.map((n) => [n.id, n.id]));
  const find = (x) => {
    while (parent.get(x) !== x) x = parent.get(x);
    return x;
  };
  const join = (a, b) => {
    if (parent.has(a) && parent.has(b)) parent.set(find(a), find(b));
  };
  for (const e of edges) join(e.from, e.to);
  for (const g of groups) for (let i = 1; i < g.length; i++) join(g[0], g[i]);
  const parts = new Map();
  for (const n of nodes) {
    const root = find(n.id);
    if (!parts.has(root)) parts.set(root, []);
    parts.get(root).push(n);
  }
  // Lone nodes share a part of their own, at the end.
  const lone = [], joined = [];
  for (const p of parts.values()) (p.length === 1 ? lone : joined).push(p);
  return lone.length ? [...joined, lone.flat()] : joined;
}

function layoutPart(nodes, edges, groups, { colGap, rowGap, margin }) {
  const ids = nodes.map((n) => n.id);
  const index = new Map(ids.map((id, i) => [id, i]));
  const usable = edges.map((e, i) => ({ ...e, i })).filter((e) => index.has(e.from) && index.has(e.to) && e.from !== e.to);
  const back = backEdges(ids, usable);
  const dag = usable.map((e) => (back.has(e.i) ? { from: e.to, to: e.from, i: e.i } : e));
  const layer = layers(ids, dag);
  alignFlatGroups(layer, groups, dag);
  const order = orderLayers(ids, dag, layer);
  keepGroupsTogether(order, groups);
  return place(nodes, order, layer, back, { colGap, rowGap, margin });
}

// alignFlatGroups moves the members of each group that no edge joins into one
// layer, the deepest of theirs, pushing what follows them further, then
// renumbers the layers without gaps. A few rounds at most: the edges always
// hold.
function alignFlatGroups(layer, groups, dag) {
  const flat = groups.filter((g) => g.length > 1 && !dag.some((e) => g.includes(e.from) && g.includes(e.to)));
  for (let round = 0; round < 8; round++) {
    let changed = false;
    for (const g of flat) {
      const deepest = Math.max(...g.map((id) => layer.get(id)));
      for (const id of g) if (layer.get(id) !== deepest) { layer.set(id, deepest); changed = true; }
    }
    for (let relaxed = true; relaxed;) {
      relaxed = false;
      for (const e of dag) {
        if (layer.get(e.to) <= layer.get(e.from)) { layer.set(e.to, layer.get(e.from) + 1); relaxed = changed = true; }
      }
    }
    if (!changed) break;
  }
  const used = [...new Set(layer.values())].sort((a, b) => a - b);
  const rank = new Map(used.map((l, i) => [l, i]));
  for (const [id, l] of layer) layer.set(id, rank.get(l));
}

// keepGroupsTogether reorders each layer so that a group's members are next
// to each other, where its first member was; the rest keep their order.
function keepGroupsTogether(order, groups) {
  const groupOf = new Map();
  groups.forEach((g, gi) => g.forEach((id) => { if (!groupOf.has(id)) groupOf.set(id, gi); }));
  for (const l of order) {
    const first = new Map();
    const keyOf = (id) => (groupOf.has(id) ? `g${groupOf.get(id)}` : `n${id}`);
    l.forEach((id, i) => { if (!first.has(keyOf(id))) first.set(keyOf(id), i); });
    l.sort((a, b) => first.get(keyOf(a)) - first.get(keyOf(b))); // stable: a group's members keep their order
  }
}

// backEdges are the edges a depth-first search, in the nodes' order, finds
// going back to a node on its stack.
function backEdges(ids, edges) {
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) out.get(e.from).push(e);
  const mark = new Map(); // 1: on the stack, 2: done
  const back = new Set();
  for (const root of ids) {
    if (mark.has(root)) continue;
    const stack = [{ id: root, next: 0 }];
    mark.set(root, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const outs = out.get(top.id);
      if (top.next >= outs.length) {
        mark.set(top.id, 2);
        stack.pop();
        continue;
      }
      const e = outs[top.next++];
      const m = mark.get(e.to);
      if (m === 1) back.add(e.i);
      else if (!m) {
        mark.set(e.to, 1);
        stack.push({ id: e.to, next: 0 });
      }
    }
  }
  return back;
}

// layers gives each node its longest path's length from a source of the DAG.
function layers(ids, dag) {
  const indeg = new Map(ids.map((id) => [id, 0]));
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of dag) {
    indeg.set(e.to, indeg.get(e.to) + 1);
    out.get(e.from).push(e.to);
  }
  const layer = new Map(ids.map((id) => [id, 0]));
  const queue = ids.filter((id) => indeg.get(id) === 0);
  while (queue.length) {
    const id = queue.shift();
    for (const to of out.get(id)) {
      layer.set(to, Math.max(layer.get(to), layer.get(id) + 1));
      indeg.set(to, indeg.get(to) - 1);
      if (indeg.get(to) === 0) queue.push(to);
    }
  }
  return layer;
}

// orderLayers orders each layer's nodes by the mean position of their
// neighbours in the layers before (sweeping down) and after (sweeping up).
function orderLayers(ids, dag, layer) {
  const count = Math.max(0, ...layer.values()) + 1;
  const order = Array.from({ length: count }, () => []);
  for (const id of ids) order[layer.get(id)].push(id);
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of dag) {
    preds.get(e.to).push(e.from);
    succs.get(e.from).push(e.to);
  }
  const position = new Map();
  const remember = () => order.forEach((l) => l.forEach((id, i) => position.set(id, i)));
  remember();
  const sweep = (l, neighbours) => {
    const key = new Map(order[l].map((id, i) => {
      const ns = neighbours.get(id);
      return [id, ns.length ? ns.reduce((sum, n) => sum + position.get(n), 0) / ns.length : i];
    }));
    order[l].sort((a, b) => key.get(a) - key.get(b)); // stable: ties keep their order
    order[l].forEach((id, i) => position.set(id, i));
  };
  for (let pass = 0; pass < 4; pass++) {
    for (let l = 1; l < count; l++) sweep(l, preds);
    for (let l = count - 2; l >= 0; l--) sweep(l, succs);
  }
  return order;
}

function place(nodes, order, layer, back, { colGap, rowGap, margin }) {
  const byID = new Map(nodes.map((n) => [n.id, n]));
  const colWidth = order.map((l) => Math.max(0, ...l.map((id) => byID.get(id).w)));
  const colHeight = order.map((l) => l.reduce((sum, id) => sum + byID.get(id).h, 0) + Math.max(0, l.length - 1) * rowGap);
  const height = Math.max(0, ...colHeight);
  const pos = new Map();
  let x = margin;
  order.forEach((l, li) => {
    let y = margin + (height - colHeight[li]) / 2;
    for (const id of l) {
      const n = byID.get(id);
      pos.set(id, { x: x + (colWidth[li] - n.w) / 2, y, w: n.w, h: n.h, layer: li });
      y += n.h + rowGap;
    }
    x += colWidth[li] + colGap;
  });
  return { pos, width: x - colGap + margin, height: height + 2 * margin, back };
}
