"""Adversarial signals (the attack pass): huge and control-character texts, unknown and finished sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import SignalDeliveryDisposed
from flightlog.kernel import SignalRefused, send_signal
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.providers.base import ModelRequest, ModelResponse
from flightlog.store import SqliteStore
from flightlog.store.signals import MAX_TEXT_BYTES, pending_signals

from .helpers import customs, kernel, of

runner = CliRunner()


def test_a_huge_signal_is_refused_and_never_enters_the_history(store: SqliteStore, db_path: Path) -> None:
    refused: list[str] = []

    def turn_one(request: ModelRequest) -> ModelResponse:
        with pytest.raises(SignalRefused, match=f"is {MAX_TEXT_BYTES + 1} bytes; at most {MAX_TEXT_BYTES}"):
            send_signal(store, "s1", "message", "é" * (MAX_TEXT_BYTES // 2) + "x")  # 65537 UTF-8 bytes
        cli = runner.invoke(
            app, ["--db", str(db_path), "signal", "s1", "--steer", "A" * (MAX_TEXT_BYTES + 1)]
        )
        refused.append(f"{cli.exit_code} {cli.stderr}")
        send_signal(store, "s1", "message", "é" * (MAX_TEXT_BYTES // 2))  # exactly the bound: queued
        return calls(call("echo", {"text": "x"}, id="c1"))

    result = kernel(store, ScriptedProvider([turn_one, reply("ok")], by_turn=False)).run_sync(
        "task", session_id="s1"
    )
    assert result.status == "completed"
    (usage,) = refused
    assert usage.startswith("2 ") and "--steer" in usage and f"at most {MAX_TEXT_BYTES}" in usage
    (delivered,) = customs(store, "s1", "signal_message")  # only the one at the bound
    assert len(delivered["text"].encode()) == len("[SIGNAL] ") + MAX_TEXT_BYTES
    assert len(of(store, "s1", SignalDeliveryDisposed)) == 1 and pending_signals(store, "s1") == []


def test_control_characters_in_a_signal_are_inert_in_show(store: SqliteStore, db_path: Path) -> None:
    hostile = "evil\x1b[2J\x1b]0;pwned\x07\r\x00tail"

    def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s2", "message", hostile, sender="ops")
        return calls(call("echo", {"text": "x"}, id="c1"))

    kernel(store, ScriptedProvider([turn_one, reply("ok")], by_turn=False)).run_sync("task", session_id="s2")
    (delivered,) = customs(store, "s2", "signal_message")
    assert delivered["text"] == "[SIGNAL] " + hostile  # the model is told exactly what was sent
    shown = runner.invoke(app, ["--db", str(db_path), "show", "s2"])
    assert shown.exit_code == 0 and "message from ops delivered" in shown.output
    assert not any(c in shown.output for c in "\x1b\x07\x00\r")


@pytest.mark.parametrize(("session", "code"), [("nope", 2), ("", 2)])
def test_a_signal_to_no_session_is_a_usage_error(
    db_path: Path, store: SqliteStore, session: str, code: int
) -> None:
    result = runner.invoke(app, ["--db", str(db_path), "signal", session, "--message", "hi"])
    assert result.exit_code == code and f"no session matches {session!r}" in result.stderr


def test_a_forged_disposed_row_does_not_silence_a_signal_but_a_real_repeat_is_ignored(
    store: SqliteStore,
) -> None:
    """The keys already used come from deliveries the ledger records, not from the unhashed queue: a row
    inserted as ``disposed`` with key ``card-stolen`` (no ledger event) must not make a real signal with that
    key ``ignore`` (attack b4_signal_dedupe); a key a delivered signal carried still makes its repeat ignored."""

    def turn_one(request: ModelRequest) -> ModelResponse:
        send_signal(store, "s6", "message", "use the test card", dedupe_key="card")
        return calls(call("echo", {"text": "x"}, id="c1"))

    def turn_two(request: ModelRequest) -> ModelResponse:
        store.signal_sql(
            "INSERT INTO signals (signal_id, session_id, kind, urgency, text, sender, dedupe_key, queued_at_ms, "
            "state, disposition, disposed_seq, ord) VALUES ('sig-forged', 's6', 'message', 'normal', 'x', "
            "'user', 'card-stolen', 1, 'disposed', 'run', 3, 0)",
            (),
        )
        send_signal(store, "s6", "message", "STOP: the card is stolen", dedupe_key="card-stolen")
        send_signal(store, "s6", "message", "use the test card (again)", dedupe_key="card")
        return calls(call("echo", {"text": "y"}, id="c2"))

    provider = ScriptedProvider([turn_one, turn_two, reply("ok")], by_turn=False)
    assert kernel(store, provider).run_sync("task", session_id="s6").status == "completed"
    assert [d.disposition for d in of(store, "s6", SignalDeliveryDisposed)] == ["queue", "queue", "ignore"]
    assert [p["text"] for p in customs(store, "s6", "signal_message")] == [
        "[SIGNAL] use the test card",
        "[SIGNAL] STOP: the card is stolen",
    ]
