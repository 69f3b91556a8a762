"""The conversation view and its diff (flightlog.web.conversation), the cost and entropy series
(flightlog.web.charts_api) and the list prices (flightlog.web.prices), over HTTP and as functions."""

# ruff: noqa: F811  (the fixtures imported from a sibling test module are parameters here)
from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from flightlog.cli.demo import example_transcripts
from flightlog.cli.demo_context import demo_agent
from flightlog.cli.demo_watch import watch_agent
from flightlog.events import (
    Compressed,
    Custom,
    LlmCompleted,
    Rollbacked,
    RunStarted,
    ToolCompleted,
    ToolDenied,
    ToolRequested,
)
from flightlog.importers import import_file
from flightlog.kernel import Kernel
from flightlog.messages import ImagePart, Message, TextPart, ToolCall, ToolResult
from flightlog.recorder import Recorder
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore
from flightlog.web import prices
from flightlog.web.charts_api import charts
from flightlog.web.conversation import PART_BYTES, Transcript, conversation, diff_rows, transcripts
from flightlog.web.waterfall_api import waterfall

from .conftest import IMG, SCRIPT, record_hostile
from .test_web_http import anonymous, client  # noqa: F401  (shared fixtures)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _imported(db_path: Path) -> dict[str, str]:
    """The bundled Claude Code and Codex examples imported; their session ids by format."""
    ids: dict[str, str] = {}
    with SqliteStore(db_path) as store:
        for path in example_transcripts():
            for sid in import_file(store, path).session_ids:
                ids[sid.split(":", 1)[0]] = sid
    return ids


def test_the_conversation_is_the_replay_fold_at_every_seq(db_path: Path) -> None:
    ids = _imported(db_path)
    with SqliteStore(db_path) as store:
        kernel_id = Kernel(store, demo_agent()).run_sync("do all the steps", handle_signals=False).session_id
        for sid in [*ids.values(), kernel_id]:
            head = store.get_session(sid).head_seq
            found, _fold = transcripts(store, sid, list(range(head + 1)))
            for at in range(0, head + 1, 7 if head > 100 else 1):
                expected = replay_session(store, sid, at=at, max_part_bytes=PART_BYTES)
                assert [m for _k, m in found[at].messages] == expected, (sid, at)


def test_a_compaction_diff_shows_the_archived_messages_removed_and_the_summary_added(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = Kernel(store, demo_agent()).run_sync("do all the steps", handle_signals=False).session_id
        data = conversation(store, sid, None, None)
        first = data["changes"][0]
        assert first["kind"] == "compressed"
        seq = first["seq"]
        before = replay_session(store, sid, at=seq - 1)
        after = replay_session(store, sid, at=seq)
        diff = conversation(store, sid, seq, seq - 1)
    summary = diff["summary"]
    assert summary["added"] == 1 and summary["changed"] == 0
    assert summary["removed"] == len(before) - len(after) + 1
    assert summary["same"] == len(after) - 1
    [added] = [r["new"] for r in diff["diff"] if r["status"] == "added"]
    assert added["role"] == "system" and added["origin"] == seq
    assert added["parts"][0]["text"].startswith(f"[compressed turn {first['turn']}]")
    assert first["href"].endswith(f"at={seq}&from={seq - 1}")


def test_a_rollback_diff_shows_the_tail_removed_and_a_rewrite_shows_changed(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id="rb")
        rec.append(RunStarted(run_id="rb", goal="start"))  # 0
        rec.append(LlmCompleted(turn=1, message=Message.text("assistant", "first answer")))  # 1
        rec.append(LlmCompleted(turn=2, message=Message.text("assistant", "second answer")))  # 2
        rec.append(Rollbacked(turn=2, checkpoint_history_len=2))  # 3
        rewrite = {"origin": 1, "index": 0, "part": 0, "stage": "snip", "tokens_before": 3, "text": "cut"}
        rec.append(Custom(custom_kind="context_rewrite", payload={"turn": 3, "rewrites": [rewrite]}))  # 4
        rec.append(Compressed(turn=3, archived_seq_range=(1, 1), action="snip_compact"))  # 5
        rolled = conversation(store, "rb", 3, 2)
        rewritten = conversation(store, "rb", 5, 3)
        assert [m.text_content() for m in replay_session(store, "rb", at=5)] == ["start", "cut"]
    assert [r["status"] for r in rolled["diff"]] == ["same", "same", "removed"]
    assert rolled["diff"][2]["old"]["parts"][0]["text"] == "second answer"
    assert [r["status"] for r in rewritten["diff"]] == ["same", "changed"]
    changed = rewritten["diff"][1]
    assert changed["old"]["parts"][0]["text"] == "first answer"
    assert changed["new"]["parts"][0]["text"] == "cut"
    assert [c["kind"] for c in rolled["changes"]] == ["rollbacked", "compressed"]


def test_calls_sit_beside_their_results_with_denials_and_decisions(client: TestClient, db_path: Path) -> None:
    ids = _imported(db_path)
    page = client.get("/conversation", params={"id": ids["claude-code"]})
    assert page.status_code == 200
    html = page.text
    assert html.count('class="call error noted"') == 2  # two denied calls, each beside its result
    assert "denied (the reason is the result)" in html
    assert '<details class="thinking"><summary>thinking</summary>' in html  # collapsed
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id="decided")
        rec.append(RunStarted(run_id="d", goal="go"))
        message = Message(role="assistant", tool_calls=[ToolCall(id="c1", name="write", arguments="{}")])
        rec.append(LlmCompleted(turn=1, message=message))
        rec.append(ToolRequested(turn=1, calls=message.tool_calls))
        payload = {"approved": True, "call_id": "c1", "responder": "alice", "turn": 1}
        rec.append(Custom(custom_kind="approval_decision", payload=payload))
        rec.append(ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output="written")]))
        rec.append(ToolDenied(turn=1, call_id="c2", tool_name="x", reason="not here"))
    html = client.get("/conversation", params={"id": "decided"}).text
    assert "approved by alice" in html and "<pre>written</pre>" in html
    assert html.count('class="turn role-tool') == 0  # the result is drawn beside its call, not again


def test_a_diff_between_two_seqs_over_http(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = Kernel(store, demo_agent()).run_sync("do all the steps", handle_signals=False).session_id
        seq = conversation(store, sid, None, None)["changes"][0]["seq"]
    html = client.get("/conversation", params={"id": sid, "at": seq, "from": seq - 1}).text
    assert f"What changed from seq {seq - 1} to seq {seq}" in html
    assert 'class="turn role-system diff-added"' in html
    assert "diff-removed" in html
    assert client.get("/conversation", params={"id": sid, "at": "x"}).status_code == 400
    assert client.get("/conversation", params={"id": "nope"}).status_code == 404


def test_images_come_through_the_route_and_remote_ones_are_never_loaded(
    client: TestClient, anonymous: TestClient, db_path: Path
) -> None:
    with SqliteStore(db_path) as store:
        digest = store.put_artifact(PNG, "image/png").sha256
        svg = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>")
        rec = Recorder.create(store, session_id="img")
        parts = [
            ImagePart(ref="data:image/png;base64," + base64.b64encode(PNG).decode()),
            ImagePart(ref=f"sha256:{digest}", media_type="image/png"),
            ImagePart(ref="data:image/svg+xml;base64," + svg.decode()),
            ImagePart(ref="https://tracker.example/pixel.png"),
        ]
        rec.append(RunStarted(run_id="i", goal="look", attachments=parts))
    html = client.get("/conversation", params={"id": "img"}).text
    assert "tracker.example" in html and 'src="https://' not in html
    assert "remote image, not loaded: https://tracker.example/pixel.png" in html
    for part in (1, 2):
        served = client.get("/api/conversation/image", params={"id": "img", "at": 0, "m": 0, "p": part})
        assert served.status_code == 200 and served.content == PNG
        assert served.headers["content-type"] == "image/png"
        assert hashlib.sha256(served.content).hexdigest() == digest
    for part in (3, 4, 0, 9):  # svg, remote, the goal's text part, no such part
        refused = client.get("/api/conversation/image", params={"id": "img", "at": 0, "m": 0, "p": part})
        assert refused.status_code == 404, part
    assert (
        client.get("/api/conversation/image", params={"id": "img", "at": 0, "m": "x", "p": 1}).status_code
        == 400
    )
    assert (
        anonymous.get("/api/conversation/image", params={"id": "img", "at": 0, "m": 0, "p": 1}).status_code
        == 401
    )


def test_hostile_text_stays_inert_in_the_conversation(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = record_hostile(store, "conv-hostile")
        rec = Recorder.attach(store, sid)
        message = Message(
            role="assistant",
            content=[TextPart(text=f"say {SCRIPT}")],
            tool_calls=[ToolCall(id="c9", name=f"t{IMG}", arguments=SCRIPT)],
        )
        rec.append(LlmCompleted(turn=2, message=message))
        rec.append(ToolCompleted(turn=2, results=[ToolResult(call_id="c9", output=IMG)]))
        rec.append(ToolDenied(turn=2, call_id="c9", tool_name="t", reason=SCRIPT))
    for params in ({"id": sid}, {"id": sid, "at": 6, "from": 1}):
        html = client.get("/conversation", params=params).text
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=" in html
        assert "[U+202E]" in html  # the bidi override of BIDI shown, not applied


def test_list_prices_price_only_known_models_and_protocols() -> None:
    anthropic = prices.call_cost(
        "claude-sonnet-4-0",
        "anthropic.messages",
        input_tokens=1000,
        output_tokens=100,
        cache_read=2000,
        cache_write=400,
    )
    assert anthropic == pytest.approx((1000 * 3 + 100 * 15 + 2000 * 0.3 + 400 * 3.75) / 1e6)
    openai = prices.call_cost(
        "gpt-5.3-codex", "openai.responses", input_tokens=1000, output_tokens=10, cache_read=600
    )
    assert openai == pytest.approx((400 * 1.75 + 600 * 0.175 + 10 * 14) / 1e6)
    assert prices.call_cost("scripted-model", "scripted", input_tokens=1, output_tokens=1) is None
    assert prices.call_cost("claude-sonnet-4", "anthropic.messages", input_tokens=1, output_tokens=1) is None
    assert prices.call_cost("claude-opus-4-6", "other", input_tokens=1, output_tokens=1) is None
    assert (
        prices.call_cost("gpt-5.3-codex", "openai.chat", input_tokens=1, output_tokens=1, cache_write=5)
        is None
    )
    assert all(p.source.startswith("https://") for p in prices.LIST_PRICES.values())


def _usage(model: str, turn: int, protocol: str = "anthropic.messages") -> Custom:
    payload = {"turn": turn, "model": model, "protocol": protocol, "input_tokens": 1000, "output_tokens": 100}
    return Custom(custom_kind="model_usage", payload=payload)


def test_cost_is_cumulative_over_priced_turns_and_unknown_models_are_named(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, session_id="cost")
        rec.append_many(
            [_usage("claude-sonnet-4-0", 1), _usage(f"m{SCRIPT}", 2), _usage("claude-opus-4-6", 3)]
        )
        cost = charts(store, "cost")["cost"]
        only_unknown = Recorder.create(store, session_id="cost-unknown")
        only_unknown.append(_usage("scripted-model", 1, "scripted"))
        unknown = charts(store, "cost-unknown")["cost"]
    sonnet, opus = (1000 * 3 + 100 * 15) / 1e6, (1000 * 5 + 100 * 25) / 1e6
    assert [t["cost"] for t in cost["turns"]] == [pytest.approx(sonnet), None, pytest.approx(opus)]
    assert [t["cumulative"] for t in cost["turns"]] == [pytest.approx(sonnet)] * 2 + [
        pytest.approx(sonnet + opus)
    ]
    assert cost["unknown"] == [f"m{SCRIPT}"] and cost["partial"] is True
    assert unknown["total"] is None and unknown["unknown"] == ["scripted-model"]


def test_a_codex_import_is_priced_from_its_token_counts(db_path: Path) -> None:
    ids = _imported(db_path)
    with SqliteStore(db_path) as store:
        cost = charts(store, ids["codex"])["cost"]
        claude = charts(store, ids["claude-code"])["cost"]
    assert [t["models"] for t in cost["turns"]] == [["gpt-5.3-codex"]] * 6
    first = ((42772 - 3456) * 1.75 + 3456 * 0.175 + 204 * 14) / 1e6  # the rollout's first token_count
    assert cost["turns"][0]["cost"] == pytest.approx(first)
    assert cost["total"] == pytest.approx(0.16168915)
    assert claude["calls"] == 0  # a Claude Code import keeps no per-call usage: nothing is drawn


def test_entropy_samples_per_turn_with_the_alert_threshold(client: TestClient, db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        sid = Kernel(store, watch_agent()).run_sync("find the config file", handle_signals=False).session_id
    data = client.get("/api/charts", params={"session": sid}).json()
    samples = data["entropy"]["samples"]
    assert [s["turn"] for s in samples] == [1, 2, 3, 4, 5, 6]
    assert [s["alert"] for s in samples] == [False] * 5 + [True]
    assert samples[-1]["score"] >= data["entropy"]["threshold"] == 0.6
    assert data["cost"]["unknown"] == ["looping-model"] and data["cost"]["total"] is None
    assert client.get("/api/charts", params={"session": "nope"}).status_code == 404


_KEYS = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2)), unique=True, max_size=12)


def _transcript(at: int, keys: list[tuple[int, int]], variant: dict[tuple[int, int], int]) -> Transcript:
    return Transcript(at, [(k, Message.text("user", f"{k}/{variant.get(k, 0)}")) for k in keys])


@given(
    old=_KEYS,
    new=_KEYS,
    variants=st.dictionaries(st.tuples(st.integers(0, 6), st.integers(0, 2)), st.integers(0, 1)),
)
def test_a_diff_keeps_both_sides_in_order_and_flags_every_difference(
    old: list[tuple[int, int]], new: list[tuple[int, int]], variants: dict[tuple[int, int], int]
) -> None:
    before, after = _transcript(1, old, {}), _transcript(2, new, variants)
    rows = diff_rows("s", before, after, {}, context=None)

    def text(view: dict[str, Any]) -> str:
        return str(view["parts"][0]["text"])

    old_side = [text(r["old"] or r["new"]) for r in rows if r["status"] != "added"]
    new_side = [text(r["new"]) for r in rows if r["status"] != "removed"]
    assert [s.split("/")[0] for s in old_side] == [str(k) for k in old]
    assert new_side == [f"{k}/{variants.get(k, 0)}" for k in new]
    for row in rows:
        if row["status"] == "changed":
            assert text(row["old"]).split("/")[0] == text(row["new"]).split("/")[0]
            assert text(row["old"]) != text(row["new"])
        elif row["status"] == "same":
            assert row["old"] is None
            assert text(row["new"]).endswith("/0")
    assert {r["status"] for r in rows} <= {"same", "changed", "added", "removed"}


def test_the_token_chart_counts_each_cache_read_once_and_draws_a_codex_import(db_path: Path) -> None:
    ids = _imported(db_path)
    with SqliteStore(db_path) as store:
        codex = waterfall(store, ids["codex"])["turns"]
        rec = Recorder.create(store, session_id="openai-usage")
        usage = {
            "turn": 1,
            "model": "m",
            "protocol": "openai.chat",
            "input_tokens": 1000,
            "output_tokens": 10,
        }
        rec.append(Custom(custom_kind="model_usage", payload={**usage, "cache_read_tokens": 600}))
        rec.append(Custom(custom_kind="model_usage", payload={**usage, "protocol": "anthropic.messages"}))
        [turn] = waterfall(store, "openai-usage")["turns"]
    assert len(codex) == 6
    assert codex[0] == {
        "turn": 1,
        "input": 42772 - 3456,  # OpenAI counts the cached tokens in input_tokens: drawn once, as cache read
        "output": 204,
        "cache_read": 3456,
        "cache_write": 0,
        "fill": None,
    }
    assert (turn["input"], turn["cache_read"], turn["output"]) == (400 + 1000, 600, 20)


def test_long_unchanged_runs_are_counted_not_drawn() -> None:
    keys = [(seq, 0) for seq in range(20)]
    before = _transcript(1, keys, {})
    after = _transcript(2, [*keys[:10], (99, 0), *keys[10:]], {})
    rows = diff_rows("s", before, after, {})
    assert [(r["status"], r.get("count")) for r in rows] == [
        ("skipped", 7),
        *[("same", None)] * 3,
        ("added", None),
        *[("same", None)] * 3,
        ("skipped", 7),
    ]
    assert [r["new"]["origin"] for r in rows if r["status"] == "same"] == [7, 8, 9, 10, 11, 12]
    assert [r["status"] for r in diff_rows("s", before, before, {})] == ["skipped"]


def test_the_system_prompt_is_shown_above_the_messages_as_of_the_seq(
    client: TestClient, db_path: Path
) -> None:
    """The system prompt the model had as of ``at`` (the last ``run_started``'s, as ``flightlog replay``
    prints it), folded above the messages; none before the first run; hostile text inert in it."""
    with SqliteStore(db_path) as store:
        rec = Recorder.create(store, task="prompted", session_id="conv-prompted")
        rec.append(RunStarted(run_id="r1", goal="first", system_prompt="You are terse."))
        rec.append(LlmCompleted(turn=1, message=Message(role="assistant", content=[TextPart(text="ok")])))
        rec.append(RunStarted(run_id="r2", goal="second", system_prompt=f"Be careful {SCRIPT}"))
        assert transcripts(store, "conv-prompted", [0, 1, 2])[0][1].system_prompt == "You are terse."
    first = client.get("/conversation", params={"id": "conv-prompted", "at": 1}).text
    assert "System prompt (14 characters)" in first and "You are terse." in first
    last = client.get("/conversation", params={"id": "conv-prompted"}).text
    assert "You are terse." not in last and "Be careful &lt;script&gt;alert(1)&lt;/script&gt;" in last
    assert "<script>alert" not in last
    with SqliteStore(db_path) as store:
        assert conversation(store, "conv-prompted", 1, None)["system_prompt"] == "You are terse."
        assert conversation(store, "conv-prompted", -1, None)["system_prompt"] is None
