// Example: an agent run over a workspace, its text printed as it streams, each approval put to
// the person at the terminal. Usage: node dist/examples/approve.js [ENDPOINT] [WORKSPACE]
// (else $AIRLOCK_SERVER, $AIRLOCK_WORKSPACE or the current directory); the model is
// $AIRLOCK_MODEL (default openai:gpt-4.1-mini), a scripted model's script the file $AIRLOCK_SCRIPT.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { ApprovalPolicy, connect } from "@airlock/client";

const [endpoint = process.env["AIRLOCK_SERVER"], workspace = process.env["AIRLOCK_WORKSPACE"] ?? process.cwd()] = process.argv.slice(2);
const scriptFile = process.env["AIRLOCK_SCRIPT"];
const client = await connect(endpoint);
const terminal = createInterface({ input: process.stdin, output: process.stdout });
try {
  const run = await client.startRun({
    workspace,
    input: process.env["AIRLOCK_INPUT"] ?? "Add a README.md saying what this project is.",
    model: { model: process.env["AIRLOCK_MODEL"] ?? "openai:gpt-4.1-mini", script: scriptFile ? readFileSync(scriptFile, "utf8") : "" },
    approvalPolicy: ApprovalPolicy.RISKY,
  });
  for await (const event of run) {
    const e = event.event;
    if (e.case === "textDelta") process.stdout.write(e.value.text);
    if (e.case === "approvalRequested" && e.value.request) {
      const request = e.value.request;
      const answer = await terminal.question(`\n${request.tool} asks (${request.reason}):\n${request.preview?.text || request.argumentsJson}\nApprove? [y/N] `);
      const approve = /^y(es)?$/i.test(answer.trim());
      await run.decide(request, approve ? { approve } : { approve, reason: "the person at the terminal said no" });
    }
  }
  console.log(`\nfinal: ${(await run.wait()).finalText}`);
} finally {
  // Also when the run fails: an open terminal or connection would keep the process alive.
  terminal.close();
  client.close();
}
