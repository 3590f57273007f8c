"""Starts an agent over a workspace, streams its text, and asks you about each risky call.

    python approve.py WORKSPACE "what to do"   (AIRLOCK_SERVER, AIRLOCK_TOKEN, AIRLOCK_MODEL)
"""

import os
import sys

import airlock_client

workspace, task = sys.argv[1], sys.argv[2]
model = os.environ.get("AIRLOCK_MODEL", "openai:gpt-4.1-mini")
script = open(os.environ["AIRLOCK_SCRIPT"]).read() if model == "scripted" else None

with airlock_client.connect() as client:
    run = client.start_run(task, workspace=os.path.abspath(workspace), model=model, script=script)
    for event in run:
        kind = event.WhichOneof("event")
        if kind == "text_delta":
            print(event.text_delta.text, end="", flush=True)
        elif kind == "approval_requested":
            request = event.approval_requested.request
            print(f"\n{request.tool} wants to run:\n{request.preview.text or request.arguments_json}")
            if input("approve? [y/N] ").strip().lower() == "y":
                run.approve(request)
            else:
                run.deny(request, reason="the person said no")
        elif kind == "run_finished":
            print(f"\n[{event.run_finished.final_text}]")
