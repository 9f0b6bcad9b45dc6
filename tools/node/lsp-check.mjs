// Opens YAML files in yaml-language-server (over stdio, as an editor would) and prints
// the diagnostics it publishes for each, as JSON: {"file": [{line, col, message}]}.
// Each file names its schema with a `# yaml-language-server: $schema=` modeline.
//
//   node lsp-check.mjs path/to/yaml-language-server file.yaml...
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [server, ...files] = process.argv.slice(2);
const child = spawn(process.execPath, [server, "--stdio"], { stdio: ["pipe", "pipe", "inherit"] });

let nextId = 1;
const pending = new Map();
const waiting = new Map(); // uri -> resolve(diagnostics)
const send = (msg) => {
  const body = JSON.stringify({ jsonrpc: "2.0", ...msg });
  child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
};
const request = (method, params) =>
  new Promise((res) => {
    const id = nextId++;
    pending.set(id, res);
    send({ id, method, params });
  });

let buf = Buffer.alloc(0);
child.stdout.on("data", (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  for (;;) {
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const len = Number(/Content-Length: (\d+)/i.exec(buf.slice(0, end).toString())[1]);
    if (buf.length < end + 4 + len) return;
    const msg = JSON.parse(buf.slice(end + 4, end + 4 + len).toString());
    buf = buf.slice(end + 4 + len);
    if (msg.id !== undefined && pending.has(msg.id)) {
      pending.get(msg.id)(msg.result);
      pending.delete(msg.id);
    } else if (msg.id !== undefined && msg.method) {
      // The server asks for configuration (workspace/configuration): answer for each item.
      const items = msg.params?.items ?? [];
      send({ id: msg.id, result: items.map(() => ({ validate: true, schemas: {} })) });
    } else if (msg.method === "textDocument/publishDiagnostics" && waiting.has(msg.params.uri)) {
      waiting.get(msg.params.uri)(msg.params.diagnostics);
      waiting.delete(msg.params.uri);
    }
  }
});

const timeout = setTimeout(() => {
  console.error("yaml-language-server did not answer in time");
  process.exit(2);
}, 60000);

await request("initialize", { processId: process.pid, rootUri: null, capabilities: {} });
send({ method: "initialized", params: {} });
send({ method: "workspace/didChangeConfiguration", params: { settings: { yaml: { validate: true, schemaStore: { enable: false } } } } });

const out = {};
for (const file of files) {
  const uri = pathToFileURL(resolve(file)).href;
  const published = new Promise((res) => waiting.set(uri, res));
  send({ method: "textDocument/didOpen", params: { textDocument: { uri, languageId: "yaml", version: 1, text: readFileSync(file, "utf8") } } });
  const diags = await published;
  out[file] = diags.map((d) => ({ line: d.range.start.line + 1, col: d.range.start.character + 1, message: d.message }));
}
clearTimeout(timeout);
console.log(JSON.stringify(out, null, 2));
child.kill();
process.exit(0);
