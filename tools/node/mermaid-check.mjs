// Parses Mermaid files with Mermaid's own parser (the one its renderer uses), under
// jsdom, and prints {"file": {"ok": bool, "type"|"error": …}} as JSON.
//
//   node mermaid-check.mjs diagram.mmd...
import { JSDOM } from "jsdom";
import { readFileSync } from "node:fs";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

const out = {};
for (const file of process.argv.slice(2)) {
  try {
    const r = await mermaid.parse(readFileSync(file, "utf8"));
    out[file] = { ok: true, type: r.diagramType };
  } catch (e) {
    out[file] = { ok: false, error: String(e.message || e) };
  }
}
console.log(JSON.stringify(out));
