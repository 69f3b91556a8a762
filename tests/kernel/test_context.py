"""The kernel manages its own context: window accounting, compaction, paging, renewal, provable requests."""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from child_lines import read_line
from flightlog.cli import app
from flightlog.events import (
    Compressed,
    ContextRenewed,
    PageIn,
    PageOut,
    Rollbacked,
    RunTerminal,
    SessionEvent,
)
from flightlog.kernel import Agent, Kernel
from flightlog.kernel.context import ContextPolicy, ContextWindow, window_for
from flightlog.kernel.requests import check_requests, program_of
from flightlog.kernel.scripted import ScriptedProvider, SummaryProvider, call, calls, reply
from flightlog.kernel.state import load_state
from flightlog.messages import ToolResultPart
from flightlog.providers._sdk import provider_error
from flightlog.providers.base import ProviderError, Usage
from flightlog.providers.cassette import load_cassette
from flightlog.recorder import verify_session
from flightlog.sessions import archive_loader, iter_events, replay_session
from flightlog.store import SqliteStore, open_store

from . import context_agent
from .helpers import Sleeps, customs, echo, kinds, of, zygote_process

HERE = Path(__file__).parent


def pairs(store: SqliteStore, sid: str) -> list[tuple[int, SessionEvent]]:
    return [(row.seq, event) for row, event in iter_events(store, sid)]


def checked(store: SqliteStore, sid: str) -> Any:
    return check_requests(pairs(store, sid), loader=archive_loader(store))


def call_ids(messages: list[Any]) -> list[str]:
    return [p.call_id for m in messages for p in m.content if isinstance(p, ToolResultPart)]


# ─── window accounting ────────────────────────────────────────────────────────────────────────


def test_windows_of_the_cassette_models_are_known_and_overridable() -> None:
    assert window_for("claude-sonnet-4-20250514") == ContextWindow(200_000, 64_000)
    assert window_for("gpt-4o-2024-08-06") == ContextWindow(128_000, 16_384)
    assert window_for("gpt-4o-mini-2099-01-01") == ContextWindow(128_000, 16_384)  # undated fallback
    assert window_for("gpt-5.5") is None  # not guessed
    assert window_for("gpt-5.5", {"gpt-5.5": ContextWindow(10, 1)}) == ContextWindow(10, 1)
    policy = ContextPolicy.from_dict(
        {"compact_at": 0.8, "windows": {"m": {"tokens": 900, "output_reserve": 100}}}
    )
    assert policy.window("m") == ContextWindow(900, 100) and policy.compact_at == 0.8
    with pytest.raises(ValueError, match="unknown"):
        ContextPolicy.from_dict({"compact_at": 0.8, "colour": "red"})


def test_each_call_records_its_window_fill_from_reported_usage(store: SqliteStore) -> None:
    agent, _provider, _summarizer = context_agent.build(5)
    result = Kernel(store, agent).run_sync("do all the steps")
    assert result.status == "completed"
    invoked = customs(store, result.session_id, "prompt_program_invoked")
    usages = customs(store, result.session_id, "model_usage")
    assert [c["context"]["basis"] for c in invoked] == ["estimate"] + ["reported+estimate"] * 5
    for call_, usage in zip(invoked, usages, strict=True):
        context = call_["context"]
        assert (context["tokens"], context["output_reserve"]) == (
            context_agent.WINDOW,
            context_agent.MAX_TOKENS,
        )
        # StepProvider reports request_chars / 4 tokens; after the first call the estimate is exact
        assert usage["input_tokens"] == -(-call_["request_chars"] // 4)
        if context["basis"] == "reported+estimate":
            assert abs(context["fill_tokens"] - usage["input_tokens"]) <= 1
        assert context["fill_ratio"] == round(
            context["fill_tokens"] / (context_agent.WINDOW - context_agent.MAX_TOKENS), 4
        )


# ─── a long run in a small window ─────────────────────────────────────────────────────────────


def long_run(store: SqliteStore, steps: int) -> tuple[str, Any, Any]:
    agent, provider, summarizer = context_agent.build(steps)
    result = Kernel(store, agent).run_sync("do all the steps")
    assert result.status == "completed", result.detail
    assert result.final_message == f"all {steps} steps done"
    return result.session_id, provider, summarizer


def check_long_run(store: SqliteStore, sid: str, steps: int) -> None:
    events = pairs(store, sid)
    state = load_state(store, sid)
    assert state.final_message() == f"all {steps} steps done"
    usable = context_agent.WINDOW - context_agent.MAX_TOKENS
    kernel_calls = [c for c in customs(store, sid, "prompt_program_invoked") if c["actor"] == "kernel"]
    assert all(c["context"]["fill_tokens"] <= usable for c in kernel_calls)
    compressions = of(store, sid, Compressed)
    assert compressions and all(c.action in ("context_collapse", "auto_compact") for c in compressions)
    for c in compressions:
        low, high = c.archived_seq_range
        assert 0 < low <= high and c.summary and c.summary_tokens and c.preserved_refs == ["goal"]
        archived_kinds = {events[s][1].kind for s in range(low, high + 1)}
        assert "run_started" not in archived_kinds
    paged = of(store, sid, PageOut)
    assert {p.action for p in paged} == {"micro_compact", *(c.action for c in compressions)}
    assert all(p.archive_ref and p.archive_ref.startswith("sha256:") for p in paged)
    assert checked(store, sid).ok and checked(store, sid).checked == len(
        customs(store, sid, "prompt_program_invoked")
    )
    history = replay_session(store, sid)
    assert history == state.history()
    ids = call_ids(history)
    assert len(ids) == len(set(ids))  # nothing twice
    assert verify_session(store, sid).ok


def test_a_run_outgrowing_its_window_compacts_pages_and_finishes(store: SqliteStore) -> None:
    sid, provider, summarizer = long_run(store, 60)
    assert provider.overflows == 0 and provider.peak_tokens <= context_agent.WINDOW - context_agent.MAX_TOKENS
    check_long_run(store, sid, 60)
    started = customs(store, sid, "compaction_started")
    assert summarizer.calls == len(started) == len(of(store, sid, Compressed))
    assert started[0]["trigger"] == "threshold"
    # the summary calls are model calls like any other: usage recorded, tokens counted in the budget
    usage = customs(store, sid, "model_usage")
    assert sum(1 for u in usage if u.get("purpose") == "compaction") == summarizer.calls
    assert load_state(store, sid).tokens_used == sum(u["total_tokens"] for u in usage)


@pytest.mark.slow
def test_three_hundred_turns_stay_in_a_four_thousand_token_window(store: SqliteStore) -> None:
    sid, provider, _summarizer = long_run(store, 300)
    assert provider.calls == 301 and provider.overflows == 0
    check_long_run(store, sid, 300)


def test_replay_at_shows_what_the_model_saw(store: SqliteStore) -> None:
    sid, _provider, _summarizer = long_run(store, 30)
    events = pairs(store, sid)
    for seq, event in events:
        if (
            getattr(event, "custom_kind", None) == "prompt_program_invoked"
            and event.payload["actor"] == "kernel"
        ):
            messages = replay_session(store, sid, at=seq)
            texts = [m.to_wire() for m in messages]
            assert json.dumps(texts, sort_keys=True)  # rebuildable
    assert checked(store, sid).ok


# ─── "context too long" from the provider ─────────────────────────────────────────────────────


RECORDED_ERRORS = HERE.parent / "data/provider/errors/context-overflow.json"
"""Provider answers really sent for requests that did not fit (each with the report that quotes it)."""


def recorded_error(error_id: str) -> dict[str, Any]:
    recorded = json.loads(RECORDED_ERRORS.read_text())["responses"]
    (found,) = [r for r in recorded if r["id"] == error_id]
    return dict(found)


def sdk_overflow(sdk_name: str, error_id: str, url: str, where: str) -> ProviderError:
    """The SDK's exception for a recorded overflow answer, mapped by the adapters' error mapping."""
    sdk = pytest.importorskip(sdk_name)
    import httpx2

    recorded = recorded_error(error_id)
    request = httpx2.Request("POST", url)
    response = httpx2.Response(
        recorded["status"],
        content=recorded["body"].encode(),
        headers={"content-type": "application/json"},
        request=request,
    )
    client = sdk.Anthropic(api_key="k") if sdk_name == "anthropic" else sdk.OpenAI(api_key="k")
    error = provider_error(client._make_status_error_from_response(response), sdk, where)
    assert error is not None
    return error


def anthropic_overflow() -> ProviderError:
    """A real Anthropic "prompt is too long" 400 (boldsoftware/exe.dev#62), as the adapter maps it."""
    return sdk_overflow(
        "anthropic",
        "anthropic-prompt-too-long",
        "https://api.anthropic.com/v1/messages",
        "anthropic.messages claude-sonnet-4-0",
    )


def openai_overflow() -> ProviderError:
    """A real OpenAI ``context_length_exceeded`` 400 (mckaywrigley/chatbot-ui#102), as the adapter maps it."""
    return sdk_overflow(
        "openai",
        "openai-chat-context-length-exceeded",
        "https://api.openai.com/v1/chat/completions",
        "openai.chat gpt-4o",
    )


def test_overflow_shapes_are_recognised_and_other_400s_are_not() -> None:
    assert anthropic_overflow().context_overflow and not anthropic_overflow().retryable
    assert openai_overflow().context_overflow
    openai = pytest.importorskip("openai")
    import httpx2

    # the real 400 recorded in tests/data/provider (a reasoning item replayed alone) is not an overflow
    cassette = (
        HERE.parent / "data/provider/openai-responses/error-400-reasoning-replay-without-following-item.yaml"
    )
    (recorded,) = [i.response for i in load_cassette(cassette) if i.response.status == 400]
    request = httpx2.Request("POST", "https://api.openai.com/v1/responses")
    response = httpx2.Response(
        400, content=recorded.body, headers={"content-type": "application/json"}, request=request
    )
    exc = openai.OpenAI(api_key="k")._make_status_error_from_response(response)
    assert exc.body["type"] == "invalid_request_error"
    mapped = provider_error(exc, openai, "openai.responses gpt-5")
    assert mapped is not None and not mapped.context_overflow


def overflow_agent(script: list[Any]) -> tuple[Agent, ScriptedProvider, SummaryProvider]:
    provider = ScriptedProvider(script, model="claude-sonnet-4-0", by_turn=False)
    summarizer = SummaryProvider()
    agent = Agent(
        name="o", route=[provider], tools=[echo], context=ContextPolicy(summarizer=summarizer, tools=False)
    )
    return agent, provider, summarizer


def three_turns() -> list[Any]:
    return [
        calls(call("echo", {"text": f"step {i} done"}, id=f"c{i}"), usage=Usage(10, 5)) for i in (1, 2, 3, 4)
    ]


@pytest.mark.parametrize("error", [anthropic_overflow, openai_overflow])
def test_a_context_too_long_answer_is_compacted_past(store: SqliteStore, error: Any) -> None:
    agent, provider, summarizer = overflow_agent([*three_turns(), error(), reply("done")])
    result = Kernel(store, agent).run_sync("go")
    sid = result.session_id
    assert result.status == "completed" and summarizer.calls == 1
    (overflow,) = customs(store, sid, "context_overflow")
    assert overflow["turn"] == 5 and overflow["model"] == "claude-sonnet-4-0"
    (started,) = customs(store, sid, "compaction_started")
    assert (started["trigger"], started["action"], started["turn"]) == ("overflow", "auto_compact", 5)
    (compressed,) = of(store, sid, Compressed)
    assert compressed.turn == 5 and compressed.action == "auto_compact"
    # everything but the goal and the last two turns was archived, as whole tool transactions
    assert call_ids(provider.requests[-1].messages) == ["c3", "c4"]
    assert "step 2 done" in provider.requests[-1].messages[1].text_content()  # the summary
    assert [r.turn for r in of(store, sid, Rollbacked)] == [5]
    assert checked(store, sid).ok


def test_a_second_overflow_of_the_same_turn_fails_the_run(store: SqliteStore) -> None:
    agent, _provider, summarizer = overflow_agent(
        [*three_turns(), anthropic_overflow(), anthropic_overflow()]
    )
    result = Kernel(store, agent).run_sync("go")
    assert result.status == "failed" and summarizer.calls == 1
    assert "prompt is too long" in (result.detail or "")


# ─── paging, pinning, renewal ─────────────────────────────────────────────────────────────────


def sized(answer: Any) -> Any:
    """A script item answering ``answer(request)`` with usage as a 4-chars-a-token tokenizer counts it."""

    def item(request: Any) -> Any:
        response = answer(request)
        tokens = -(-program_of("scripted", "step-model", request).request_chars // 4)
        return dataclasses.replace(response, usage=Usage(tokens, 5))

    return item


def test_a_large_output_is_paged_out_and_paged_back_in(store: SqliteStore) -> None:
    agent, _provider, _s = context_agent.build(7)  # step 7's output is large

    def read_back(request: Any) -> Any:
        stub = request.messages[-1].content[0].output
        ref = stub.split("paged out to ")[1].split(";")[0]
        return calls(call("page_in", {"ref": ref}, id="back"))

    steps = [sized(lambda r, i=i: calls(call("work", {"step": i}, id=f"s{i}"))) for i in range(1, 8)]
    script = ScriptedProvider([*steps, sized(read_back), reply("ok")], model="step-model", by_turn=False)
    agent = Agent(name="p", route=[script], tools=[context_agent.work], context=agent.context)
    result = Kernel(store, agent).run_sync("go")
    sid = result.session_id
    assert result.status == "completed"
    (paged,) = [p for p in of(store, sid, PageOut) if p.action == "micro_compact"]
    assert (paged.turn, paged.tier_hint, paged.message_count) == (7, "durable", 1)
    history = replay_session(store, sid)
    stub = next(
        p.output for m in history for p in m.content if isinstance(p, ToolResultPart) and p.call_id == "s7"
    )
    assert stub.startswith("[tool result: s7 | work |") and paged.archive_ref in stub and len(stub) < 1000
    (page_in,) = of(store, sid, PageIn)
    assert page_in == PageIn(turn=8, entry_count=1)
    back = next(
        p.output for m in history for p in m.content if isinstance(p, ToolResultPart) and p.call_id == "back"
    )
    assert "step 7 done" + "x" * 2400 in back
    assert kinds(store, sid).count("page_in") == 1 and checked(store, sid).ok


def test_pinned_results_survive_compaction_verbatim(store: SqliteStore) -> None:
    summarizer = SummaryProvider()
    script = [
        calls(call("echo", {"text": "secret=42"}, id="keep")),
        calls(call("pin", {"call_id": "keep"}, id="p")),
        *three_turns(),
        anthropic_overflow(),
        reply("done"),
    ]
    provider = ScriptedProvider(script, model="claude-sonnet-4-0", by_turn=False)
    agent = Agent(name="pin", route=[provider], tools=[echo], context=ContextPolicy(summarizer=summarizer))
    sid = Kernel(store, agent).run_sync("go").session_id
    assert customs(store, sid, "context_pin") == [{"turn": 2, "call_ids": ["keep"]}]
    (compressed,) = of(store, sid, Compressed)
    assert compressed.preserved_refs == ["goal", "call:keep"]
    assert "[pinned result keep]\nsecret=42" in (compressed.summary or "")
    assert checked(store, sid).ok


def test_renewal_by_policy_restarts_from_a_stored_handoff(store: SqliteStore) -> None:
    agent, _provider, _summarizer = context_agent.build(40, renew_after=1)
    result = Kernel(store, agent).run_sync("do all the steps")
    sid = result.session_id
    assert result.status == "completed"
    renewals = of(store, sid, ContextRenewed)
    assert renewals and [r.sprint for r in renewals] == list(range(1, len(renewals) + 1))
    handoff = archive_loader(store)(renewals[0].handoff_ref)
    assert handoff is not None and handoff[0].text_content().startswith("[context handoff: sprint 1]")
    assert "Goal:\ndo all the steps" in handoff[0].text_content()
    history = replay_session(store, sid)
    assert history[0].text_content().startswith(f"[context handoff: sprint {len(renewals)}]")
    assert checked(store, sid).ok


def test_the_agent_can_renew_its_own_context(store: SqliteStore) -> None:
    script = [
        calls(call("echo", {"text": "a"}, id="c1")),
        calls(call("renew_context", {"progress": "echoed a", "open_items": ["echo b"]}, id="r")),
        reply("done"),
    ]
    provider = ScriptedProvider(script, by_turn=False)
    agent = Agent(name="r", route=[provider], tools=[echo], context=ContextPolicy())
    sid = Kernel(store, agent).run_sync("echo a then b").session_id
    (renewed,) = of(store, sid, ContextRenewed)
    assert (renewed.turn, renewed.sprint) == (2, 1)
    (seen,) = provider.requests[-1].messages
    assert "Progress:\nechoed a" in seen.text_content() and "- echo b" in seen.text_content()
    assert replay_session(store, sid)[0] == seen
    assert checked(store, sid).ok


# ─── provable requests ────────────────────────────────────────────────────────────────────────


def test_check_names_the_first_turn_whose_request_a_changed_event_breaks(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with open_store(str(db)) as store:
        sid, _p, _s = long_run(store, 12)
        assert checked(store, sid).ok
        calls_made = len(customs(store, sid, "prompt_program_invoked"))
    ok = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--check"])
    assert (
        ok.exit_code == 0
        and f"{calls_made} model requests rebuilt from the ledger; all reproduce" in ok.stdout
    )
    with open_store(str(db)) as store:
        target = next(s for s, e in pairs(store, sid) if e.kind == "tool_completed" and e.turn == 4)
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER events_no_update")  # edit the file behind flightlog's back
    (raw,) = con.execute("SELECT event FROM events WHERE session_id=? AND seq=?", (sid, target)).fetchone()
    con.execute(
        "UPDATE events SET event=? WHERE session_id=? AND seq=?",
        (bytes(raw).replace(b"step 4 done", b"step 4 DONE"), sid, target),
    )
    con.commit()
    con.close()
    with open_store(str(db)) as store:
        report = checked(store, sid)
    assert not report.ok and report.first is not None
    assert (report.first.turn, report.first.actor) == (5, "kernel")
    bad = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--check", "--json"])
    assert bad.exit_code == 1
    verdict = json.loads(bad.stdout)
    assert (verdict["ok"], verdict["first"]["turn"], verdict["checked"]) == (False, 5, calls_made)
    text = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--check"])
    assert text.exit_code == 1 and "the request of turn 5 (kernel" in text.stderr


# ─── crashes, including mid-compaction ────────────────────────────────────────────────────────


ZYGOTE = r"""
import json, os, signal, sys, traceback
sys.path.insert(0, sys.argv[1])
import context_agent  # warm: flightlog, pydantic, sqlite3 imported once, before any fork
from flightlog.testing.crashpoints import ENV

print("READY", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 70
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the child's prints stay off the job channel
        try:
            os.environ.pop(ENV, None)
            if job["crash_at"]:
                os.environ[ENV] = job["crash_at"]
            code = context_agent.child_main(job["db"], job["sid"], job["steps"], True)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    print(json.dumps({"killed": killed, "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}), flush=True)
"""

MID_COMPACTION = ("compaction.call", "compaction.archived", "context.rewrite")
"""Crash points inside a compaction: the summary call in flight, the summary back and its archive stored,
an in-place rewrite decided and its originals stored (flightlog.testing.crashpoints)."""

RANDOM_POINTS = {  # point: highest hit count drawn (a turn appends ~6 batches and makes 1 model call)
    "append.committed": 150,
    "append.written": 150,
    "commit.before": 150,
    "model.call": 25,
    "compaction.call": 4,
    "compaction.archived": 4,
    "context.rewrite": 6,
}


@pytest.mark.slow
def test_three_hundred_turns_killed_at_random_points_and_mid_compaction_then_check_passes(
    tmp_path: Path,
) -> None:
    """A 300-turn chatty run in a 4000-token window (it snips, micro-compacts, archives, pages) is SIGKILLed
    again and again at named crash points, mid-compaction included, and resumed each time by a fresh
    process; it finishes inside its window and every request it recorded reproduces."""
    db, sid, steps = str(tmp_path / "c.db"), "crashy", 300
    rng = random.Random(20261202)
    plan = [(point, 1) for point in MID_COMPACTION] + [("compaction.call", 2), ("model.call", 7)]
    killed_at: Counter[str] = Counter()
    with zygote_process(tmp_path, ZYGOTE) as zygote:
        assert zygote.stdin is not None and zygote.stdout is not None
        for round_ in range(80):
            if round_ < len(plan):
                point, hit = plan[round_]
            elif round_ < 40:
                point = rng.choice(sorted(RANDOM_POINTS))
                hit = rng.randint(1, RANDOM_POINTS[point])
            else:
                point, hit = "", 0  # enough kills: let it finish
            job = {"db": db, "sid": sid, "steps": steps, "crash_at": f"{point}:{hit}" if point else ""}
            zygote.stdin.write(json.dumps(job) + "\n")
            zygote.stdin.flush()
            answer = json.loads(read_line(zygote, f"the zygote's answer to job {job}"))
            with open_store(db) as store:
                state = load_state(store, sid)
                assert verify_session(store, sid).ok
            if answer["killed"]:
                killed_at[point] += 1
                if point == "compaction.call":
                    assert state.phase == "compacting"  # killed with the summary call in flight
            else:
                assert answer["code"] == 0, (tmp_path / "zygote.err").read_text()
            if state.phase == "terminal":
                break
    assert "Traceback" not in (tmp_path / "zygote.err").read_text()
    print(f"kills by point: {dict(killed_at)}; rounds: {round_ + 1}")
    assert all(killed_at[point] >= 1 for point in MID_COMPACTION), killed_at
    assert sum(killed_at.values()) >= 20, killed_at
    with open_store(db) as store:
        state = load_state(store, sid)
        assert state.phase == "terminal" and state.final_message() == f"all {steps} steps done"
        assert not customs(store, sid, "context_overflow")  # it never outgrew its window
        actions = {c.action for c in of(store, sid, Compressed)}
        assert {"snip_compact", "micro_compact", "context_collapse"} <= actions
        # a decision killed before it was recorded is made again once, never twice
        rewrites = [(p["turn"], p["action"]) for p in customs(store, sid, "context_rewrite")]
        assert len(rewrites) == len(set(rewrites))
        summaries = [c.turn for c in of(store, sid, Compressed) if c.summary is not None]
        assert len(summaries) == len(customs(store, sid, "compaction_started"))
        usable = context_agent.WINDOW - context_agent.MAX_TOKENS
        kernel_calls = [c for c in customs(store, sid, "prompt_program_invoked") if c["actor"] == "kernel"]
        assert all(c["context"]["fill_tokens"] <= usable for c in kernel_calls)
        report = checked(store, sid)
        assert report.ok and report.checked == len(customs(store, sid, "prompt_program_invoked"))
        history = replay_session(store, sid)
        assert history == state.history()
        ids = call_ids(history)
        assert len(ids) == len(set(ids))  # nothing twice
    assert CliRunner().invoke(app, ["--db", db, "replay", sid, "--check"]).exit_code == 0


# ─── the demo part and the example ────────────────────────────────────────────────────────────


def test_the_demo_shows_a_run_outgrowing_its_window(store: SqliteStore) -> None:
    from io import StringIO

    from rich.console import Console

    from flightlog.cli.demo_context import run_context_demo

    out = StringIO()
    assert (
        run_context_demo(store, Console(file=out, width=200, markup=False, highlight=False)) == 0
    )  # as `demo`
    text = out.getvalue()
    assert "completed after 41 steps: 'all 40 steps done'" in text
    assert "large outputs paged out" in text and "[compressed turn" in text
    assert "model requests rebuilt from the ledger; all reproduce" in text


def test_the_example_runs_from_the_cli_and_its_requests_check(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    spec = str(HERE.parents[1] / "examples" / "context_agent.py") + ":agent"
    ran = CliRunner().invoke(
        app, ["--db", str(db), "run", spec, "--goal", "do all the steps", "--json", "-q"]
    )
    assert ran.exit_code == 0, ran.output
    sid = json.loads(ran.stdout)["session_id"]
    with open_store(str(db)) as store:
        assert of(store, sid, Compressed) and of(store, sid, PageOut)
        at = next(s for s, e in pairs(store, sid) if isinstance(e, Compressed)) + 1
    shown = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--at", str(at), "--json"])
    assert (
        shown.exit_code == 0
        and "[compressed turn" in json.loads(shown.stdout)["messages"][1]["content"][0]["text"]
    )
    check = CliRunner().invoke(app, ["--db", str(db), "replay", sid, "--check"])
    assert check.exit_code == 0 and "all reproduce" in check.stdout


def test_a_failing_summary_call_is_retried_then_replaced_by_the_rule_summary(store: SqliteStore) -> None:
    down = ProviderError("503", retryable=True)
    summarizer = ScriptedProvider([down, down, down], model="summary-model", by_turn=False)
    provider = ScriptedProvider(
        [*three_turns(), anthropic_overflow(), reply("done")], model="claude-sonnet-4-0", by_turn=False
    )
    context = ContextPolicy(summarizer=summarizer, tools=False)
    agent = Agent(name="f", route=[provider], tools=[echo], context=context, max_retries=2, backoff_base_s=0)
    result = Kernel(store, agent, sleep=Sleeps()).run_sync("go")
    sid = result.session_id
    assert result.status == "completed"
    assert customs(store, sid, "compaction_failed") == [
        {"turn": 5, "attempt": 1, "error": "503", "retry": True},
        {"turn": 5, "attempt": 2, "error": "503", "retry": True},
        {"turn": 5, "attempt": 3, "error": "503", "retry": False},
    ]
    (compressed,) = of(store, sid, Compressed)
    assert (compressed.summary or "").startswith("[Compressed: auto_compact]\narchived_messages: 4;")
    assert "decisions:" in (compressed.summary or "") and "next_actions:\n- none" in (
        compressed.summary or ""
    )
    assert (
        checked(store, sid).ok and checked(store, sid).checked == 4 + 1 + 3 + 1
    )  # turns, overflow, summaries, retry


def test_agent_toml_takes_a_context_table(tmp_path: Path) -> None:
    from flightlog.kernel.spec import load_agent

    spec = tmp_path / "agent.toml"
    spec.write_text(
        'name = "t"\n'
        'route = [{ref = "flightlog.kernel.scripted:ScriptedProvider", kwargs = {model = "m"}}]\n'
        "[context]\n"
        "compact_at = 0.8\n"
        "keep_turns = 3\n"
        'summarizer = {ref = "flightlog.kernel.scripted:SummaryProvider"}\n'
        'windows = {"m" = {tokens = 3000, output_reserve = 300}}\n',
        encoding="utf-8",
    )
    agent = load_agent(str(spec))
    assert agent.context is not None and agent.context.window("m") == ContextWindow(3000, 300)
    assert (agent.context.compact_at, agent.context.keep_turns) == (0.8, 3)
    assert isinstance(agent.context.summarizer, SummaryProvider)
    assert [t.name for t in agent.tools] == ["page_in", "pin", "renew_context"]


@pytest.mark.parametrize(("reserve", "asked"), [(10, 10), (0, 4096), (5000, 4096)])
def test_a_requests_max_tokens_is_capped_by_the_windows_output_reserve(
    store: SqliteStore, reserve: int, asked: int
) -> None:
    """``ContextWindow.output_reserve`` says the request's ``max_tokens`` is capped by it: a window
    reserving 10 for the answer must not ask for the agent's 4096 (found by the runtime attack pass,
    ``malformed.py tinywin``); the budget reservation is made for the capped figure. A reserve of 0 caps
    nothing, nor does one above the agent's ``max_tokens``."""
    provider = ScriptedProvider([calls(call("echo", {"text": "x"}, id="c1")), reply("done")], model="tiny")
    # 2000 tokens: a 100-token window cannot hold the four tool specs, and such a request is not sent
    window = ContextWindow(tokens=2000 if reserve < 2000 else 10_000, output_reserve=reserve)
    agent = Agent(
        name="tiny",
        route=[provider],
        tools=[echo],
        context=ContextPolicy(windows={"tiny": window}),
        max_tokens=4096,
    )
    result = Kernel(store, agent).run_sync("go", session_id="s1", handle_signals=False)
    assert result.status == "completed"
    assert [r.max_tokens for r in provider.requests] == [asked, asked]
    usages = customs(store, "s1", "model_usage")
    assert [u["reserved_tokens"] for u in usages] == [asked, asked]


def test_a_summary_requests_max_tokens_is_capped_by_the_summarizers_output_reserve(
    store: SqliteStore,
) -> None:
    """The compaction's summary call is a model call like a turn's: it asks for at most the
    ``output_reserve`` of the summarizer model's window, not ``summary_max_tokens`` (1024) on a window that
    reserves 50 for the answer, and its budget reservation is made for the capped figure."""
    summarizer = ScriptedProvider([reply("step 2 done; summary")], model="small-summarizer", by_turn=False)
    provider = ScriptedProvider(
        [*three_turns(), anthropic_overflow(), reply("done")], model="claude-sonnet-4-0", by_turn=False
    )
    windows = {"small-summarizer": ContextWindow(tokens=8000, output_reserve=50)}
    context = ContextPolicy(windows=windows, summarizer=summarizer, summary_max_tokens=1024, tools=False)
    agent = Agent(name="o", route=[provider], tools=[echo], context=context)
    result = Kernel(store, agent).run_sync("go", session_id="s1", handle_signals=False)
    assert result.status == "completed"
    assert [r.max_tokens for r in summarizer.requests] == [50]
    (usage,) = [u for u in customs(store, "s1", "model_usage") if u.get("purpose") == "compaction"]
    assert usage["reserved_tokens"] == 50
    compactor = [c for c in customs(store, "s1", "prompt_program_invoked") if c["actor"] == "compactor"]
    assert [c["max_tokens"] for c in compactor] == [50]
    assert checked(store, "s1").ok


# ─── a request that cannot fit ────────────────────────────────────────────────────────────────


def tiny_agent(*route: ScriptedProvider) -> Agent:
    """A 1000-token window (100 reserved) and a system prompt of ~10,000 tokens (40,000 characters)."""
    windows = {"tiny": ContextWindow(tokens=1000, output_reserve=100)}
    return Agent(
        name="tiny",
        route=list(route),
        tools=[echo],
        system_prompt="Follow the house rules. " * 1700,
        context=ContextPolicy(windows=windows, summarizer=SummaryProvider(), tools=False),
    )


def test_a_system_prompt_larger_than_the_window_ends_the_run_before_any_call(store: SqliteStore) -> None:
    """No compaction can shrink the system prompt: the run ends ``context_overflow`` without a model call
    (upstream refuses a fixed-context overflow before the provider call), naming the sizes in tokens."""
    provider = ScriptedProvider([reply("done")], model="tiny", by_turn=False)
    result = Kernel(store, tiny_agent(provider)).run_sync("go", session_id="s1", handle_signals=False)
    assert provider.requests == []
    assert (result.status, result.turns, result.tokens) == ("failed", 0, 0)
    (terminal,) = of(store, "s1", RunTerminal)
    assert terminal.reason == "context_overflow"
    (exceeded,) = customs(store, "s1", "context_budget_exceeded")
    assert exceeded["overflow_kind"] == "fixed_context" and exceeded["max_tokens"] == 900
    assert exceeded["required_tokens"] > 10_000 and exceeded["model"] == "tiny"
    assert result.detail == (
        f"context overflow: the system prompt and tools need ~{exceeded['required_tokens']} tokens, "
        "tiny's window holds 900 input tokens"
    )
    assert customs(store, "s1", "compaction_started") == customs(store, "s1", "prompt_program_invoked") == []
    assert verify_session(store, "s1").ok


def test_a_system_prompt_too_large_for_one_window_fails_over_to_the_next(store: SqliteStore) -> None:
    tiny = ScriptedProvider([reply("never")], model="tiny", by_turn=False)
    large = ScriptedProvider([reply("done")], model="claude-sonnet-4-0", by_turn=False)
    result = Kernel(store, tiny_agent(tiny, large)).run_sync("go", session_id="s1", handle_signals=False)
    assert result.status == "completed" and result.final_message == "done"
    assert tiny.requests == [] and len(large.requests) == 1
    (failover,) = customs(store, "s1", "route_failover")
    assert (failover["from_model"], failover["to_model"]) == ("tiny", "claude-sonnet-4-0")
    assert "900 input tokens of tiny's window" in failover["cause"]


def test_a_too_long_answer_with_nothing_to_archive_ends_the_run_without_a_second_call(
    store: SqliteStore,
) -> None:
    """The provider refuses the first request and the forced compaction finds nothing to archive (only the
    goal): the same request would be refused again, so the run ends ``context_overflow`` (upstream's
    overflow ladder) instead of calling again and failing."""
    agent, provider, summarizer = overflow_agent([anthropic_overflow(), reply("never")])
    result = Kernel(store, agent).run_sync("go", session_id="s1", handle_signals=False)
    assert len(provider.requests) == 1 and summarizer.calls == 0
    assert result.status == "failed" and of(store, "s1", RunTerminal)[0].reason == "context_overflow"
    (exceeded,) = customs(store, "s1", "context_budget_exceeded")
    assert (exceeded["overflow_kind"], exceeded["max_tokens"]) == ("provider", 136_000)
    assert result.detail is not None and "claude-sonnet-4-0 refused the request as too long" in result.detail
