// examples/approve.ts, compiled, run as a person would: against a real airlockd with the
// scripted model, answering its terminal prompt with "y" (the file is written) and with "n"
// (it is not).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { type Daemon, startDaemon, within } from "./daemon.js";

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "../examples/approve.js");

function script(path: string): string {
  return JSON.stringify({
    stream: true,
    turns: [
      { tool_calls: [{ name: "write_file", arguments: { path, content: "from the example\n" } }] },
      {
        alternatives: [
          { when: { status: "OK" }, final: "written" },
          { when: { contains: "said no" }, final: "not written: the person said no" },
          { final: "something else happened" },
        ],
      },
    ],
  });
}

/** Runs the example, typing `answer` at its prompt; resolves with its output and exit code. */
function runExample(daemon: Daemon, scriptFile: string, answer: string): Promise<{ out: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [EXAMPLE, daemon.endpoint, daemon.workspace], {
      env: { ...process.env, AIRLOCK_TOKEN: daemon.token, AIRLOCK_MODEL: "scripted", AIRLOCK_SCRIPT: scriptFile },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let answered = false;
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (!answered && out.includes("Approve? [y/N] ")) {
        answered = true;
        child.stdin.write(`${answer}\n`);
      }
    });
    child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.once("error", reject);
    child.once("exit", (code) => resolve({ out, code }));
    setTimeout(() => child.kill("SIGKILL"), 30_000).unref();
  });
}

describe("examples/approve", { timeout: 60_000 }, () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon();
  });

  after(async () => {
    await daemon?.dispose();
  });

  it("asks at the terminal; y approves the write", async () => {
    const file = join(daemon.root, "yes.json");
    writeFileSync(file, script("from-example.txt"));
    const { out, code } = await within(40_000, "the example", runExample(daemon, file, "y"));
    assert.equal(code, 0, out);
    assert.match(out, /write_file asks \(.*\):\n/);
    assert.match(out, /\+from the example/, "the prompt shows the diff");
    assert.match(out, /written\nfinal: written\n$/, "the streamed text, then the final text");
    assert.equal(readFileSync(join(daemon.workspace, "from-example.txt"), "utf8"), "from the example\n");
  });

  it("n denies it, and the model is told why", async () => {
    const file = join(daemon.root, "no.json");
    writeFileSync(file, script("refused-example.txt"));
    const { out, code } = await within(40_000, "the example", runExample(daemon, file, "n"));
    assert.equal(code, 0, out);
    assert.match(out, /final: not written: the person said no\n$/);
    assert.equal(existsSync(join(daemon.workspace, "refused-example.txt")), false);
  });
});
