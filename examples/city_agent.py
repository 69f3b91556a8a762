"""A durable agent in a few lines, on a real recorded Claude conversation.

The agent answers "What is the largest city in the user country?" with one tool, ``get_user_country``.
Looking the user up is a billed, audited call to an account service (simulated here by a JSONL file), so
the tool is a ``side_effect``: the policy asks a human before it runs, the kernel runs it exactly once,
and after a crash it asks ``reconcile`` whether the lookup already happened instead of running it again.

The model is the real Anthropic SDK adapter with its ``base_url`` pointed at a loopback replay server
serving the recorded cassette ``anthropic/thinking-tool-use-roundtrip`` (extended thinking with a
signature, then tool use, then the answer). The definition below (goal, tool name and empty description,
no-argument schema, thinking and tool-choice options) makes the kernel send exactly the recorded
requests; any difference would be answered with HTTP 599 and fail the run. Drop ``api_key`` and
``base_url``, set ``ANTHROPIC_API_KEY``, and the same agent talks to the real API.

Every process that runs or resumes the agent loads this module and starts its own replay server with
``seek=True``: a resumed process's first request is the one the session has reached (the recorded
interaction #1, carrying the whole conversation so far), and the server skips ahead to it.

The recording has only the approve path. A denied lookup is answered from ``city_agent_denied.yaml``
beside this file: NOT a recording but a continuation written for this example (the recorded second
request with the tool result a denial, and a hand-written answer), appended to the served interactions.
The kernel tells the model ``denied by <operator>: <reason>``, which varies, so the server compares each
request with that text replaced by the branch's placeholder (:func:`denial_as_recorded`); any other
difference still gets HTTP 599.

From a checkout (terminal 1 runs the agent, terminal 2 decides)::

    # terminal 1: stops with exit code 3, waiting for approval
    flightlog run examples.city_agent:agent --goal "What is the largest city in the user country?"
    # terminal 2
    flightlog pending
    flightlog approve SESSION CALL     # or: flightlog deny SESSION CALL --as bob --reason "not now"
    # terminal 1 (kill -9 it while the lookup holds, then resume again: the lookup is not repeated)
    CITY_AGENT_HOLD_S=30 flightlog resume SESSION
    flightlog resume SESSION
    flightlog verify SESSION && flightlog replay SESSION

Environment:
    CITY_AGENT_LOOKUPS: The account service's audit log (default: ``flightlog-city-agent/lookups.jsonl``
        in the temporary directory).
    CITY_AGENT_HOLD_S: Seconds a lookup waits after it is done, before returning (a slow
        acknowledgement: the window in which ``kill -9`` leaves it in doubt). Default 0.
    FLIGHTLOG_REPLAY_JOURNAL: Append one JSON line per request the replay server answers to this file.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from flightlog.kernel import Agent, Policy, Rule, current_effect_key, tool
from flightlog.providers.anthropic import AnthropicProvider
from flightlog.providers.cassette import load_cassette
from flightlog.providers.replay_server import ReplayServer, packaged_cassettes

GOAL = "What is the largest city in the user country?"
CASSETTE = packaged_cassettes()["anthropic/thinking-tool-use-roundtrip"]
DENIED_BRANCH = Path(__file__).with_name("city_agent_denied.yaml")
"""The deny path: written for this example, not recorded (see the module docs and the file's header)."""
DENIAL_PLACEHOLDER = "denied by OPERATOR: REASON"
"""What the deny branch's request holds where the live one says who denied the lookup and why."""


def lookups_path() -> Path:
    """The account service's audit log: one JSON line ``{"key", "country"}`` per lookup."""
    default = Path(tempfile.gettempdir()) / "flightlog-city-agent" / "lookups.jsonl"
    return Path(os.environ.get("CITY_AGENT_LOOKUPS") or default)


def looked_up(key: str) -> str | None:
    """The country the lookup with idempotency key ``key`` returned, if the account service has it."""
    path = lookups_path()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return next((entry["country"] for entry in map(json.loads, lines) if entry["key"] == key), None)


def reconcile_lookup(intent: dict[str, Any]) -> str | None:
    """After a crash: the recorded country if this call's lookup happened, None if it did not."""
    return looked_up(current_effect_key() or "")


@tool(effect="side_effect", description="", reconcile=reconcile_lookup)
def get_user_country() -> str:
    """Look the user's country up in the account service (billed and audited per call).

    The recorded request described the tool with an empty description, hence ``description=""``.
    """
    path = lookups_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:  # the effect, stamped with the call's idempotency key
        fh.write(json.dumps({"key": current_effect_key(), "country": "Mexico"}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    time.sleep(float(os.environ.get("CITY_AGENT_HOLD_S") or 0))
    return "Mexico"


def denial_as_recorded(body: bytes) -> bytes:
    """A live request body as the deny branch holds it: the text of each tool result marked ``is_error``
    that starts ``denied by `` (the kernel's ``denied by <operator>: <reason>``) replaced by
    :data:`DENIAL_PLACEHOLDER`; any other body unchanged (a body that is not JSON too)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    changed = False
    for message in doc.get("messages", []) if isinstance(doc, dict) else []:
        blocks = message.get("content") if isinstance(message, dict) else None
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("is_error"):
                text = _tool_result_text(block.get("content"))
                if text is not None and text.startswith("denied by "):
                    block["content"], changed = DENIAL_PLACEHOLDER, True
    return json.dumps(doc).encode("utf-8") if changed else body


def _tool_result_text(content: Any) -> str | None:
    """The text of a tool result's content: a string, or a list of one text block."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def build(journal: str | Path | None = None) -> tuple[Agent, ReplayServer]:
    """The agent and the (started) replay server it talks to; the caller closes both.

    The server serves the recorded conversation, then the deny branch (module docs).

    Args:
        journal: Replay journal file (default: ``$FLIGHTLOG_REPLAY_JOURNAL``, else none).
    """
    server = ReplayServer(
        [*load_cassette(CASSETTE), *load_cassette(DENIED_BRANCH)],
        seek=True,
        journal=journal or os.environ.get("FLIGHTLOG_REPLAY_JOURNAL"),
        compare_as=denial_as_recorded,
    ).start()
    model = AnthropicProvider(
        "claude-sonnet-4-0",
        api_key="replay",  # the real API: drop these two lines and set ANTHROPIC_API_KEY
        base_url=server.base_url,
        request_options={
            "thinking": {"type": "enabled", "budget_tokens": 3000},
            "tool_choice": {"type": "auto"},
        },
    )
    agent = Agent(
        name="city-agent",
        route=[model],
        tools=[get_user_country],
        policy=Policy(rules=(Rule("ask", effect="side_effect", reason="a billed lookup needs approval"),)),
    )
    return agent, server


def agent() -> Agent:
    """The spec ``examples.city_agent:agent``: a fresh agent whose replay server lives as long as the process."""
    return build()[0]
