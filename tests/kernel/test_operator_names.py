"""Approvals name their approver (issue 10, item 7).

``approve --as alice`` records ``permission_resolved(responder="user")`` (the seed's "user" | "policy_gate")
and the operator's name in the ``approval_decision`` record; ``show``, ``tail`` and ``pending`` show that
name (they showed "approved by user"). Operator names with control, format (bidi, zero-width), separator
or other-space characters are refused with one line naming the option, exit 2, in the CLI and the API.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flightlog.events import Custom, PermissionResolved
from flightlog.kernel import InvalidOperator, approve, deny, operator_problem, pending
from flightlog.narration import printable
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore
from flightlog.web.views import visible

from . import cli_agents
from .helpers import cli

pytestmark = pytest.mark.usefixtures("fresh_notes")


def _suspended(db: Path) -> str:
    code, out, err = cli(
        db, "run", "kernel.cli_agents:approval_agent", "--goal", "take a note", "--json", "-q"
    )
    assert code == 3, err
    return str(json.loads(out)["session_id"])


def test_show_tail_and_pending_name_the_operator(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    code, out, err = cli(db, "approve", sid, "n1", "--as", "alice")
    assert code == 0, err

    with SqliteStore(db, read_only=True) as store:
        events = [e for _row, e in iter_events(store, sid)]
    resolved = [e for e in events if isinstance(e, PermissionResolved) and e.responder != "policy_gate"]
    assert [(e.approved, e.responder) for e in resolved] == [(True, "user")]  # the seed's field, kept
    decision = next(e for e in events if isinstance(e, Custom) and e.custom_kind == "approval_decision")
    assert decision.payload["responder"] == "alice"

    code, out, err = cli(db, "show", sid)
    assert code == 0, err
    assert "call n1 approved by alice" in out
    assert "approved by user" not in out  # the seed responder is shown as a field, not as a name
    assert "approved (responder: user)" in out

    code, out, err = cli(db, "tail", sid)
    assert code == 0, err
    assert "call n1 approved by alice" in out

    code, out, err = cli(db, "pending")
    assert code == 0, err
    assert "n1  note(" in out and "approved by alice" in out and f"flightlog resume {sid}" in out
    code, out, err = cli(db, "pending", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["call_id"], r["decision"], r["decided_by"], r["tool"]) for r in rows] == [
        ("n1", "approved", "alice", "note")
    ]

    code, out, err = cli(db, "resume", sid)
    assert code == 0, err
    assert cli_agents.NOTES == ["hello"]
    code, out, _ = cli(db, "pending")
    assert "nothing is waiting" in out  # resumed: nothing decided is left waiting


def test_a_denial_names_the_operator_and_the_reason(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    code, _, err = cli(db, "deny", sid, "n1", "--as", "Bob O'Neil", "--reason", "not today")
    assert code == 0, err
    code, out, _ = cli(db, "show", sid)
    assert "call n1 denied by Bob O'Neil: not today" in out
    code, out, _ = cli(db, "pending")
    assert "denied by Bob O'Neil" in out


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        pytest.param("al\x1bice", "U+001B, a control character", id="escape"),
        pytest.param("ali\nce", "U+000A, a control character", id="newline"),
        pytest.param("a\tb", "U+0009", id="tab"),
        pytest.param("bob\u202e", "U+202E, a format character", id="bidi-override"),
        pytest.param("b\u2066o\u2069b", "U+2066", id="bidi-isolate"),
        pytest.param("zero\u200bwidth", "U+200B", id="zero-width-space"),
        pytest.param("x\u2028y", "U+2028, a line separator", id="line-separator"),
        pytest.param("x\u2029y", "U+2029, a paragraph separator", id="paragraph-separator"),
        pytest.param("ann\u00a0lee", "U+00A0, a space other than U+0020", id="no-break-space"),
        pytest.param("a\ufe0fb", "U+FE0F, a variation selector", id="variation-selector"),
        pytest.param("tag\U000e0041", "U+E0041", id="tag-character"),
        pytest.param("p\ue000", "U+E000, a private-use character", id="private-use"),
        pytest.param(" alice", "a space at the start", id="leading-space"),
        pytest.param("alice ", "a space at the end", id="trailing-space"),
        pytest.param("o" * 81, "81 characters; at most 80", id="too-long"),
        pytest.param("", "empty", id="empty"),
    ],
)
def test_bad_operator_names_are_refused_naming_the_option(tmp_path: Path, name: str, needle: str) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    with SqliteStore(db, read_only=True) as store:
        head = store.get_session(sid).head_seq
    for command in (
        ["approve", sid, "n1", "--as", name],
        ["deny", sid, "n1", "--reason", "no", "--as", name],
    ):
        code, out, err = cli(db, *command)
        assert code == 2, (out, err)
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("flightlog: error: --as: invalid operator name: ") and needle in lines[0]
        if name.strip():
            assert name not in err  # the reason names the code point; the raw name is never echoed
    with SqliteStore(db, read_only=True) as store:
        assert store.get_session(sid).head_seq == head  # nothing recorded
        assert [(c.call_id, c.decision) for c in pending(store, sid, decided=True)] == [("n1", None)]


def test_the_python_api_refuses_them_too(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    sid = _suspended(db)
    with SqliteStore(db) as store:
        head = store.get_session(sid).head_seq
        with pytest.raises(InvalidOperator, match=r"U\+202E") as info:
            approve(store, sid, "n1", responder="evil\u202egnp.exe")
        assert isinstance(info.value, ValueError) and "\u202e" not in str(info.value)
        with pytest.raises(InvalidOperator, match="at most 80"):
            deny(store, sid, "n1", responder="x" * 200)
        assert store.get_session(sid).head_seq == head
        verdict = approve(store, sid, "n1", responder="Zoë Ødegaard-李")  # letters of any script are fine
        assert verdict.responder == "Zoë Ødegaard-李"


def test_a_name_recorded_before_the_rule_is_shown_escaped(tmp_path: Path) -> None:
    """Ledgers written before the rule (or by other writers) may hold such names: ``show`` prints them with
    the invisible characters as ``[U+XXXX]``, never raw (no terminal escapes, no reordered text)."""
    db = tmp_path / "k.db"
    sid = _suspended(db)
    from flightlog.kernel import approvals

    with SqliteStore(db) as store, pytest.MonkeyPatch.context() as patch:
        patch.setattr(approvals, "check_operator", lambda name: name)  # as an older flightlog wrote it
        approve(store, sid, "n1", responder="mal\x1b[2Jlory\u202e")
    code, out, _ = cli(db, "show", sid)
    assert code == 0
    assert "approved by mal[U+001B][2Jlory[U+202E]" in out and "\x1b" not in out and "\u202e" not in out
    code, out, _ = cli(db, "pending")
    assert code == 0
    assert "approved by mal[U+001B][2Jlory[U+202E]" in out and "\x1b" not in out


_NAME_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(deadline=None)  # a loaded machine must not fail a pure check on time
@given(st.text(_NAME_CHARS, max_size=90))
def test_an_accepted_name_reads_as_recorded_everywhere(name: str) -> None:
    """Property: every name the rule accepts is shown unchanged by the CLI's and the dashboard's escaping,
    and every name it refuses holds a character one of them would rewrite, or breaks the length or space
    rule."""
    problem = operator_problem(name)
    if problem is None:
        assert 1 <= len(name) <= 80 and name == name.strip(" ")
        assert printable(name) == name and visible(name) == name
    else:
        shown = printable(name) != name or visible(name) != name
        spaces = any(unicodedata.category(c) == "Zs" and c != " " for c in name)
        assert shown or spaces or not name or len(name) > 80 or name != name.strip(" ")
