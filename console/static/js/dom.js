// Small DOM helpers. Every piece of text — the user's, the model's, a tool's —
// goes in as a text node (textContent): nothing the server sends is ever parsed
// as HTML.

const svgNS = "http://www.w3.org/2000/svg";

// h builds an element: h("div", {class: "row", on: {click: f}}, "text", child, …).
// attrs: class, text (its textContent), on (event listeners), css (properties set
// on element.style, which the content policy allows), dataset, and any other
// attribute, set with setAttribute. Children are nodes, strings (text nodes),
// arrays of them, or null/undefined/false (skipped).
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// s builds an SVG element, as h does.
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(svgNS, tag), attrs, children);
}

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    switch (k) {
      case "class":
        el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
        break;
      case "text":
        el.textContent = String(v);
        break;
      case "on":
        for (const [name, fn] of Object.entries(v)) el.addEventListener(name, fn);
        break;
      case "css":
        Object.assign(el.style, v);
        break;
      case "dataset":
        Object.assign(el.dataset, v);
        break;
      case "style":
        throw new Error("set styles with css: the content policy refuses style attributes");
      default:
        el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// clear empties an element and fills it with children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

// pretty shows a JSON string indented, or the string itself when it is not JSON.
export function pretty(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// kv is a definition list of the pairs whose value is set.
export function kv(pairs) {
  const dl = h("dl", { class: "kv" });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(h("dt", { text: k }), h("dd", {}, v instanceof Node ? v : String(v)));
  }
  return dl;
}

// errorBox shows an API error (or any error) as a message.
export function errorBox(err) {
  const code = err && err.code ? `${err.code}: ` : "";
  return h("div", { class: "error", role: "alert", text: code + (err && err.message ? err.message : String(err)) });
}

export function formatDuration(ns) {
  if (ns === undefined || ns === null) return "";
  const ms = ns / 1e6;
  if (ms < 1) return `${Math.round(ns / 1e3)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function formatCost(c) {
  if (c === undefined || c === null) return "";
  return `$${c < 0.01 ? c.toPrecision(2) : c.toFixed(4)}`;
}

export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  // The time alone today; on another day, the date too.
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
}

// formatIn says how far off a time ahead is: "in 24 h", "in 5 min".
export function formatIn(iso) {
  const ms = Date.parse(iso) - Date.now();
  if (Number.isNaN(ms) || ms < 0) return "";
  if (ms >= 3600e3) return `in ${Math.round(ms / 3600e3)} h`;
  return `in ${Math.max(1, Math.round(ms / 60e3))} min`;
}
