// Reads a JUnit XML report with test-results-parser (the parser CI reporting tools
// such as testbeats use) and prints what it understood as JSON: totals and each
// suite's cases with their status.
//
//   node junit-check.mjs report.xml
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { parse } = require("test-results-parser");

const result = parse({ type: "junit", files: [process.argv[2]] });
console.log(JSON.stringify({
  total: result.total,
  passed: result.passed,
  failed: result.failed,
  errors: result.errors,
  suites: result.suites.map((s) => ({
    name: s.name,
    total: s.total,
    cases: s.cases.map((c) => ({ name: c.name, status: c.status, failure: c.failure })),
  })),
}));
