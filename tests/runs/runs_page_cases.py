"""The paged runs list's behaviour, shared by the SQLite and PostgreSQL test modules."""

from __future__ import annotations

from flightlog import events as ev
from flightlog.messages import Message
from flightlog.recorder import Recorder
from flightlog.runs import list_runs, rebuild_projection, run_page
from flightlog.runs.page import RunPage
from flightlog.store import Store

GOALS = ["Fix the failing build", "Write the release notes", 'Quote "this" \\ here', "Résumé du café"]


def record_runs(store: Store, count: int = 12) -> None:
    """``count`` runs started 1 s apart (``r00`` oldest); every third finished, every fourth a child of
    ``r00``; run 5 says "needle" in an assistant message."""
    for n in range(count):
        recorder = Recorder.create(
            store,
            session_id=f"r{n:02d}",
            created_at_ms=1_700_000_000_000 + n * 1000,
            parent_session_id="r00" if n and n % 4 == 0 else None,
            source="kernel",
        )
        recorder.append(ev.RunStarted(run_id=f"r{n:02d}", goal=GOALS[n % len(GOALS)]))
        text = "found the NEEDLE here" if n == 5 else "nothing to see"
        recorder.append(ev.LlmCompleted(turn=1, message=Message.text("assistant", text)))
        if n % 3 == 0:
            recorder.append(ev.RunTerminal(reason="completed", turns_used=1, total_tokens=10))


def pages(store: Store, **filters: object) -> list[list[str]]:
    """Every page of a listing, 5 rows per page, as run ids."""
    out: list[list[str]] = []
    cursor: str | None = None
    while True:
        page: RunPage = run_page(store, limit=5, cursor=cursor, **filters)  # type: ignore[arg-type]
        out.append([entry.run_id for entry in page.entries])
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def every(store: Store, **filters: object) -> list[str]:
    """Every page's run ids, in order."""
    return [run_id for page in pages(store, **filters) for run_id in page]


def check_pages(store: Store) -> None:
    record_runs(store)
    newest = [f"r{n:02d}" for n in range(11, -1, -1)]
    assert pages(store) == [newest[:5], newest[5:10], newest[10:]]
    assert every(store, descending=False) == newest[::-1]
    assert every(store, state="terminal") == ["r09", "r06", "r03", "r00"]
    assert every(store, state="running") == [r for r in newest if int(r[1:]) % 3]
    assert every(store, parent="r00") == ["r08", "r04"]
    start = 1_700_000_000_000
    assert every(store, since_ms=start + 3000, until_ms=start + 6000) == ["r05", "r04", "r03"]
    assert every(store, text="needle") == ["r05"]  # a message, ASCII case folded
    assert every(store, text='"this" \\') == ["r10", "r06", "r02"]  # a goal, JSON-escaped
    assert every(store, text="Résumé du") == ["r11", "r07", "r03"]
    assert every(store, text="not anywhere") == []
    updated = every(store, sort="updated")
    assert sorted(updated) == sorted(newest)
    assert updated == [s.run_id for s in list_runs(store)]  # the same order as the full listing
    wires = {entry.run_id: entry.wire for entry in run_page(store, limit=100).entries}
    assert wires == {snapshot.run_id: snapshot.model_dump_json() for snapshot in list_runs(store)}
    rebuild_projection(store)  # rebuilt rows keep their start
    assert pages(store) == [newest[:5], newest[5:10], newest[10:]]
