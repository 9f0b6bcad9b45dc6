// A small layered graph layout (in the manner of Sugiyama's): cycles broken by
// reversing the back edges a depth-first search finds, nodes put in layers by
// their longest path from a source, layers ordered by a few barycenter sweeps,
// then placed left to right. It is a pure function of its input, so the same
// graph is always drawn the same way.

// layered places nodes ([{id, w, h}]) and edges ([{from, to}]); it answers
// {pos: Map id → {x, y, w, h, layer}, width, height, back: Set of the indices of
// the edges drawn against the layers' direction}.
export function layered(nodes, edges, { colGap = 80, rowGap = 22, margin = 20 } = {}) {
  const ids = nodes.map((n) => n.id);
  const index = new Map(ids.map((id, i) => [id, i]));
  const usable = edges.map((e, i) => ({ ...e, i })).filter((e) => index.has(e.from) && index.has(e.to) && e.from !== e.to);
  const back = backEdges(ids, usable);
  const dag = usable.map((e) => (back.has(e.i) ? { from: e.to, to: e.from, i: e.i } : e));
  const layer = layers(ids, dag);
  const order = orderLayers(ids, dag, layer);
  return place(nodes, order, layer, back, { colGap, rowGap, margin });
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
