"""Upstream's in-place tiers: snip_compact (0.70) and micro_compact (0.80) cut messages in place, recorded
so replay reproduces exactly what the model saw."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import (
    Compressed,
    Custom,
    LlmCompleted,
    PageOut,
    RunStarted,
    SessionEvent,
    ToolCompleted,
)
from flightlog.kernel import Kernel
from flightlog.kernel.context import ContextPolicy
from flightlog.kernel.inplace import excerpt, json_outline, plan_in_place
from flightlog.kernel.requests import check_requests
from flightlog.kernel.state import load_state
from flightlog.messages import Message, TextPart, ToolCall, ToolResult, ToolResultPart
from flightlog.recorder import verify_session
from flightlog.replay import Rebuilder, reconstruct
from flightlog.sessions import archive_loader, iter_events, replay_session
from flightlog.store import SqliteStore, open_store

from . import context_agent
from .helpers import customs, of

IN_PLACE = ("snip_compact", "micro_compact")


def pairs(store: SqliteStore, sid: str) -> list[tuple[int, SessionEvent]]:
    return [(row.seq, event) for row, event in iter_events(store, sid)]


# ─── planning (pure) ──────────────────────────────────────────────────────────────────────────


def answer(turn: int, text: str, call_id: str, tool: str = "work") -> LlmCompleted:
    message = Message(
        role="assistant",
        content=[TextPart(text=text)],
        tool_calls=[ToolCall(id=call_id, name=tool, arguments="{}")],
    )
    return LlmCompleted(turn=turn, message=message)


def result(turn: int, call_id: str, output: str) -> ToolCompleted:
    return ToolCompleted(turn=turn, results=[ToolResult(call_id=call_id, output=output)])


def history(*events: SessionEvent) -> tuple[Rebuilder, list[str]]:
    rebuilder = Rebuilder()
    kinds = []
    for seq, event in enumerate(events):
        rebuilder.feed(seq, event)
        kinds.append(event.kind)
    return rebuilder, kinds


LONG = "a" * 2000  # 500 tokens at 4 chars a token
MID = "b" * 1200  # 300 tokens


def sample() -> tuple[Rebuilder, list[str]]:
    return history(
        RunStarted(run_id="r", goal="g" * 3000),  # 0: the pinned head, never cut
        answer(1, LONG, "c1"),  # 1
        result(1, "c1", MID),  # 2
        answer(2, "short", "c2", tool="page_in"),  # 3
        result(2, "c2", MID),  # 4: a page_in result: never cut
        answer(3, LONG, "c3"),  # 5
        result(3, "c3", MID),  # 6: pinned
        answer(4, LONG, "c4"),  # 7: last two turns: kept
        result(4, "c4", MID),  # 8
        answer(5, LONG, "c5"),  # 9
        result(5, "c5", MID),  # 10
    )


def plan(action: str, **overrides: Any) -> Any:
    rebuilder, kinds = sample()
    args: dict[str, Any] = dict(
        turn=6,
        action=action,
        per_char=0.25,
        usable_tokens=3800,
        fill_tokens=3400,
        target_tokens=2470,
        keep_turns=2,
        pinned={"c3"},
        skip_tools=("page_in",),
    )
    args.update(overrides)
    return plan_in_place(rebuilder, kinds, **args), rebuilder


def test_snip_cuts_long_texts_outside_the_head_and_the_last_turns() -> None:
    found, rebuilder = plan("snip_compact")
    assert [(t.origin, t.stage, t.tokens) for t in found.targets] == [(1, "snip", 500), (5, "snip", 500)]
    assert found.cap_tokens == 190  # upstream: max(50, floor(usable x 0.05))
    items = found.rewrites(rebuilder.messages(), "sha256:" + "1" * 64)
    text = items[0]["text"]
    head, tail = 95 * 4, 95 * 4
    assert text.startswith("a" * head + "… [… 310 tokens omitted; page_in(ref=")
    assert text.endswith("start=0) restores it …] …" + "a" * tail)
    assert "start=1) restores it" in items[1]["text"]
    assert found.originals == (rebuilder.messages()[1], rebuilder.messages()[5])


def test_micro_also_excerpts_large_unpinned_results_and_stops_at_the_target() -> None:
    found, rebuilder = plan("micro_compact")
    assert [(t.origin, t.stage) for t in found.targets] == [(1, "snip"), (2, "micro"), (5, "snip")]
    (micro,) = [i for i in found.rewrites(rebuilder.messages(), None) if i["stage"] == "micro"]
    assert micro["text"].startswith("[tool result: c1 | work | 300 tokens]\n" + "b" * 600 + "… [… 100")
    satisfied, _ = plan("micro_compact", fill_tokens=2700)  # snipping alone reaches the target
    assert {t.stage for t in satisfied.targets} == {"snip"}


def test_nothing_to_cut_records_nothing() -> None:
    rebuilder, kinds = history(RunStarted(run_id="r", goal="g" * 3000), answer(1, "hi", "c1"))
    assert (
        plan_in_place(
            rebuilder,
            kinds,
            turn=2,
            action="micro_compact",
            per_char=0.25,
            usable_tokens=3800,
            fill_tokens=3000,
            target_tokens=100,
            keep_turns=0,
            pinned=(),
        )
        is None
    )
    # a text already cut is not cut again (upstream counts it at the cap)
    cut = excerpt(LONG, 95, 95, 500, 0.25, "")
    rebuilder, kinds = history(RunStarted(run_id="r", goal="g"), answer(1, cut + "x" * 400, "c1"))
    assert plan_in_place(
        rebuilder, kinds, turn=2, action="snip_compact", per_char=0.25, usable_tokens=3800,
        fill_tokens=3000, target_tokens=100, keep_turns=0, pinned=(),
    ) is None  # fmt: skip


def test_large_json_results_are_outlined_as_upstream() -> None:
    assert json_outline('{"path": "a.py", "lines": 3, "ok": true, "body": "' + "x" * 80 + '"}') == (
        'JSON Keys: [path, lines, ok, body]\nJSON Fields: {path: "a.py", lines: 3, ok: true}'
    )
    assert json_outline('[{"id": 1, "v": 2}, {"id": 2}]') == "JSON Array: 2 items. Keys: [id, v]"
    assert json_outline("[]") == "JSON Array: []" and json_outline("not json") is None
    big = json.dumps({"rows": list(range(3000)), "n": 3000})
    rebuilder, kinds = history(
        RunStarted(run_id="r", goal="g"), answer(1, "x", "c1"), result(1, "c1", big), answer(2, "y", "c2")
    )
    found = plan_in_place(
        rebuilder, kinds, turn=3, action="micro_compact", per_char=0.25, usable_tokens=3800,
        fill_tokens=9000, target_tokens=100, keep_turns=1, pinned=(), archived=False,
    )  # fmt: skip
    (item,) = found.rewrites(rebuilder.messages(), None)
    assert (
        item["text"]
        == f"[tool result: c1 | work | {-(-len(big) // 4)} tokens]\nJSON Keys: [rows, n]\nJSON Fields: {{n: 3000}}"
    )


# ─── replay applies exactly what was recorded ─────────────────────────────────────────────────


def test_replay_applies_the_recorded_rewrites_and_never_removes_for_an_in_place_action() -> None:
    base = [RunStarted(run_id="r", goal="go"), answer(1, LONG, "c1"), result(1, "c1", MID)]
    rewrite = Custom(
        custom_kind="context_rewrite",
        payload={
            "turn": 2,
            "action": "micro_compact",
            "rewrites": [
                {"origin": 1, "index": 0, "part": 0, "stage": "snip", "tokens_before": 500, "text": "cut"},
                {"origin": 2, "index": 0, "part": 0, "stage": "micro", "tokens_before": 300, "text": "stub"},
                {"origin": 2, "index": 5, "part": 0, "stage": "micro", "tokens_before": 1, "text": "no such"},
            ],
        },
    )
    compressed = Compressed(turn=2, archived_seq_range=(1, 2), action="micro_compact")
    events = list(enumerate([*base, rewrite, compressed]))
    messages = reconstruct(events)
    assert [m.text_content() for m in messages[:2]] == ["go", "cut"]
    assert messages[1].tool_calls[0].id == "c1"  # the call stays paired with its result
    assert messages[2].content == [ToolResultPart(call_id="c1", output="stub")]
    before = reconstruct(events, at=3)  # the rewrite alone changes nothing until its compressed
    assert before == reconstruct(events, at=2)
    # an in-place compressed without recorded rewrites (an upstream session) removes nothing
    bare = list(enumerate([*base, compressed]))
    assert reconstruct(bare) == reconstruct(bare, at=2)


# ─── a run that snips and micro-compacts ──────────────────────────────────────────────────────


def chatty_run(store: SqliteStore, steps: int) -> tuple[str, Any]:
    agent, provider, _summarizer = context_agent.build(steps, chatty=True)
    result = Kernel(store, agent).run_sync("do all the steps")
    assert result.status == "completed" and result.final_message == f"all {steps} steps done"
    return result.session_id, provider


def test_a_chatty_run_cuts_in_place_then_archives_and_replays_what_the_model_saw(store: SqliteStore) -> None:
    sid, provider = chatty_run(store, 60)
    assert provider.overflows == 0
    events = pairs(store, sid)
    compressions = of(store, sid, Compressed)
    actions = {c.action for c in compressions}
    assert {"snip_compact", "micro_compact"} <= actions and actions & {"context_collapse", "auto_compact"}
    rewrites = customs(store, sid, "context_rewrite")
    in_place = [c for c in compressions if c.action in IN_PLACE]
    assert len(rewrites) == len(in_place)
    for c, rw in zip(in_place, rewrites, strict=True):
        assert c.summary is None and c.summary_tokens is None and c.preserved_refs == ["goal"]
        assert rw["turn"] == c.turn and rw["action"] == c.action
        origins = [item["origin"] for item in rw["rewrites"]]
        assert c.archived_seq_range == (min(origins), max(origins))
        if c.action == "snip_compact":
            assert {item["stage"] for item in rw["rewrites"]} == {"snip"}
    # the fill that triggered each in-place tier, and the tier it called for
    invoked = [
        (seq, e.payload)
        for seq, e in events
        if isinstance(e, Custom)
        and e.custom_kind == "prompt_program_invoked"
        and e.payload["actor"] == "kernel"
    ]
    assert all(
        p["context"]["fill_tokens"] <= context_agent.WINDOW - context_agent.MAX_TOKENS for _s, p in invoked
    )
    # every request reproduces from the ledger, and the history is what the kernel sent
    report = check_requests(events, loader=archive_loader(store))
    assert report.ok and report.checked == len(customs(store, sid, "prompt_program_invoked"))
    assert replay_session(store, sid) == load_state(store, sid).history()
    assert verify_session(store, sid).ok


def test_replay_at_a_rewrite_shows_the_cut_text_and_page_in_restores_the_original(store: SqliteStore) -> None:
    sid, _provider = chatty_run(store, 30)
    events = pairs(store, sid)
    loader = archive_loader(store)
    seq, compressed = next((s, e) for s, e in events if isinstance(e, Compressed) and e.action in IN_PLACE)
    rewrite_event, paged = events[seq - 2][1], events[seq - 1][1]
    assert isinstance(rewrite_event, Custom) and rewrite_event.custom_kind == "context_rewrite"
    assert isinstance(paged, PageOut) and paged.archive_ref is not None
    rewrite = rewrite_event.payload
    assert paged.tier_hint == "durable" and paged.action == compressed.action
    before, after = replay_session(store, sid, at=seq - 3), replay_session(store, sid, at=seq)
    assert len(before) == len(after)  # nothing removed, nothing added
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert len(changed) == len({(i["origin"], i["index"]) for i in rewrite["rewrites"]})
    archived = loader(paged.archive_ref)
    assert archived is not None and [b for b, _a in changed] == list(archived)  # originals, in order
    texts = {i["text"] for i in rewrite["rewrites"]}
    for _b, a in changed:
        parts = [
            p.text if isinstance(p, TextPart) else p.output
            for p in a.content
            if isinstance(p, TextPart | ToolResultPart)
        ]
        assert texts & set(parts)
        assert paged.archive_ref in " ".join(parts)  # every cut names where the original is


def test_the_tiers_can_be_turned_off(store: SqliteStore) -> None:
    agent, _provider, _summarizer = context_agent.build(30, chatty=True, snip_at=None, micro_at=None)
    result = Kernel(store, agent).run_sync("do all the steps")
    assert result.status == "completed"
    assert not any(c.action in IN_PLACE for c in of(store, result.session_id, Compressed))
    assert ContextPolicy.from_dict({"snip_at": 0.75, "micro_at": 0.85}).in_place_action(0.8) == "snip_compact"
    assert ContextPolicy().in_place_action(0.81) == "micro_compact"
    assert ContextPolicy().in_place_action(0.70) is None  # strict >, as upstream
    off = ContextPolicy.from_dict({"snip_at": False, "micro_at": False})
    assert (off.snip_at, off.micro_at, off.in_place_action(0.99)) == (None, None, None)


def test_check_names_the_turn_when_a_recorded_rewrite_is_changed(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with open_store(str(db)) as store:
        sid, _provider = chatty_run(store, 30)
        seq, payload = next(
            (s, e.payload)
            for s, e in pairs(store, sid)
            if isinstance(e, Custom) and e.custom_kind == "context_rewrite"
        )
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER events_no_update")  # edit the file behind flightlog's back
    (raw,) = con.execute("SELECT event FROM events WHERE session_id=? AND seq=?", (sid, seq)).fetchone()
    changed = bytes(raw).replace(b"tokens omitted", b"tokens dropped", 1)
    assert changed != bytes(raw)
    con.execute("UPDATE events SET event=? WHERE session_id=? AND seq=?", (changed, sid, seq))
    con.commit()
    con.close()
    out = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--check", "--json"])
    assert out.exit_code == 1
    assert json.loads(out.stdout)["first"]["turn"] == payload["turn"]
