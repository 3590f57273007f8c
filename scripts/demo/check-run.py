"""Checks the demo's agent run from its events (`airlock runs attach RUN --json`), not from
what the model said: the run ended with a final answer; its first run_command call ran the
tests and they failed (TOOL_ERROR, exit code 1, a failing test in the output); an apply_patch
call then changed src/calc.py (its `changes` event); and a later run_command call ran the
tests again and they passed (OK). Prints what it found, with the failing run's output, to
stderr, and the step of the patch to stdout (for `airlock revert --to-step`). Exits 1 with
the reason otherwise.

Usage: python3 check-run.py EVENTS.jsonl
"""

import json
import sys


def fail(message):
    print(f"check-run: {message}", file=sys.stderr)
    sys.exit(1)


def main(path):
    steps = {}  # step_id -> index, as `airlock runs attach` and `airlock changes` number them
    finished = []  # (step, tool, result) of each tool call, in order
    changes = []  # (step, tool, changes) of each change set
    run_finished = None
    with open(path, encoding="utf-8") as events:
        for line in events:
            event = json.loads(line)
            step = steps.get(event.get("step_id"))
            if "step_started" in event:
                steps[event["step_id"]] = event["step_started"]["index"]
            elif "tool_finished" in event:
                call = event["tool_finished"]
                finished.append((step, call["tool"], call["result"]))
            elif "changes" in event:
                change_set = event["changes"]
                changes.append((step, change_set["tool"], change_set["changes"]))
            elif "run_finished" in event:
                run_finished = event["run_finished"]
    # The calls that matter, in order: the tests, the patch, the tests again; each checked
    # before the next is looked at, so a failure names the first thing that went wrong.
    calls = [(step, tool, result) for step, tool, result in finished
             if tool in ("run_command", "apply_patch")]

    def call(index, tool, what):
        if index >= len(calls):
            fail(f"the run did not {what}: its calls were {[name for _, name, _ in calls]}")
        if calls[index][1] != tool:
            fail(f"step {calls[index][0]}: expected {tool} to {what}, found {calls[index][1]}")
        return calls[index][0], calls[index][2]

    before_step, before = call(0, "run_command", "run the tests")
    if before.get("status") != "TOOL_ERROR" or before.get("exit_code") != 1:
        fail(f"step {before_step}: the first test run ended {before.get('status')} "
             f"(exit code {before.get('exit_code')}), not TOOL_ERROR with exit code 1")
    if "FAIL: test_mean" not in before.get("content", "") or "Ran 2 tests" not in before.get("content", ""):
        fail(f"step {before_step}: the first test run did not run the tests and fail test_mean:\n"
             f"{before.get('content')}")

    patch_step, patch = call(1, "apply_patch", "patch the code")
    if patch.get("status") != "OK":
        fail(f"step {patch_step}: apply_patch ended {patch.get('status')}: "
             f"{patch.get('error_message') or patch.get('content')}")
    patched = [
        change["path"]
        for step, tool, change_set in changes
        if step == patch_step and tool == "apply_patch"
        for change in change_set
        if change.get("kind") == "modified" and change.get("applied")
    ]
    if patched != ["src/calc.py"]:
        fail(f"step {patch_step}: apply_patch's change set is {patched}, not src/calc.py modified")

    after_step, after = call(2, "run_command", "run the tests again")
    after_lines = after.get("content", "").rstrip().splitlines()
    if (after.get("status") != "OK" or "Ran 2 tests" not in after.get("content", "")
            or after_lines[-1:] != ["OK"]):
        fail(f"step {after_step}: the second test run did not pass (status {after.get('status')}):\n"
             f"{after.get('content')}")
    if len(calls) != 3:
        fail(f"the run made more calls than expected: {[name for _, name, _ in calls]}")

    if run_finished is None:
        fail("the run has no run_finished event")
    if run_finished.get("reason") != "FINAL":
        fail(f"the run stopped with {run_finished.get('reason')}, not a final answer: "
             f"{run_finished.get('detail') or run_finished.get('final_text')}")

    report = sys.stderr
    print(f"step {before_step}: run_command ran the tests: {before['status']}, exit code "
          f"{before['exit_code']}; what it printed:", file=report)
    for line in before["content"].rstrip("\n").split("\n"):
        print(f"    {line}", file=report)
    print(f"step {patch_step}: apply_patch: {patch['status']}, changed {', '.join(patched)}",
          file=report)
    print(f"step {after_step}: run_command ran the tests again: {after['status']} "
          f"({after_lines[-3]}: {after_lines[-1]})", file=report)
    print(patch_step)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: check-run.py EVENTS.jsonl")
    main(sys.argv[1])
