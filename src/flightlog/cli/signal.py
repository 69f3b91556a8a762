"""``flightlog signal``: send a running or suspended run a message, a steer or an interrupt.

Mounting (the ``flightlog`` app adds it at top level)::

    from .signal import register as register_signal
    register_signal(app, open_db)     # open_db(read_only: bool) -> context manager yielding a Store

Exit codes: **0** queued (stdout names the signal and when it is delivered); **1** refused (the session
fails the full check ``flightlog audit`` makes, run before anything stored is read, its source included: one
line naming the first divergent seq; or the run has finished: one stderr line naming the session); **2** usage (no or several of
``--message``/``--steer``/``--interrupt``, a text over 65536 UTF-8 bytes, an unknown session, a bad
``--priority`` or ``--as``, a session no flightlog kernel runs: a LangGraph thread, another integration's
session, an imported transcript, which nothing would deliver a signal to; one ``flightlog: error:`` line
saying what works instead, :func:`flightlog.kernel.attention.no_signal_reader`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from .console import console
from .options import SESSION_HELP, session_arg

if TYPE_CHECKING:  # the store loads inside the command: `flightlog --version` stays fast
    from ..store.base import Store
    from ..store.signals import SignalKind

__all__ = ["register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit."""


def _one(message: str | None, steer: str | None, interrupt: str | None) -> tuple[SignalKind, str]:
    from ..store.signals import MAX_TEXT_BYTES

    given: list[tuple[SignalKind, str | None]] = [
        ("message", message),
        ("steer", steer),
        ("interrupt", interrupt),
    ]
    chosen = [(kind, text) for kind, text in given if text is not None]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --message, --steer, --interrupt", param_hint="SIGNAL")
    kind, text = chosen[0]
    assert text is not None
    if not text.strip():
        raise typer.BadParameter("the signal text is empty", param_hint=f"--{kind}")
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise typer.BadParameter(f"{size} bytes; at most {MAX_TEXT_BYTES}", param_hint=f"--{kind}")
    return kind, text


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add ``signal`` to ``app``; ``open_db(read_only)`` opens the store."""
    out = console()

    @app.command("signal")
    def signal_cmd(
        session: Annotated[str, session_arg(f"A running or suspended run. {SESSION_HELP}")],
        message: Annotated[
            str | None, typer.Option("--message", help="A user message for the model.")
        ] = None,
        steer: Annotated[
            str | None, typer.Option("--steer", help="Changed instructions for the model.")
        ] = None,
        interrupt: Annotated[
            str | None, typer.Option("--interrupt", help="Stop what you do: cuts a model call short.")
        ] = None,
        priority: Annotated[
            str | None,
            typer.Option(
                "--priority",
                help="Urgency the attention policy reads: low, normal, high, critical "
                "(default: normal for a message, high for a steer, critical for an interrupt).",
            ),
        ] = None,
        responder: Annotated[
            str, typer.Option("--as", help="Your operator name, recorded as the sender.")
        ] = "user",
        dedupe: Annotated[
            str | None, typer.Option("--dedupe", help="A key: a later signal with the same key is ignored.")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the queued signal as JSON.")] = False,
    ) -> None:
        """Queue a signal for a kernel run; the kernel disposes of it at the run's next turn boundary (a
        session no flightlog kernel runs is refused, exit 2, naming what works instead)."""
        from ..kernel.approvals import operator_problem
        from ..kernel.attention import send_signal
        from ..store.signals import URGENCIES

        kind, text = _one(message, steer, interrupt)
        if priority is not None and priority not in URGENCIES:
            raise typer.BadParameter(f"must be one of {', '.join(URGENCIES)}", param_hint="--priority")
        problem = operator_problem(responder)
        if problem is not None:
            raise typer.BadParameter(f"invalid operator name: {problem}", param_hint="--as")
        from ..kernel.errors import NoSignalReader

        with open_db(False) as store:
            sid = store.resolve_session(session)
            try:
                record = send_signal(
                    store, sid, kind, text, urgency=priority, sender=responder, dedupe_key=dedupe
                )
            except NoSignalReader as exc:  # the wrong command for this session, as `resume` of it is
                console(stderr=True).print(f"flightlog: error: {exc}")
                raise typer.Exit(2) from None
        if json_out:
            sys.stdout.write(json.dumps(record.to_wire(), ensure_ascii=False) + "\n")
            return
        state: Literal["queued", "dropped"] = "dropped" if record.state == "dropped" else "queued"
        if state == "dropped":
            out.print(
                f"{record.signal_id} for {sid}: the run's signal queue is full (64); recorded as dropped"
            )
            return
        out.print(
            f"queued {record.kind} {record.signal_id} ({record.urgency}) for {sid}; "
            "delivered at the run's next turn boundary"
        )
