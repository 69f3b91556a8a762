"""The ``external_effects`` table never decides what an effect did (attack pass, session 18: a2, a10).

A real ``flightlog run`` subprocess charges a card (a line appended to a file), prints ``CHARGED 5`` and
blocks; the test SIGKILLs it once it reads that line: the effect happened, its completion is not recorded
(in doubt). Then the attacker, who can write the database but not read the log key, edits it:

* the effect's row says completed with a forged result: ``audit`` passed and ``resume`` fed the model
  "FORGED: refunded 1000"; now ``audit`` names the effect and the intent's seq, ``resume`` refuses, and
  nothing is fed to the model;
* the row is deleted: ``resume`` charged the card again (a second intent for the same key); now it refuses
  and the card is charged once;
* the intent's arguments are rewritten (amount 999) and the chain, head hash and tree head recomputed: the
  intent was the unsigned tail while the tool ran; now a signed checkpoint covers it before the tool runs,
  and its ``intent_hash`` is checked against the intent.

Every scenario on both backends; the untouched run is the control (in doubt, nothing diverges).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from flightlog.encoding import decode_stored
from flightlog.events import Custom
from flightlog.integrity.effects import table_divergences
from flightlog.integrity.verify import audit_session
from flightlog.recorder import Recorder
from flightlog.store import open_store

from .helpers import cli, execute, rechain

TESTS = Path(__file__).parents[1]
SPEC = "kernel.cli_agents:charging_agent"
SID = "pay"
KEY = f"{SID}:1:c1"
FORGED = '{"is_error":false,"output":"FORGED: refunded 1000"}'


def _killed_after_the_charge(db: str, charges: Path, tmp_path: Path) -> int:
    """``flightlog run`` the charging agent, SIGKILLed once its tool printed ``CHARGED 5`` (the charge is
    written, its completion is not); returns the seq of the effect's intent."""
    env = {
        **os.environ,
        "CLI_AGENTS_CHARGES": str(charges),
        "CLI_AGENTS_HOLD": "1",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "flightlog", "--db", db, "run", SPEC, "--goal", "pay", "--session", SID]
    with (
        (tmp_path / "run.stderr").open("w") as stderr,
        subprocess.Popen(
            [*command, "-q"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        ) as proc,
    ):
        charged = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip() == "CHARGED 5":
                    charged.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert charged.wait(300), (tmp_path / "run.stderr").read_text()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(120)
            reader.join(120)
    assert proc.returncode == -signal.SIGKILL
    assert charges.read_text() == "charge 5\n"
    (seq,) = [seq for seq, kind in _effect_events(db) if kind == "external_effect_intent"]
    return seq


def _effect_events(db: str) -> list[tuple[int, str]]:
    """``(seq, custom_kind)`` of the session's effect events."""
    with open_store(db) as store:
        found = []
        for row in store.read_events(SID):
            event = decode_stored(row.event_bytes, seq=row.seq)
            if isinstance(event, Custom) and event.custom_kind.startswith("external_effect_"):
                found.append((row.seq, event.custom_kind))
        return found


def _ledger(db: str) -> list[bytes]:
    with open_store(db) as store:
        return [row.event_bytes for row in store.read_events(SID)]


def _audit(db: str) -> tuple[int, dict[str, object], str]:
    code, out, err = cli(db, "audit", SID, "--json", "--offline")
    (report,) = json.loads(out)
    return code, report, err


def test_an_untouched_run_killed_mid_effect_is_in_doubt_and_diverges_nowhere(
    url: str, tmp_path: Path
) -> None:
    charges = tmp_path / "charges.txt"
    seq = _killed_after_the_charge(url, charges, tmp_path)
    code, report, err = _audit(url)
    assert (code, report["divergences"]) == (0, []), err
    # the intent is signed before the tool ran: a checkpoint covers every event, the intent the last
    assert report["events"] == seq + 1 and report["anchored"] == seq + 1 and report["unanchored"] is None
    code, out, err = cli(url, "resume", SID, "-q")
    assert code == 3 and "suspended (effect_in_doubt)" in out, (out, err)  # a human decides, as before
    assert charges.read_text() == "charge 5\n"


def _forge_completion(url: str) -> None:
    execute(
        url,
        "UPDATE external_effects SET status = 'completed', completed_at_ms = 1, "
        f"result_json = '{FORGED}' WHERE session_id = '{SID}'",
    )


def _delete_row(url: str) -> None:
    execute(url, f"DELETE FROM external_effects WHERE session_id = '{SID}'")


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (
            _forge_completion,
            "its external_effects row says completed, with a result the ledger never recorded: the ledger "
            "holds its intent at seq {seq} and no completion (in doubt)",
        ),
        (_delete_row, "no external_effects row for its intent at seq {seq}"),
    ],
    ids=["forged_completion", "deleted_row"],
)
def test_an_edited_effect_row_is_refused_naming_the_effect_and_its_seq(
    url: str, tmp_path: Path, tamper: Callable[[str], None], said: str
) -> None:
    charges = tmp_path / "charges.txt"
    seq = _killed_after_the_charge(url, charges, tmp_path)
    tamper(url)
    before = _ledger(url)
    detail = f"effect {KEY}: {said.format(seq=seq)}"

    code, report, err = _audit(url)
    assert code == 1, err
    assert report["divergences"] == [{"seq": seq, "reason": "effect_mismatch", "detail": detail}]
    code, out, err = cli(url, "audit", SID, "--offline")
    assert code == 1 and f"seq {seq}: effect_mismatch ({detail})" in out, (out, err)

    code, out, err = cli(url, "resume", SID, "-q")
    assert code == 1 and f"diverges at sequence {seq}: effect_mismatch: {detail}" in err, (out, err)
    # nothing was fed to the model, nothing ran again, nothing was written
    assert _ledger(url) == before and not any(b"FORGED" in data for data in before)
    assert charges.read_text() == "charge 5\n"
    assert _effect_events(url) == [(seq, "external_effect_intent")]


def test_a_rewritten_intent_is_refused_by_its_signature_and_its_hash(url: str, tmp_path: Path) -> None:
    charges = tmp_path / "charges.txt"
    seq = _killed_after_the_charge(url, charges, tmp_path)

    def amount_999(at: int, data: bytes) -> bytes:
        return data.replace(b'"amount":5', b'"amount":999') if at == seq else data

    rechain(url, SID, amount_999, drop_checkpoints=False)  # chain, head hash and tree head recomputed
    code, report, err = _audit(url)
    assert code == 1, err
    found = {(d["seq"], d["reason"]) for d in report["divergences"]}  # type: ignore[attr-defined]
    assert {
        (seq, "checkpoint_mismatch"),  # the intent is signed: the signed root differs
        (seq, "intent_hash_mismatch"),  # its intent_hash is the original intent's
        (seq, "effect_mismatch"),  # its row holds the original intent
    } <= found
    code, out, err = cli(url, "resume", SID, "-q")
    assert code == 1 and f"diverges at sequence {seq}" in err, (out, err)
    assert charges.read_text() == "charge 5\n"


def test_an_unsigned_intent_rewritten_with_its_row_is_caught_by_its_hash(url: str) -> None:
    """Without a notary nothing is signed; an intent whose arguments were rewritten (the chain recomputed),
    its row's intent rewritten to match, still diverges: its event's ``intent_hash`` is the original
    intent's."""
    with open_store(url) as store:
        recorder = Recorder.create(store, session_id=SID)
        recorder.record_intent("k1", {"tool": "charge", "arguments": {"amount": 5}})
        seq = recorder.next_seq - 1
        assert audit_session(store, SID, heads=None).ok

    rechain(url, SID, lambda at, data: data.replace(b'"amount":5', b'"amount":999'))
    execute(
        url,
        'UPDATE external_effects SET intent_json = \'{"arguments":{"amount":999},"tool":"charge"}\'',
    )
    with open_store(url) as store:
        report = audit_session(store, SID, heads=None)
    assert [(d.seq, d.reason) for d in report.divergences] == [(seq, "intent_hash_mismatch")]
    assert report.divergences[0].detail.startswith("effect k1: the intent hashes to")


def test_rows_and_intents_written_while_the_table_is_read_are_not_divergences(url: str) -> None:
    """A reader reads the head, then the table, then the events (as ``audit_session`` does): an intent and
    a completion a live writer commits after the table was read are past that head, so their rows are not
    required; read after them, every row must match."""
    with open_store(url) as store:
        recorder = Recorder.create(store, session_id=SID)
        recorder.record_intent("k1", {"op": 1})
        recorder.record_intent("k2", {"op": 2})
        recorder.complete_effect("k1", {"ok": 1})
        through = store.get_session(SID).head_seq
        rows = store.session_effects(SID)  # read now; the writer goes on
        recorder.complete_effect("k2", {"ok": 2})
        recorder.record_intent("k3", {"op": 3})
        report = audit_session(store, SID, heads=None)  # the events, read after
        assert report.ok, report.divergences
        head = report.events - 1
        assert table_divergences(report.effects, rows, through=through, head=head) == []
        late = table_divergences(report.effects, rows, through=head, head=head)  # as if read after them
        assert [(d.seq, d.reason) for d in late] == [(head - 1, "effect_mismatch"), (head, "effect_mismatch")]
        assert "k2: its external_effects row says pending (in doubt)" in late[0].detail
        assert "k3: no external_effects row for its intent" in late[1].detail


def test_a_row_without_intent_is_named_at_the_head(url: str) -> None:
    with open_store(url) as store:
        recorder = Recorder.create(store, session_id=SID)
        recorder.record_custom("note", {"n": 1})
        store.record_intent(SID, "ghost", "00" * 32, "{}")  # a row no ledger event records
        report = audit_session(store, SID, heads=None)
    assert [(d.seq, d.reason) for d in report.divergences] == [(0, "effect_mismatch")]
    assert report.divergences[0].detail == (
        "effect ghost: its external_effects row (status 'pending') has no external_effect_intent in the "
        "ledger: a row the ledger does not record"
    )
