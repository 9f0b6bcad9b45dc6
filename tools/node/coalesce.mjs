// Copies stdin to stdout, holding what comes until 100ms pass with nothing more,
// so that messages written one after the other reach the reader in one read: a
// loaded machine's worst case, for a stdio server's tests.
//
//   server | node coalesce.mjs
let held = [];
let timer;
const flush = () => {
  if (held.length) process.stdout.write(Buffer.concat(held));
  held = [];
};
process.stdin.on("data", (chunk) => {
  held.push(chunk);
  clearTimeout(timer);
  timer = setTimeout(flush, 100);
});
process.stdin.on("end", () => {
  clearTimeout(timer);
  flush();
});
