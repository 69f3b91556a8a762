"""``FlightlogSaver``: a LangGraph checkpointer whose history is a tamper-evident flightlog ledger.

Install with ``pip install -e '.[langgraph]'`` in a clone (``pip install 'flightlog[langgraph]'`` once flightlog
is published; ``langgraph-checkpoint>=2``). Usage::

    from flightlog import open_store
    from flightlog.integrations.langgraph import FlightlogSaver

    graph = builder.compile(checkpointer=FlightlogSaver(open_store("agent.db")))
    graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

Semantics follow LangGraph's ``BaseCheckpointSaver`` contract and its reference saver ``InMemorySaver``
(``langgraph/checkpoint/memory/__init__.py``) rule for rule; each method names the rule it follows.

Ledger layout (one flightlog session per LangGraph ``thread_id``, id ``langgraph:<thread_id>``, source
``langgraph``, ``metadata["run_source"] = "workflow"``). What LangGraph stores is kept in these
:class:`~flightlog.events.Custom` events, so LangGraph gets back exactly what it stored:

* ``langgraph.checkpoint`` (one per ``put``, one transaction with its artifacts): ``checkpoint_ns`` (absent
  for the root namespace ``""`` since 2026-12-05, as in ``langgraph.writes`` and ``langgraph.head``; a
  reader takes a missing one as ``""``), ``checkpoint_id``, ``parent_checkpoint_id`` (absent for a root), the checkpoint without
  ``channel_values`` (its *body*) as ``checkpoint`` (whole) or ``patch`` (below), ``metadata``, and
  ``channels``: for each channel in
  ``new_versions`` only, ``{"version", "type", "ref"}`` where ``ref`` is the ``sha256:<hex>`` handle of the
  serialized value (``self.serde.dumps_typed``) stored as a content-addressed, deduplicated artifact and
  ``type`` the serde's type tag; a channel in ``new_versions`` without a value is ``{"version", "type":
  "empty"}``. The serde's ``None`` (type ``null``, no bytes) is ``{"version", "type": "null"}``, without
  ``ref`` and without an artifact (:data:`NULL_HANDLE`; since 2026-12-05: an entry written before names
  the empty artifact by ``ref`` and reads the same); so is such a value in a write or a head record. Since
  2026-12-06 a ``version`` two or more entries share (LangGraph gives every channel a step updates one new
  version) is stored once, as the payload's ``version``, and left out of those entries; an entry read
  without one takes it (one written before holds its own, and reads the same; a release before 2026-12-06
  folds no such checkpoint, reading or writing the thread fails with ``KeyError: 'version'``, and writes
  nothing: the rule below, upgrade readers and writers together).
  A list value that begins with the parent checkpoint's value of the channel (the same elements, serialized
  one by one and compared by sha256) is stored as a delta, ``{"version", "type", "ref", "base", "depth"}``:
  only the new elements are stored, and ``base`` is the version it extends, so a ``MessagesState`` thread grows by its new messages per step, not by its whole history. The
  artifact is a content link (:data:`DELTA_MAGIC`): it names the artifact of the new elements (serialized as
  a plain value, so shared with the write that added them) and the artifact it extends, by their handles, so
  the newest delta's handle alone authenticates the whole list (``depth``: deltas above the whole list; every
  :data:`SEGMENT`-th is an anchor that also names the elements of the deltas down to the previous anchor,
  so a read follows about ``depth / SEGMENT + SEGMENT`` links, not ``depth``). A delta
  on a delta of the older form (before 2026-12-02: ``base`` only, linked by version; read by walking the
  thread's versions) is stored whole instead, and the chain restarts there. A release before 2026-12-02
  cannot read a thread once this one wrote a content-linked delta to it (it hands the link's bytes to the
  serde and fails with ``TypeError``): upgrade every process that reads or writes a thread together. Since
  2026-12-05 a link is written in the binary form (:data:`BINARY_DELTA_MAGIC`: its digests as raw bytes,
  about 100 bytes a link instead of 184); the JSON form (:data:`DELTA_MAGIC`) still reads, and a chain may
  mix both. A release before 2026-12-05 reads neither a binary link nor a ``null`` entry without ``ref``:
  the same rule, upgrade readers and writers together.
  ``checkpoint`` and ``metadata`` are ``{"json": value}`` when the value is plain JSON that round-trips
  exactly, else ``{"type", "ref"}`` like a channel value. A body that is exact JSON, like its parent's, is
  stored as ``patch`` instead:
  the changes from the parent's body once ``id`` is set to ``checkpoint_id``, ``updated_channels`` to the
  sorted channels of ``channels`` given a value and ``channel_versions`` updated with their versions
  (what the event already says), as ``{"del": [keys], "set": {key: value}, "sub": {key: patch}}`` (each
  part only when not empty; ``sub`` patches a nested object). Typically only ``ts`` and one
  ``versions_seen`` entry are left. A body is stored whole at least every :data:`KEYFRAME` checkpoints
  down a parent chain, so a read applies at most ``KEYFRAME - 1`` patches. (Events written before
  2026-12-02 hold every body whole, and ``thread_id``; both forms read the same.)
* ``langgraph.writes`` (one per ``put_writes`` that adds something): ``checkpoint_ns``,
  ``checkpoint_id``, ``task_id``, ``task_path`` and ``writes``: ``[{"idx", "channel", "type", "ref"}]``.
* ``langgraph.head`` (:data:`HEAD_KIND`; since 2026-12-02): the last event of each write that stops the graph,
  just before the signature: what the root namespace's latest checkpoint reads from (``bodies``, the seqs of
  its body's events, the last one the checkpoint's own event, which names it (since 2026-12-06 the record
  does not repeat its ``checkpoint_id``, and leaves out ``writes`` and ``values`` when they are empty; a
  record written before holds all three and reads the same); ``writes``, the seqs of its writes events;
  ``values``, the reference of each channel value the body's events do not name
  themselves: since 2026-12-05 a value stored by one of those events, such as a ``MessagesState`` list that
  changes every step, is read from that event's entry, not repeated; since 2026-12-06 so is a channel a
  patch body's event itself stores as ``empty``, such as a ``branch:to:*`` channel the step consumed), so a
  new process reads it without folding the thread (reads, below).
* ``langgraph.thread_deleted`` (``delete_thread``): ``thread_id``. The fold forgets the thread's
  checkpoints, writes and open interrupts (gates, decisions, interrupt-call links): its next run starts
  with none.
* ``langgraph.runs_deleted`` (``delete_for_runs``: ``run_ids``), ``langgraph.pruned`` (``prune``:
  ``strategy``) and ``langgraph.thread_copied`` (``copy_thread``, on the target: the source's checkpoints,
  values and writes as references): markers the fold honours; no ledger row is ever deleted.

Readable events. Beside those records the saver writes, in the same transaction, what happened in the root
namespace (``checkpoint_ns == ""``; subgraphs: see below) as seed 000 events, so ``show``, ``replay``,
``runs``, ``pending`` and the dashboard read a thread like a kernel run:

* a checkpoint whose metadata ``source`` is ``input`` → ``run_started`` (goal: the input's first human
  message, message-likes such as ``("user", text)`` converted as ``add_messages`` converts them, else the
  input as JSON; ``system_prompt``: the text of the system messages that begin the
  thread's messages, the thread's own when it already has messages, else the input's, joined by a blank
  line as the importers join a transcript's leading system messages; a run still open is first ended
  ``run_terminal("interrupted")``, after an ``operation_cancelled`` (reason ``user``, ``operation_id``
  ``<run id>:superseded``, ``pending_call_ids`` the gates' call ids) when it waits at interrupts: new input
  instead of ``Command(resume=...)`` supersedes them, LangGraph never asks them again, so ``pending`` and
  the saver stop listing them);
* the LangChain messages a step appended to a list channel (found by the delta above) → an ``AIMessage`` is
  ``llm_completed`` (text and tool calls; ``provider_replay`` with protocol :data:`PROTOCOL`, the provider
  and model from ``response_metadata``, ``reasoning_content`` from ``additional_kwargs``, and the whole
  message as ``native_message``), ``custom`` :data:`USAGE_KIND` when it has ``usage_metadata``, and
  ``tool_requested`` for its tool calls; a run of ``ToolMessage`` is one ``tool_completed``; a
  ``HumanMessage`` after the run's goal (the input's later ones too) is ``custom`` ``signal_message``
  (replay shows it as a user message). So replay holds one message per human, AI and tool message, in the
  thread's order. A ``SystemMessage`` is not a replay message: the seed's vocabulary has one place for a
  system prompt, ``run_started.system_prompt`` (the kernel sends it beside the history, and ``flightlog
  replay`` prints it before the messages), so a thread's leading system messages are recorded there; a
  system message that does not begin the thread (added mid-thread, or prepended by a node after the run
  started) has no seed event and is kept in the checkpoint blobs only;
* a step that rewrites earlier messages (``RemoveMessage``, ``REMOVE_ALL_MESSAGES``, a same-id
  replacement; in a node, an input or ``update_state``) → ``rollbacked`` (no reason) to the replay history
  before the first changed message (the history at the parent checkpoint less one message per human, AI
  and tool message the step dropped from there on, and less the run's goal when the step applies the
  run's input), then the messages from the first changed one on as above, so ``replay`` shows exactly the
  thread's messages;
* a checkpoint whose parent is not the thread's latest (time travel, ``update_state`` on an earlier
  checkpoint) → ``rollbacked`` to the replay history at the parent, after a ``run_started`` when no run
  is open (goal ``continue thread <id> from checkpoint <parent>``; the rollback leaves that goal out of
  the history, so replay holds the thread's messages at the parent);
* an ``interrupt()`` (an ``__interrupt__`` write) → per interrupt ``tool_gated`` and ``permission_requested``
  (reason: the interrupt's value as JSON, the request text), then ``suspended`` naming the gates' call ids.
  Raised by a tool LangGraph's ``ToolNode`` ran (the task pulled a node of ``tool_nodes``, default
  :data:`TOOL_NODES`, and exactly one call the model requested is unanswered and not gated; or the task
  runs a ``Send`` of one tool call to such a node, as ``create_agent`` sends each call), the gate is
  that call's: call id the model's (``call_1``), tool its name (``refund``), arguments its arguments, then
  a ``custom`` :data:`INTERRUPT_CALL_KIND` ``{interrupt_id, call_id}`` linking the interrupt to it, so an
  answer by interrupt id is recorded on the call; else (a plain node, or several calls open in the tool
  node: which tool raised cannot be told) call id the interrupt id, tool the node (for a ``Send`` task,
  the node its send targets), arguments the value;
* ``Command(resume=...)`` (the ``__resume__`` write of LangGraph's null task) and
  ``Command(resume={interrupt_id: value, ...})`` (a resume map, the only way to answer one of several
  pending interrupts: it reaches a checkpointer as the ``__resume__`` write of each task it resumes) →
  per interrupt answered ``permission_resolved`` (approved per :data:`DENIALS`, responder ``"user"``, seed
  000's human) and ``custom`` :data:`APPROVAL_DECISION` ``{turn, call_id: <the gate's call id>, gate:
  "approval", approved, responder: <name per RESPONDER_KEYS>, reason?: "denied by <name>"}``, the record
  ``flightlog approve``, the dashboard and the Agents SDK session write, which ``show``, ``pending`` and the
  dashboard's Decisions read for who answered; then, once no interrupt is left open, ``resumed`` with the
  approved and denied ids. As in a kernel run or an Agents SDK session, a thread whose interrupts are
  answered one at a time stays ``suspended`` until the last answer, and ``pending`` lists the answered
  ones as decided (by whom) meanwhile;
* a static interrupt (``compile(interrupt_before=[...])`` / ``interrupt_after``, or the same ``invoke``
  arguments): LangGraph tells a checkpointer nothing when the graph stops there, and reports it only to
  graph lifecycle callbacks, so it is recorded when :attr:`FlightlogSaver.lifecycle` is among the run's
  callbacks (``graph.with_config(callbacks=[saver.lifecycle])``): ``suspended`` (reason ``waiting for
  input (<interrupt_before|interrupt_after>, next: <nodes>)``, no pending calls) after the checkpoint it
  stopped at (with its ``put``, or then a ``custom`` :data:`STOPPED_KIND`), so ``runs`` shows the run
  ``waiting_input``. No ``tool_gated``/``permission_requested``/``permission_resolved``: a breakpoint
  asks no question and ``invoke(None, config)`` answers none, so recording a request or a decision would
  invent one; the next checkpoint of the open run that is not an ``update_state`` (which edits the
  state while it waits) → ``resumed`` with no approved or denied ids, before its step's events. Without
  the handler a static stop records nothing (the run reads ``running`` until it goes on);
* a node failure (an ``__error__`` write) → ``rollbacked`` (reason ``fatal_tool_error`` naming the node,
  a ``Send`` task's as above, and the exception) and ``run_terminal("error in node ...")``;
* a ``loop`` checkpoint with nothing left to run (no ``branch:to:*``, ``__start__`` or pending sends: a
  non-empty ``__pregel_tasks``, which LangGraph keeps as ``[]`` once its sends ran) →
  ``run_terminal("completed")`` with the run's tokens and turns: its model calls, or, for a run that
  called no model (a graph of plain nodes), the LangGraph supersteps its nodes ran (``_node_steps``; since
  2026-12-05: such a run ended ``after 0 turn(s)`` before, and its runs row ``steps 0``);
* ``copy_thread`` → on the target, before its ``langgraph.thread_copied`` (the source's own events are
  not copied: they describe the source's runs, under its session): the state the copy holds, as of the
  source's latest root checkpoint (what the copy's next run continues from): the target's open run ended
  as for new input (above), ``run_started`` (run id: that
  checkpoint's id; goal: the first human message of its messages, else ``copy of LangGraph thread
  <source>``; its system prompt), its messages as above, then its pending interrupt, error and resume
  writes as above, and ``run_terminal("completed")`` when nothing is left to run, or ``suspended``
  (``waiting for input (static interrupt, next: <nodes>)``) when the source waits at a static interrupt;
  so ``runs`` shows the copy's real state and ``replay`` its messages. The ``thread_copied`` record names
  the source.

Subgraphs. Each run of a subgraph (a checkpoint namespace ``<node>:<task id>``, nested ones joined by
``|``) is a child run, as the kernel records a sub-agent: its own session :data:`SUBGRAPH_PREFIX`
``<thread_id>|<checkpoint_ns>`` (source :data:`SUBGRAPH_SOURCE`, ``run_source`` ``workflow``,
``parent_session_id`` the thread's session, or the enclosing subgraph run's), written in the thread's write
transaction; its checkpoints and writes stay in the thread's session, where LangGraph reads them. The
subgraph's input checkpoint → ``run_started`` (goal: the input's last human message, what the subgraph is
asked; the input's messages are the thread's context, recorded in the thread, not again) and, in the parent
session, ``agent_process_changed`` (``agent_id`` the child session, ``role`` the node, ``isolation``
``shared``, ``context_inheritance`` ``full``, state ``running``); the messages its later steps add → as
above; its ``loop`` checkpoint with nothing left to run → ``run_terminal("completed")`` (its model calls and
tokens) and ``agent_process_changed`` ``exited`` (``completed``) in the parent. Each write to the child's
session ends with a ``custom`` :data:`SUBGRAPH_STEP_KIND`. A subgraph's interrupts and errors are recorded
where LangGraph reports them to the parent (the root's writes); its rewrites and static interrupts are not
described in the child's session, and ``copy_thread`` / ``delete_thread`` / ``prune`` leave subgraph runs'
sessions as they are.

LangGraph saves a task's writes in the background, sometimes before the checkpoint they belong to: an
interrupt, error or resume write is described when both it and its checkpoint are recorded (by the later of
the two). The session status follows (``running``, ``suspended``, ``completed``, ``interrupted``,
``failed``), and each time the graph stops (suspended or run ended) the recorder signs a checkpoint at once
(with the saver's notary) instead of waiting for the cadence; so does a write that lands on a stopped
thread (a task's writes saved after the run's final checkpoint, or while it waits at an interrupt), so a new
process finds no unsigned tail.

Reads. The first read of a thread in a process first checks its signatures as ``flightlog audit`` does,
when the saver has a notary (the default): the latest signed checkpoint under the notary's keys, the retained
head, and the rows after that checkpoint (:meth:`~flightlog.integrity.notary.Notary.resume` without
re-reading the rows it covers; the whole audit when the thread has no signed checkpoint yet).

``get_tuple`` of the root namespace's latest checkpoint (no ``checkpoint_id``: what ``graph.get_state``
asks) then reads the thread from the last ``langgraph.head`` record the latest signed checkpoint covers
(the saver signs each one in the transaction that writes it; one after the signature, in the unsigned tail,
is not believed) without folding it: the rows from the oldest seq the record names (the latest
checkpoint's body chain, at most :data:`KEYFRAME` checkpoints back, and its writes) to the session's head,
read at once, each row's hash and link checked, the row at the signed checkpoint's last seq against the
``chain`` hash its signed note covers (so the rows before it are authenticated backwards through their
hashes; the rows after it are chained onto it, not signed: ``flightlog verify`` reports them as the
unanchored tail, and their values are loaded strictly, below); the checkpoint rebuilt from them, the rows after
the record folded forward, and list values loaded through their content links, each artifact's sha256
checked before any byte of the chain reaches the serde. Anything the record cannot account for (no
record, a ``delete_thread`` / ``delete_for_runs`` / ``prune`` / ``copy_thread`` marker after it, a
checkpoint after it forking from an older one, a delta of the older form, a row or artifact that does not
check) falls back to the fold below, which refuses naming the seq when the ledger does not verify. Like
``resume(full=False)``, this read does not re-read rows the signed checkpoint covers and it does not use:
an edit there is found by ``flightlog audit`` and by the next fold, not by this read.

Every other read (``list``, ``get_state_history``, a checkpoint by id, subgraph namespaces) and every write
folds the ledger: it reads the rows once, streaming, checking each row's chain link and hash (from genesis) and computing its
RFC 9162 leaf hash, before folding its stored JSON into a small in-memory index of references; the chain
must end at the verified head and the leaves must give the signed tree head, so a thread whose rows were
rewritten and re-chained is refused (naming the seq) before anything in it reaches LangGraph's serde, which
imports the modules a msgpack value names. Values stay in the artifact table and are
loaded, and their sha256 checked, when a tuple is built). The fold parses only what it needs: readable
events it only counts (``llm_completed``, ``run_terminal``) are recognised by their first canonical bytes,
a ``langgraph.writes`` event is filed under its checkpoint (read from its first bytes) and parsed when that
checkpoint's pending writes are read or written, and a patched body is resolved when its checkpoint is
read. Any mismatch runs the full verify, which names
every divergent sequence, and the read is refused. When the session's head moved without this saver
(another process wrote), only the rows appended since are read, each checked to chain onto the verified head
(and the last onto the recorded head) before it is folded. The ledger is the truth; the index is a cache.

Values named by unsigned rows. A row no verified signature covers and this saver did not write (the
unsigned tail when a thread is first read: a run in progress, a writer killed mid-run, rows chained by
someone with SQL access but not the key; and rows another writer appended since, read chain-checked only)
may name a value LangGraph's default serde would import code for. Such a value is deserialized by a strict
clone of the saver's serde instead: for a ``JsonPlusSerializer`` (exactly that class, without a custom ext
hook), one in LangGraph's strict msgpack mode (``langgraph/checkpoint/serde/_msgpack.py``
``SAFE_MSGPACK_TYPES``, LangChain messages among them, plus the user's explicit ``allowed_msgpack_modules``),
for the type tags ``null``, ``bytes``, ``bytearray`` and ``msgpack`` only. A type it blocks (seen through
LangGraph's serde events: its strict mode returns the raw data and only warns), another tag, or a serde of
another class (no strict clone) is refused: :class:`~flightlog.errors.LedgerIntegrityError` naming the row's
seq and ``flightlog audit``. So a killed ``MessagesState`` writer's tail still reads, and a custom pydantic
value there is refused until the user lists its type. ``get_tuple`` and ``list`` (so ``get_state`` and
``get_state_history``) re-read a thread afresh once (its signatures checked again) before refusing a value
another writer's rows name, which that writer signs when its run stops. Values named by signed rows go to the saver's serde unchanged; with ``notary=None`` nothing is
signed and every value does, as before (the user opted out of signing).

Writers: any number of savers, in any number of processes, may write one thread (uvicorn workers, a web
process beside a background worker), as with LangGraph's own SQLite and Postgres savers. Each write runs in
one store transaction; inside it the saver reads the session's head and authority epoch, and when another
saver wrote or took authority since (the head moved, or the epoch is not its own), it re-folds the thread
from the verified ledger and re-attaches (a :class:`~flightlog.recorder.Recorder` recomputes the chain and
refuses with ``LedgerIntegrityError`` on divergence, then takes authority) before appending. The append is
fenced by the epoch and by the expected head, so a saver never forks the chain: when a concurrent writer
commits between the check and the append (PostgreSQL reads without a lock until the append), the store
refuses it (``StaleWriter`` / ``AppendConflict``), nothing is written, and the write is retried on the new
head (up to :data:`WRITE_ATTEMPTS` times). On SQLite the transaction holds the write lock from its start, so
the first attempt always succeeds.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import functools
import hashlib
import json
import random
import struct
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..errors import install_hint

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
    )
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.types import Interrupt, Send
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without LangGraph
    raise ImportError(
        f"flightlog.integrations.langgraph needs LangGraph: {install_hint('langgraph')}"
    ) from exc

from ..decisions import APPROVAL_DECISION, approval_decision, denial_reason
from ..encoding import canonical_json, parse_json
from ..errors import (
    AppendConflict,
    ArtifactIntegrityError,
    EncodingError,
    LedgerIntegrityError,
    SessionNotFound,
    StaleWriter,
)
from ..events import (
    AgentProcessChanged,
    CancellationReason,
    Custom,
    Event,
    LlmCompleted,
    OperationCancelled,
    PermissionRequested,
    PermissionResolved,
    ProviderReplay,
    Resumed,
    Rollbacked,
    RollbackReason,
    RunStarted,
    RunTerminal,
    Suspended,
    ToolCompleted,
    ToolGated,
    ToolRequested,
)
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..integrity.signing import SessionNotary
from ..ledger import GENESIS, CompactRange
from ..messages import ContentPart, Message, TextPart, ToolCall, ToolResult
from ..narration import operator_problem
from ..recorder import Recorder, verify_session
from ..replay import collector_paused
from ..store.base import Store
from ..store.links import (
    LANGGRAPH_DELTA_MAGIC,
    LANGGRAPH_DELTA_MAGIC_2,
    langgraph_delta_bytes,
    langgraph_delta_header,
)

if TYPE_CHECKING:
    from langgraph.callbacks import GraphCallbackHandler

    from ..notarization import Anchor

__all__ = [
    "APPROVAL_DECISION",
    "BINARY_DELTA_MAGIC",
    "CHECKPOINT_KIND",
    "DELTA_MAGIC",
    "DENIALS",
    "HEAD_KIND",
    "INTERRUPT_CALL_KIND",
    "NULL_HANDLE",
    "PROTOCOL",
    "PRUNED_KIND",
    "RESPONDER_KEYS",
    "RUNS_DELETED_KIND",
    "SEGMENT",
    "SESSION_PREFIX",
    "SOURCE",
    "STOPPED_KIND",
    "SUBGRAPH_PREFIX",
    "SUBGRAPH_SOURCE",
    "SUBGRAPH_STEP_KIND",
    "THREAD_COPIED_KIND",
    "THREAD_DELETED_KIND",
    "TOOL_NODES",
    "USAGE_KIND",
    "WRITES_KIND",
    "WRITE_ATTEMPTS",
    "FlightlogSaver",
    "session_id_for",
]

CHECKPOINT_KIND = "langgraph.checkpoint"
"""``custom_kind`` of the event one ``put`` appends."""
WRITES_KIND = "langgraph.writes"
"""``custom_kind`` of the event one ``put_writes`` appends."""
THREAD_DELETED_KIND = "langgraph.thread_deleted"
"""``custom_kind`` of the event ``delete_thread`` appends; the fold forgets the thread before it."""
RUNS_DELETED_KIND = "langgraph.runs_deleted"
"""``custom_kind`` of the event ``delete_for_runs`` appends (``run_ids``); the fold drops their checkpoints."""
PRUNED_KIND = "langgraph.pruned"
"""``custom_kind`` of the event ``prune`` appends (``strategy``); the fold drops the pruned checkpoints."""
INTERRUPT_CALL_KIND = "langgraph.interrupt_call"
"""``custom_kind`` of the event, just after the ``tool_gated`` and ``permission_requested`` of an ``interrupt()`` raised by a tool a tool
node ran (module docstring: readable events), linking the interrupt to the model's call it gated:
``interrupt_id`` (LangGraph's ``Interrupt.id``, which ``Command(resume={interrupt_id: value})`` names) and
``call_id`` (the model's tool call id, the gate's ``call_id``)."""
TOOL_NODES: tuple[str, ...] = ("tools",)
"""Default :class:`FlightlogSaver` ``tool_nodes``: the nodes whose ``interrupt()`` is a tool's gate.
``"tools"`` is the node LangGraph's ``tools_condition`` routes to and ``create_react_agent`` names its
``ToolNode``."""
STOPPED_KIND = "langgraph.static_interrupt"
"""``custom_kind`` of the event recording a static interrupt LangGraph reported (:attr:`FlightlogSaver.
lifecycle`) after the checkpoint it stopped at was recorded: ``thread_id``, ``checkpoint_id``, ``status``
(``interrupt_before`` / ``interrupt_after``); the ``suspended`` it describes comes just before it."""
SUBGRAPH_STEP_KIND = "langgraph.subgraph_step"
"""``custom_kind`` closing each write to a subgraph run's session: ``thread_id``, ``checkpoint_ns``,
``checkpoint_id`` (the checkpoint, kept in the thread's session, whose step it describes)."""
THREAD_COPIED_KIND = "langgraph.thread_copied"
"""``custom_kind`` of the event ``copy_thread`` appends to the target: the source's checkpoints, values and
writes as references (the artifacts are shared, not copied)."""
HEAD_KIND = "langgraph.head"
"""``custom_kind`` of the record each write that stops the graph (``run_terminal`` / ``suspended``) ends
with, just before the recorder signs: what the root namespace's latest checkpoint (highest id) reads from,
so a new process reads it without folding the thread (module docstring: reads): ``checkpoint_ns`` (``""``;
not stored since 2026-12-05), ``checkpoint_id``, ``bodies`` (the seqs of the ``langgraph.checkpoint`` events its body is built from: a
whole body, then each patch up to its own), ``writes`` (the seqs of the events holding its pending writes,
ledger order), ``values`` (``{channel: {"type", "ref", "depth"?}}``, or ``{"type": "empty"}``, for each
channel of its ``channel_versions`` the thread holds a value entry for, except, since 2026-12-05, a value
one of the ``bodies`` events stores: a reader takes it from that event's own entry) and, when there are any, ``early``
(the seqs of writes events whose checkpoint is not recorded yet, for ids above ``checkpoint_id``: LangGraph
may save them first, and a checkpoint put after the record may own them)."""
SUBGRAPH_PREFIX = "langgraph-subgraph:"
"""A subgraph run's session id is ``langgraph-subgraph:<thread_id>|<checkpoint_ns>`` (its own session, a
child run of the thread's; not a thread: :meth:`FlightlogSaver.list` does not list it)."""
SUBGRAPH_SOURCE = "langgraph.subgraph"
"""The ``source`` of a subgraph run's session."""
SESSION_PREFIX = "langgraph:"
"""Session ids are ``langgraph:<thread_id>`` (``flightlog show <thread_id>`` resolves them too)."""
SOURCE = "langgraph"
"""The ``source`` of every thread session (``flightlog ls`` shows it)."""
WRITE_ATTEMPTS = 50
"""How many times one write is tried when concurrent writers of the thread keep committing first: each
refused attempt means another writer appended, so the thread as a whole always progresses."""


def session_id_for(thread_id: str) -> str:
    """The flightlog session id that holds LangGraph thread ``thread_id``."""
    return SESSION_PREFIX + thread_id


class _Ref(NamedTuple):
    """A serialized value in the artifact table: serde type tag, ``sha256:<hex>`` handle, event seq; ``base``
    is set for a list stored as a delta: the value is the channel's value at version ``base`` followed by the
    elements of this artifact. ``depth`` is set for a content-linked delta (:data:`DELTA_MAGIC`): the
    artifact is an envelope naming the artifact it extends, ``depth`` deltas above a whole list."""

    type: str
    handle: str
    seq: int
    base: str | int | float | None = None
    depth: int | None = None


class _Val(NamedTuple):
    """A value stored inline as exact JSON (``ref`` None) or as a serialized artifact."""

    json: Any
    ref: _Ref | None


class _Body:
    """A checkpoint body (the checkpoint without ``channel_values``) as stored: whole (``val``: inline JSON
    or an artifact) or a ``patch`` on ``base``, the body of the checkpoint it extends (bound when the event
    is folded), after :func:`_rebased` sets what the event itself says (``id`` and the stored ``channels``
    entries, read by :func:`_over`: the checkpoint id, the channels it changed and their versions; a whole
    body keeps its event's entries too, for :meth:`FlightlogSaver._head_payload`). ``resolved`` caches the whole JSON body once built (shared: copied before it is handed out);
    ``depth`` counts the patches back to a whole body (at most :data:`KEYFRAME` - 1)."""

    __slots__ = ("base", "channels", "depth", "id", "patch", "resolved", "seq", "val")

    def __init__(
        self,
        seq: int,
        val: _Val | None = None,
        patch: dict[str, Any] | None = None,
        base: _Body | None = None,
        checkpoint_id: str = "",
        channels: dict[str, Any] | None = None,
    ) -> None:
        self.seq, self.val, self.patch, self.base = seq, val, patch, base
        # the event's checkpoint_id and stored channels (:func:`_over`, when resolved); two slots, not a
        # tuple: one container fewer per checkpoint for the cyclic collector to walk
        self.id, self.channels = checkpoint_id, channels
        self.depth: int = 0 if base is None else base.depth + 1
        self.resolved: dict[str, Any] | None = None


@dataclass(slots=True)
class _Cp:
    body: _Body
    metadata: dict[str, Any]
    parent_id: str | None
    # as stored when an artifact ({"type", "ref"}); None when inline JSON, i.e. {"json": metadata} (not kept:
    # one container fewer per checkpoint for the cyclic collector to walk)
    metadata_ref: dict[str, Any] | None = None

    def metadata_entry(self) -> dict[str, Any]:
        """The metadata entry as stored: ``{"json": metadata}`` or ``{"type", "ref"}``."""
        return {"json": self.metadata} if self.metadata_ref is None else self.metadata_ref


@dataclass(slots=True)
class _Write:
    task_id: str
    channel: str
    ref: _Ref
    task_path: str
    idx: int


@dataclass
class _Thread:
    """The read model of one thread: references only, no values."""

    thread_id: str
    session_id: str
    next_seq: int = 0
    head: str = ""  # chain hash of the last folded row ("" before the first fold)
    # checkpoint_ns -> checkpoint_id -> checkpoint (insertion order = ledger order, as InMemorySaver's dicts)
    checkpoints: dict[str, dict[str, _Cp]] = field(default_factory=dict)
    # (checkpoint_ns, channel, version) -> value (None: "empty", as InMemorySaver's ("empty", b"") blob)
    blobs: dict[tuple[str, str, str | int | float], _Ref | None] = field(default_factory=dict)
    # (checkpoint_ns, checkpoint_id) -> (task_id, idx) -> write
    writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    # writes events folded but not parsed yet, in ledger order: (checkpoint_ns, checkpoint_id) -> [(seq, bytes)]
    # (merged into ``writes`` by ``_writes_of`` when a read or write needs that checkpoint's writes)
    raw_writes: dict[tuple[str, str], list[tuple[int, bytes]]] = field(default_factory=dict)
    # (checkpoint_ns, checkpoint_id) -> seqs of the events that wrote its pending writes, in ledger order
    # (what a head record names: :data:`HEAD_KIND`)
    write_seqs: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    recorder: Recorder | None = None
    # the readable side (module docstring: readable events), folded from the readable events
    run_open: bool = False  # a run_started without its run_terminal
    run_id: str = ""  # run_started.run_id of the latest run
    history: int = 0  # messages replay holds after the last folded event
    run_llm: int = 0  # llm_completed of the open run
    run_tokens: int = 0  # model_usage total_tokens of the open run
    cp_history: dict[tuple[str, str], int] = field(default_factory=dict)  # checkpoint -> history at it
    last_cp: dict[str, str] = field(default_factory=dict)  # checkpoint_ns -> last checkpoint put
    gates: dict[str, str] = field(default_factory=dict)  # pending gate's call id -> its tool (or node)
    aliases: dict[str, str] = field(default_factory=dict)  # interrupt id -> the model's call id it gated
    call_tools: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # requested tool call id -> (tool name, arguments), until answered
    decided: dict[str, bool] = field(
        default_factory=dict
    )  # answered interrupt id -> approved, until resumed or the run ends
    call_turns: dict[str, int] = field(
        default_factory=dict
    )  # requested tool call id -> its turn, until answered
    # writer-side cache, not folded: (ns, channel) -> (version, element digests) of the last list put
    lists: dict[tuple[str, str], tuple[str | int | float, list[bytes]]] = field(default_factory=dict)
    # seq ranges [start, stop) of rows read from the ledger that no verified signature covers and this
    # saver did not write (the unsigned tail at attach, rows another writer appended since): the values
    # they name are loaded strictly (:meth:`FlightlogSaver._deserialize`). Empty without a notary.
    unsigned: list[tuple[int, int]] = field(default_factory=list)
    moved: bool = False  # another writer's rows were folded since the signatures were checked

    def untrusted(self, seq: int) -> bool:
        """Is row ``seq`` one whose values are loaded strictly (in an :attr:`unsigned` range)?"""
        return any(start <= seq < stop for start, stop in self.unsigned)

    def read_unsigned(self, start: int, stop: int) -> None:
        """Rows ``start <= seq < stop`` are read unsigned (merged into the last range when adjacent)."""
        if start >= stop:
            return
        if self.unsigned and self.unsigned[-1][1] == start:
            start = self.unsigned.pop()[0]
        self.unsigned.append((start, stop))

    def reset(self) -> None:
        """Forget the thread's checkpoints, writes and open interrupts (a ``thread_deleted`` marker, or
        ``pruned`` with ``delete``): a new run starts with no gate, decision, interrupt-call link or
        requested call of the runs before it. What the ledger's readable events already hold (``run_open``,
        ``history``, the run's counts) stays, as the session's replay folds them."""
        self.checkpoints.clear()
        self.blobs.clear()
        self.writes.clear()
        self.raw_writes.clear()
        self.write_seqs.clear()
        self.lists.clear()
        self.gates.clear()
        self.aliases.clear()
        self.decided.clear()
        self.call_tools.clear()
        self.call_turns.clear()

    def drop(self, ns: str, checkpoint_id: str) -> None:
        """Forget one checkpoint and its writes (a ``runs_deleted`` or ``pruned`` marker)."""
        del self.checkpoints[ns][checkpoint_id]
        self.writes.pop((ns, checkpoint_id), None)
        self.raw_writes.pop((ns, checkpoint_id), None)
        self.write_seqs.pop((ns, checkpoint_id), None)


@contextmanager
def _refusing(thread: _Thread, seq: int, what: str = "") -> Iterator[None]:
    """A store read of the artifacts named by row ``seq``: the store refusing bytes that hash otherwise
    (:class:`ArtifactIntegrityError`) is the thread's :class:`LedgerIntegrityError` naming ``seq``, as
    :func:`_checked` says it (``artifact <handle><what> is altered``)."""
    try:
        yield
    except ArtifactIntegrityError as exc:
        raise LedgerIntegrityError(
            session_id=thread.session_id, seq=seq, reason=f"artifact {exc.handle}{what} is altered"
        ) from exc


def _checked(thread: _Thread, seq: int, digest: str, content: bytes | None, what: str) -> bytes:
    """``content`` when it is present and its sha256 is ``digest`` (hex); else raises
    :class:`LedgerIntegrityError` naming ``seq`` (the row that named the artifact): "``what`` is missing" or
    "... is altered"."""
    if content is None or hashlib.sha256(content).hexdigest() != digest:
        raise LedgerIntegrityError(
            session_id=thread.session_id,
            seq=seq,
            reason=f"{what} is {'missing' if content is None else 'altered'}",
        )
    return content


def _signed_size(anchor: Anchor) -> int:
    """The rows the latest signed checkpoint :meth:`~flightlog.integrity.notary.Notary.resume` verified
    covers (0: none signed yet)."""
    latest = anchor.state.latest if isinstance(anchor.state, SessionNotary) else None
    return 0 if latest is None else latest.size


NULL_HANDLE = "sha256:" + hashlib.sha256(b"").hexdigest()
"""The handle of the serde's ``None`` (type ``null``, no bytes). Since 2026-12-05 a value entry of type
``null`` whose bytes are empty is stored without ``ref`` (and no artifact), and read as this handle, whose
content is the empty string by definition (its sha256 is the handle): an entry written before then names it
by ``ref``, and reads the same."""


def _handle(entry: Mapping[str, Any]) -> str:
    """The handle of a stored value entry: its ``ref``, or :data:`NULL_HANDLE` for a ``null`` entry stored
    without one.

    Raises:
        KeyError: no ``ref`` and the type is not ``null``."""
    ref = entry.get("ref")
    if ref is None and entry["type"] == "null":
        return NULL_HANDLE
    return entry["ref"]  # type: ignore[no-any-return]  # a stored entry's handle: a string, checked on read


def _ref_entry(kind: str, handle: str) -> dict[str, Any]:
    """A value entry ``{"type", "ref"}``, without ``ref`` for the serde's ``None`` (:data:`NULL_HANDLE`)."""
    return {"type": kind} if kind == "null" and handle == NULL_HANDLE else {"type": kind, "ref": handle}


def _blob_ref(entry: dict[str, Any], seq: int) -> _Ref | None:
    """A stored channel value entry (``{"type": "empty"}``, ``{"type", "ref"}`` or a delta with ``base``,
    and ``depth`` when content-linked; ``{"type": "null"}``: :data:`NULL_HANDLE`)."""
    if entry["type"] == "empty":
        return None
    return _Ref(entry["type"], _handle(entry), seq, entry.get("base"), entry.get("depth"))


def _blob_entry(ref: _Ref | None) -> dict[str, Any]:
    if ref is None:
        return {"type": "empty"}
    entry = _ref_entry(ref.type, ref.handle)
    if ref.base is not None:
        entry["base"] = ref.base
    if ref.depth is not None:
        entry["depth"] = ref.depth
    return entry


def _value_entry(ref: _Ref) -> dict[str, Any]:
    """A head record's entry for a channel value (:data:`HEAD_KIND`): what loads it without the events
    that stored it (``type``, ``ref`` (none for :data:`NULL_HANDLE`), and ``depth`` for a content-linked
    delta)."""
    entry = _ref_entry(ref.type, ref.handle)
    if ref.depth is not None:
        entry["depth"] = ref.depth
    return entry


def _delta_bytes(header: dict[str, Any]) -> bytes:
    """A content-linked delta artifact: :data:`DELTA_MAGIC` then the canonical JSON ``header``."""
    return DELTA_MAGIC + canonical_json(header)


def _anchor_run(run: Any, depth: int, elements: str) -> bool:
    """Is ``run`` an anchor's list of elements digests (:data:`SEGMENT`): one per delta from ``depth``
    down, its own ``elements`` first?"""
    return (
        depth % SEGMENT == 0
        and type(run) is list
        and len(run) == SEGMENT
        and run[0] == elements
        and all(isinstance(e, str) for e in run)
    )


def _split_delta(content: bytes) -> dict[str, Any] | None:
    """The header of a content-linked delta artifact (:data:`DELTA_MAGIC` or :data:`BINARY_DELTA_MAGIC`,
    links as hex); None when not laid out so."""
    return langgraph_delta_header(content)


_T = TypeVar("_T")


class _UnsignedValue(LedgerIntegrityError):
    """A value named by an unsigned row that the strict serde refuses (:meth:`FlightlogSaver._deserialize`)."""


class _NothingToWrite(Exception):
    """Raised inside a write transaction whose ``build`` found nothing to append: the block rolls back."""


def _writes_sort_key(w: _Write) -> tuple[str, str, int]:
    """``(task_path, task_id, idx)``: LangGraph's ``writes_sort_key`` (langgraph-checkpoint 4), the order
    ``get_tuple`` must return pending writes in (kept here so older langgraph-checkpoint releases work)."""
    return (w.task_path, w.task_id, w.idx)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (so 1 != 1.0, (1,) != [1], True != 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _exact_json(value: Any) -> bool:
    """True when ``value`` survives RFC 8785 encoding and parsing unchanged (types included)."""
    try:
        return _same(parse_json(canonical_json(value)), value)
    except (EncodingError, TypeError, ValueError, RecursionError):
        return False


def _merge_writes(
    stored: dict[tuple[str, int], _Write], new: Sequence[_Write]
) -> dict[tuple[str, int], _Write]:
    """InMemorySaver.put_writes' rule: a regular write (idx >= 0) already stored for the same
    (task_id, idx) is kept, a special write (idx < 0: error, interrupt, ...) replaces it.
    Returns the writes that change ``stored`` (and applies them)."""
    had = bool(stored)
    changed: dict[tuple[str, int], _Write] = {}
    for w in new:
        key = (w.task_id, w.idx)
        if key[1] >= 0 and had and key in stored:
            continue
        stored[key] = w
        changed[key] = w
    return changed


# ─── readable events: what a thread did, beside the blobs (module docstring: readable events) ──────────
PROTOCOL = "langchain"
"""``provider_replay.protocol`` of the ``llm_completed`` events: ``native_message`` is the LangChain
``AIMessage`` as JSON (``type``, ``content``, ``additional_kwargs``, ``response_metadata``, ``tool_calls``,
``usage_metadata``, ``id``, ``name``: what LangChain keeps of the provider's answer)."""
USAGE_KIND = "model_usage"
"""``custom_kind`` of a model call's token usage (an ``AIMessage`` with ``usage_metadata``); ``runs`` sums it."""
USER_MESSAGE_KIND = "signal_message"
"""``custom_kind`` of a user message added to a thread after its input (replay shows it as a user message)."""
NULL_TASK = "00000000-0000-0000-0000-000000000000"
"""LangGraph's ``NULL_TASK_ID``: the task a ``Command(resume=...)`` is written under."""
RESPONDER_KEYS = ("responder", "approver", "user_id", "user")
"""Where the answerer of an interrupt is read, first found wins: ``config["metadata"][key]``, then
``config["configurable"][key]``, leading and trailing whitespace stripped; ``"user"`` (the default operator
name of ``flightlog approve``) when none is found. A value that breaks the operator-name rule
(:func:`flightlog.narration.operator_problem`: empty, over 80 characters, a control or format character, ...)
is passed over, not recorded: the saver cannot refuse a resume (LangGraph goes on when ``put_writes``
raises, and the ledger would miss the answer), and every decision's name is shown as recorded."""
_HUMAN = "user"
"""``permission_resolved.responder`` of an answered interrupt (seed 000: ``"user" | "policy_gate"``)."""
DENIALS = frozenset({"no", "n", "deny", "denied", "reject", "rejected", "decline", "declined"})
"""Resume values (strings, any case) recorded as a denial; also ``False`` and a dict whose ``approved`` is
``False`` or whose ``type``/``action``/``decision`` is one of these words. Anything else is an approval."""
_TASKS = "__pregel_tasks"  # LangGraph's channel of pending sends (langgraph._internal._constants.TASKS)
_WITH_CONTEXT = "tool_call_with_context"  # ``__type`` of langgraph-prebuilt's ToolCallWithContext send
_MAX_STOPS = 1024  # static interrupts reported before their put, kept until it comes
_LLM_PREFIX = b'{"kind":"llm_completed",'
_TERMINAL_PREFIX = b'{"kind":"run_terminal",'
_CHECKPOINT_PREFIX = b'{"custom_kind":"langgraph.checkpoint","kind":"custom",'
_USAGE_PREFIX = b'{"custom_kind":"model_usage","kind":"custom",'
_WRITES_PREFIX = b'{"custom_kind":"langgraph.writes","kind":"custom","payload":{"checkpoint_id":"'
_NS_KEY = ',"checkpoint_ns":"'
_TASK_KEY = ',"task_id":"'


def _ns_entry(ns: str) -> dict[str, str]:
    """The ``checkpoint_ns`` member of a checkpoint, writes or head record: none for the root namespace
    ``""`` (since 2026-12-05; a reader takes a missing one as ``""``, and records written before hold it)."""
    return {"checkpoint_ns": ns} if ns else {}


_HEAD_PREFIX = b'{"custom_kind":"langgraph.head","kind":"custom",'
_MARKER_PREFIXES = tuple(
    b'{"custom_kind":"' + kind.encode() + b'","kind":"custom",'
    for kind in (THREAD_DELETED_KIND, RUNS_DELETED_KIND, PRUNED_KIND, THREAD_COPIED_KIND)
)  # rows that rewrite a thread's index: a head record cannot account for them
_HEAD_WINDOW = 64  # rows read back from the signed head at first, looking for the last head record
_HEAD_REACH = 4096  # rows a cheap read looks back for a head record before it folds the thread instead
_U64 = struct.Struct("<Q")

# serde type tags a value named by an unsigned row may have (:meth:`FlightlogSaver._deserialize`): what
# ``JsonPlusSerializer.dumps_typed`` writes without ``pickle_fallback`` ("pickle" runs code, "json" is the
# older form this saver never writes)
_TAIL_TYPES = frozenset({"null", "bytes", "bytearray", "msgpack"})
_BLOCKED_EVENTS = frozenset({"msgpack_blocked", "msgpack_method_blocked"})
_strict_loads = threading.local()  # .blocked: the types a strict load in this thread refused, while one runs
_listening: list[bool] = []  # the serde event listener is registered (once per process)
_listening_lock = threading.Lock()


def _on_serde_event(event: Mapping[str, Any]) -> None:
    """LangGraph serde event listener: note a type the strict serde blocked during a strict load in this
    thread (LangGraph's strict mode returns a blocked value's raw data and only warns)."""
    blocked: builtins.list[str] | None = getattr(_strict_loads, "blocked", None)
    if blocked is not None and event.get("kind") in _BLOCKED_EVENTS:
        blocked.append(".".join(str(event.get(k)) for k in ("module", "name", "method") if k in event))


def _strict_clone(serde: SerializerProtocol) -> SerializerProtocol | None:
    """A strict clone of ``serde`` for values named by unsigned rows: for a ``JsonPlusSerializer`` (exactly
    that class, without a custom ``__unpack_ext_hook__``), a new one in LangGraph's strict msgpack mode
    (``langgraph/checkpoint/serde/_msgpack.py``: only ``SAFE_MSGPACK_TYPES``, LangChain messages among them,
    plus the types the user's ``allowed_msgpack_modules`` lists explicitly; no pickle, no JSON constructor
    outside the safe types). None when there is none: another serde class (what it would import cannot be
    told), or a langgraph-checkpoint without strict mode or serde events (before 4)."""
    try:
        from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    except ImportError:  # pragma: no cover - langgraph-checkpoint < 4
        return None
    if type(serde) is not JsonPlusSerializer or getattr(serde, "_custom_unpack_ext_hook", True):
        return None
    allowed = serde._allowed_msgpack_modules  # True (permissive), None (strict) or the user's explicit set
    strict = JsonPlusSerializer(allowed_msgpack_modules=None if allowed is True else allowed)
    with _listening_lock:
        if not _listening:
            register_serde_event_listener(_on_serde_event)
            _listening.append(True)
    return strict


_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]  # C scanner, not in typeshed
KEYFRAME = 16
"""A checkpoint body is stored whole at least every this many checkpoints down a parent chain (the others
as patches on their parent's), so reading one applies at most ``KEYFRAME - 1`` patches."""
DELTA_MAGIC = LANGGRAPH_DELTA_MAGIC
"""First bytes of a content-linked list delta artifact (module docstring: ``depth``; declared in
:mod:`flightlog.store.links`, so ``flightlog db copy`` follows its links without importing this module), followed by its
canonical JSON ``{"t", "e", "d", "b", "bt"?, "h"?, "ht"?, "a"?, "at"?}``: ``e`` the sha256 (hex) of the
new elements serialized as a plain value (the same bytes as the write that added them, so stored once),
``t`` their serde type tag, ``d`` the depth, ``b`` the sha256 of the value extended: a whole list, whose
serde type is ``bt``, when ``d`` is 1, else a delta of depth ``d - 1``; an anchor's ``h``, ``ht``, ``a``
and ``at``: :data:`SEGMENT`. The form written before 2026-12-05, still read; the saver writes
:data:`BINARY_DELTA_MAGIC`."""
BINARY_DELTA_MAGIC = LANGGRAPH_DELTA_MAGIC_2
"""First bytes of a content-linked list delta artifact in the form the saver writes since 2026-12-05: the
same header, its links (``e``, ``b``, ``a``, ``h``) as raw 32-byte digests after the JSON of the other
members and a newline (:func:`flightlog.store.links.langgraph_delta_bytes`): a link is 32 bytes, not 64
hex characters. Both forms read to the same header (:func:`flightlog.store.links.langgraph_delta_header`),
and a chain may mix them."""
SEGMENT = 32
"""Every delta whose ``depth`` is a multiple of this is an anchor: it also names (``h``) the elements of
itself and the ``SEGMENT - 1`` deltas below it and (``a``) the value ``SEGMENT`` deltas down, so a read
follows at most ``SEGMENT - 1`` links to the highest anchor and then one link per anchor, about
``depth / SEGMENT + SEGMENT`` artifacts instead of one per delta, before it reads the elements."""


def _writes_key(data: bytes) -> tuple[str, str] | None:
    """``(checkpoint_ns, checkpoint_id)`` of a stored ``langgraph.writes`` event (its payload's first two
    keys in canonical order, or its first then ``task_id`` for the root namespace's ``""``, not stored
    since 2026-12-05), read without parsing the rest; None when the bytes are not laid out so (the caller
    then parses them whole)."""
    text = data.decode("utf-8")
    try:
        checkpoint_id, end = _scanstring(text, len(_WRITES_PREFIX))
        if text.startswith(_TASK_KEY, end):
            return "", checkpoint_id
        if not text.startswith(_NS_KEY, end):
            return None
        ns, _ = _scanstring(text, end + len(_NS_KEY))
    except ValueError:
        return None
    return ns, checkpoint_id


def _shared_version(channels: dict[str, Any]) -> dict[str, Any]:
    """A ``langgraph.checkpoint`` payload's ``channels`` member as stored (module docstring): when two or
    more entries have one ``version`` (LangGraph gives every channel a step updates the same new version),
    ``{"version": v, "channels": ...}`` with that version left out of those entries; else
    ``{"channels": channels}``. :func:`_with_versions` reads both."""
    counts = Counter(e["version"] for e in channels.values())
    version, n = counts.most_common(1)[0] if counts else (None, 0)
    if n < 2:
        return {"channels": channels}
    return {
        "version": version,
        "channels": {
            c: {k: v for k, v in e.items() if k != "version"} if e["version"] == version else e
            for c, e in channels.items()
        },
    }


def _with_versions(payload: dict[str, Any]) -> dict[str, Any]:
    """The ``channels`` entries of a parsed ``langgraph.checkpoint`` ``payload``, each with its ``version``:
    an entry stored without one (since 2026-12-06) takes the payload's ``version`` (:func:`_shared_version`);
    filled in place, so every later reader of the payload sees whole entries."""
    channels: dict[str, Any] = payload["channels"]
    shared = payload.get("version")
    if shared is not None:
        for entry in channels.values():
            if "version" not in entry:
                entry["version"] = shared
    return channels


def _over(checkpoint_id: str, channels: dict[str, Any]) -> dict[str, Any]:
    """What a ``langgraph.checkpoint`` event says of its body without the patch repeating it (stored
    ``channels`` entries: ``{"version", "type", ...}``): ``id``, ``updated_channels`` (the channels given a
    value, sorted, as LangGraph sets it) and the versions of its channels."""
    return {
        "id": checkpoint_id,
        "updated_channels": sorted(c for c, e in channels.items() if e["type"] != "empty"),
        "channel_versions": {c: e["version"] for c, e in channels.items()},
    }


def _rebased(body: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The base a patch applies to: the parent's ``body`` with ``id`` and ``updated_channels`` of ``over``
    and its ``channel_versions`` merged in (a new dict; ``body`` unchanged). Where LangGraph's body says
    otherwise, the patch says so."""
    versions = {**body.get("channel_versions", {}), **over["channel_versions"]}
    return {
        **body,
        "id": over["id"],
        "updated_channels": over["updated_channels"],
        "channel_versions": versions,
    }


def _diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A patch turning ``old`` into ``new`` (JSON objects): ``{"del": [keys], "set": {key: value},
    "sub": {key: patch}}`` (each part only when not empty; ``sub`` for a key whose old and new values
    are both objects)."""
    patch: dict[str, Any] = {}
    gone = [k for k in old if k not in new]
    put: dict[str, Any] = {}
    sub: dict[str, Any] = {}
    for k, v in new.items():
        if k in old:
            o = old[k]
            if _same(o, v):
                continue
            if type(o) is dict and type(v) is dict:
                sub[k] = _diff(o, v)
                continue
        put[k] = v
    if gone:
        patch["del"] = gone
    if put:
        patch["set"] = put
    if sub:
        patch["sub"] = sub
    return patch


def _patched(old: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """:func:`_diff`'s patch applied to ``old`` (a new dict; ``old`` and the patch are not changed, their
    unchanged values are shared)."""
    gone = patch.get("del", ())
    new = {k: v for k, v in old.items() if k not in gone} if gone else dict(old)
    new.update(patch.get("set", {}))
    for k, p in patch.get("sub", {}).items():
        new[k] = _patched(old[k], p)
    return new


_MARKER_CHANNELS = ("branch:to:", "__start__", "__pregel_tasks")


def _text(content: Any) -> str:
    """The text of a LangChain message ``content`` (a string, or a list of strings and ``text`` blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content if isinstance(b, str | dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def _jsonable(value: Any) -> Any:
    """``value`` when it is exact JSON, else its JSON form with non-JSON leaves as ``repr`` text."""
    if _exact_json(value):
        return value
    return parse_json(canonical_json(json.loads(json.dumps(value, default=repr))))


def _short_json(value: Any, limit: int = 2000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ai_events(msg: AIMessage, turn: int) -> list[Event]:
    """``llm_completed`` (with the LangChain message as ``provider_replay.native_message``), the model's
    ``model_usage`` when LangChain reports it, and ``tool_requested`` when it calls tools."""
    text = _text(msg.content)
    content: list[ContentPart] = [TextPart(text=text)] if text else []
    calls = [
        ToolCall(
            id=c.get("id") or "", name=c["name"], arguments=json.dumps(c.get("args", {}), sort_keys=True)
        )
        for c in msg.tool_calls
    ]
    meta = msg.response_metadata or {}
    model = meta.get("model_name") or meta.get("model")
    reasoning = (msg.additional_kwargs or {}).get("reasoning_content")
    native = {
        "type": msg.type,
        "content": msg.content,
        "additional_kwargs": msg.additional_kwargs,
        "response_metadata": msg.response_metadata,
        "tool_calls": [dict(c) for c in msg.tool_calls],
        "usage_metadata": dict(msg.usage_metadata) if msg.usage_metadata else None,
        "id": msg.id,
        "name": msg.name,
    }
    replay = ProviderReplay(
        protocol=PROTOCOL,
        provider=meta.get("model_provider") if isinstance(meta.get("model_provider"), str) else None,
        model=model if isinstance(model, str) else None,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        native_message=_jsonable(native),
    )
    events: list[Event] = [
        LlmCompleted(
            turn=turn,
            message=Message(role="assistant", content=content, tool_calls=calls),
            provider_replay=replay,
        )
    ]
    if msg.usage_metadata:
        usage = msg.usage_metadata
        events.append(
            Custom(
                custom_kind=USAGE_KIND,
                payload={
                    "turn": turn,
                    "model": model if isinstance(model, str) else None,
                    "protocol": PROTOCOL,
                    "input_tokens": int(usage.get("input_tokens", 0)),
                    "output_tokens": int(usage.get("output_tokens", 0)),
                    "total_tokens": int(usage.get("total_tokens", 0)),
                },
            )
        )
    if calls:
        events.append(ToolRequested(turn=turn, calls=calls))
    return events


def _message_events(
    messages: Sequence[BaseMessage],
    turn: int,
    *,
    skip_user: bool,
    call_turns: Mapping[str, int] | None = None,
) -> list[Event]:
    """Readable events for messages appended to a channel at ``turn``: ``AIMessage`` → :func:`_ai_events`,
    a run of ``ToolMessage`` → one ``tool_completed`` per turn of the calls it answers, ``HumanMessage`` →
    ``custom`` ``signal_message`` (but the first one when ``skip_user``: the run's input, already the
    ``run_started`` goal); a ``SystemMessage`` records nothing here (the thread's leading system messages are
    the run's ``run_started.system_prompt``, see :func:`_system_prompt`).

    A ``tool_completed`` carries the turn of the call it answers, as the kernel records it (seed 000: a turn
    is one model call and the tool calls it asked for): the turn of the call's ``tool_requested``, from
    ``call_turns`` (requested call id → turn, as folded) or from an ``AIMessage`` among ``messages``; else
    ``turn`` (a result whose call was never recorded)."""
    events: list[Event] = []
    asked = dict(call_turns or {})
    results: dict[int, list[ToolResult]] = {}  # call's turn -> results, in order
    for msg in messages:
        if isinstance(msg, ToolMessage):
            results.setdefault(asked.get(msg.tool_call_id, turn), []).append(
                ToolResult(
                    call_id=msg.tool_call_id, output=_text(msg.content), is_error=msg.status == "error"
                )
            )
            continue
        events.extend(ToolCompleted(turn=t, results=r) for t, r in results.items())
        results = {}
        if isinstance(msg, AIMessage):
            events.extend(_ai_events(msg, turn))
            asked.update((c.get("id") or "", turn) for c in msg.tool_calls)
        elif isinstance(msg, HumanMessage):
            if skip_user:
                skip_user = False  # the goal
            else:
                events.append(Custom(custom_kind=USER_MESSAGE_KIND, payload={"text": _text(msg.content)}))
    events.extend(ToolCompleted(turn=t, results=r) for t, r in results.items())
    return events


def _goal(value: Any) -> str:
    """The ``run_started`` goal of a graph input: its first human message's text (the input's later human
    messages are recorded as ``signal_message``, so replay holds one user message per human message), else
    the input as JSON."""
    msgs = _input_messages(value)
    if isinstance(msgs, BaseMessage):
        msgs = [msgs]
    if isinstance(msgs, list) and msgs and all(isinstance(m, BaseMessage) for m in msgs):
        first = next((m for m in msgs if isinstance(m, HumanMessage)), None)
        if first is not None:
            return _text(first.content)
    return _short_json(value)


def _system_prompt(messages: Any) -> str | None:
    """The system prompt a thread's messages give the model: the text of the ``SystemMessage`` run that
    begins them (joined by a blank line, as the importers join a transcript's leading system messages into
    ``run_started.system_prompt``); None when they do not begin with one."""
    if isinstance(messages, BaseMessage):
        messages = [messages]
    if not isinstance(messages, list):
        return None
    texts: list[str] = []
    for m in messages:
        if not isinstance(m, SystemMessage):
            break
        texts.append(_text(m.content))
    return "\n\n".join(texts) if texts else None


def _input_messages(value: Any) -> Any:
    """The messages of a graph input (``{"messages": ...}``, or the input itself), as LangChain messages when
    they are message-likes, which ``MessagesState``'s ``add_messages`` reducer turns into messages the same
    way (langchain_core's ``convert_to_messages``): a message, a ``(role, text)`` tuple, a ``{"role",
    "content"}`` dict, a string (a human message), or a list of them; anything else as given (then the
    ``run_started`` goal is the input as JSON). The input is the live value LangGraph hands the saver's
    ``put``, never a stored one."""
    raw = value.get("messages") if isinstance(value, dict) else value
    items: builtins.list[Any] = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(m, BaseMessage | str | tuple | dict) for m in items):
        return raw
    try:
        return convert_to_messages(items)
    except (NotImplementedError, ValueError):  # convert_to_messages: not a message-like (a state value)
        return raw


def _replay_size(messages: Sequence[Any]) -> int:
    """How many replay messages ``messages`` put in the history when recorded by :func:`_message_events`
    (one per AI, tool and human message; a system message none)."""
    return sum(1 for m in messages if isinstance(m, AIMessage | ToolMessage | HumanMessage))


def _responder(config: RunnableConfig) -> str:
    """Who answered an interrupt (:data:`RESPONDER_KEYS`): the first name found that passes the
    operator-name rule, else ``"user"``."""
    for scope in (config.get("metadata") or {}, config.get("configurable") or {}):
        for key in RESPONDER_KEYS:
            who = scope.get(key)
            if isinstance(who, str) and operator_problem(who.strip()) is None:
                return who.strip()
    return _HUMAN


def _approved(value: Any) -> bool:
    """Whether a resume value approves (:data:`DENIALS`)."""
    if value is False:
        return False
    if isinstance(value, str):
        return value.strip().lower() not in DENIALS
    if isinstance(value, dict):
        if value.get("approved") is False:
            return False
        return not any(
            isinstance(value.get(k), str) and value[k].strip().lower() in DENIALS
            for k in ("type", "action", "decision")
        )
    return True


def _node(task_path: str, task_id: str) -> str:
    """The node a task ran (``task_path`` is ``"~__pregel_pull, <node>"`` for a pulled task)."""
    return task_path.rsplit(", ", 1)[-1] if task_path else task_id


def _finished(values: Mapping[str, Any]) -> bool:
    """A ``loop`` checkpoint with no trigger left (no ``branch:to:*``, ``__start__`` or pending sends):
    the graph ran to its end.

    ``values``: the checkpoint's channel values. LangGraph keeps ``__pregel_tasks`` in them once it has
    been written, as ``[]`` after its sends ran (langgraph 1.x: ``Topic.checkpoint`` returns its list, empty
    once the step consumed it, and ``create_checkpoint`` stores it), so only a non-empty value there is a
    pending send; any other value of it is taken as pending (the run is not declared over)."""
    return not any(
        channel.startswith(_MARKER_CHANNELS)
        and not (channel == _TASKS and isinstance(value, list) and not value)
        for channel, value in values.items()
    )


def _interrupts(value: Any) -> list[Interrupt]:
    """The ``Interrupt`` objects of an ``__interrupt__`` write (a tuple or list of them, or one)."""
    items = value if isinstance(value, list | tuple) else [value]
    return [i for i in items if isinstance(i, Interrupt)]


def _history_after(history: int, events: Sequence[Event]) -> int:
    """Messages replay holds after ``events`` when it held ``history`` before (the fold's rules)."""
    for e in events:
        if isinstance(e, RunStarted | LlmCompleted):
            history += 1
        elif isinstance(e, ToolCompleted):
            history += len(e.results)
        elif isinstance(e, Custom) and e.custom_kind == USER_MESSAGE_KIND:
            history += 1
        elif isinstance(e, Rollbacked):
            history = min(history, e.checkpoint_history_len)
    return history


def _terminal(reason: str, thread: _Thread, before: Sequence[Event], step: Any = None) -> RunTerminal:
    """``run_terminal`` of the open run: its turns and tokens, those in ``before`` included.

    ``turns_used``: the run's model calls (a kernel turn: one model call and the tools it asked for); a run
    that called no model (a graph of plain nodes) counts the LangGraph supersteps it ran up to ``step``,
    the step of the root checkpoint that ends it (:func:`_node_steps`; 0 when ``step`` is None)."""
    llm, tokens, run_id = thread.run_llm, thread.run_tokens, thread.run_id
    for e in before:
        if isinstance(e, RunStarted):
            llm, tokens, run_id = 0, 0, e.run_id
        elif isinstance(e, LlmCompleted):
            llm += 1
        elif isinstance(e, Custom) and e.custom_kind == USAGE_KIND:
            tokens += int(e.payload.get("total_tokens") or 0)
    turns = llm if llm else _node_steps(thread, run_id, step)
    return RunTerminal(reason=reason, turns_used=turns, total_tokens=tokens)


def _node_steps(thread: _Thread, run_id: str, step: Any) -> int:
    """The LangGraph supersteps in which nodes of run ``run_id`` ran, through ``step`` (inclusive).

    A run starts at a root checkpoint (its ``run_started.run_id``): an ``input`` one of step ``s`` is
    followed by step ``s + 1``, LangGraph's ``__start__`` writing the input, so the run's nodes run from
    ``s + 2``; a run started at a ``loop`` checkpoint of step ``s`` (a thread continued from a checkpoint)
    includes that step. 0 when the start checkpoint or either step is unknown."""
    start = thread.checkpoints.get("", {}).get(run_id)
    first = start.metadata.get("step") if start is not None else None
    if start is None or not isinstance(first, int) or not isinstance(step, int):
        return 0
    begin = first + 2 if start.metadata.get("source") == "input" else first
    return max(0, step - begin + 1)


def _end_run(thread: _Thread, turn: int, last_step: Any = None) -> builtins.list[Event]:
    """What ends the thread's open run before a new one starts (new input, a copied thread's state): its
    open gates closed by ``operation_cancelled`` (reason ``user``: new input instead of an answer supersedes
    them), then ``run_terminal("interrupted")`` (``last_step``: the run's last superstep, for
    :func:`_terminal`); nothing when no run is open."""
    if not thread.run_open:
        return []
    events: builtins.list[Event] = []
    if thread.gates:
        events.append(
            OperationCancelled(
                turn=turn,
                operation_id=f"{thread.run_id}:superseded",
                reason=CancellationReason.USER,
                pending_call_ids=list(thread.gates),
            )
        )
    return [*events, _terminal("interrupted", thread, events, last_step)]


def _open_after(run_open: bool, events: Sequence[Event]) -> bool:
    """Whether a run is open after ``events`` when ``run_open`` said so before them (the fold's rule:
    ``run_started`` opens one, ``run_terminal`` ends it)."""
    for e in events:
        if isinstance(e, RunStarted):
            run_open = True
        elif isinstance(e, RunTerminal):
            run_open = False
    return run_open


def _status_after(events: Sequence[Event]) -> str | None:
    """The session status the last lifecycle event of ``events`` sets: ``running`` (run started or
    resumed), ``suspended`` (interrupt), ``completed`` / ``interrupted`` / ``failed`` (run ended); None:
    unchanged."""
    status = None
    for e in events:
        if isinstance(e, RunStarted | Resumed):
            status = "running"
        elif isinstance(e, Suspended):
            status = "suspended"
        elif isinstance(e, RunTerminal):
            status = e.reason if e.reason in ("completed", "interrupted") else "failed"
    return status


def _stopped_after(thread: _Thread, events: Sequence[Event]) -> bool:
    """Whether the graph is stopped once ``events`` are appended to ``thread`` (as folded before them), so
    the write is signed at once: they end the run or suspend it, or they change no lifecycle and land on a
    thread whose run has ended (LangGraph may save a task's writes after the step's checkpoint, so they can
    come after the ``run_terminal`` that checkpoint recorded) or that waits at an ``interrupt()``."""
    status = _status_after(events)
    if status is not None:
        return status != "running"
    return not thread.run_open or bool(thread.gates)


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, BaseMessage) for m in value)


class FlightlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver that records every checkpoint and write on a flightlog ledger.

    Args:
        store: An open flightlog store (``flightlog.open_store(...)``; SQLite or PostgreSQL). The caller
            owns it and closes it.
        serde: LangGraph serializer for values, checkpoints and metadata (default: LangGraph's
            ``JsonPlusSerializer``, as every saver). A value named by a row no signed checkpoint covers
            goes to a strict clone of it instead (module docstring: values named by unsigned rows).
        notary: Sign checkpoints of each thread's session (see :mod:`flightlog.integrity.checkpoints`) and verify
            them when a thread is attached. Default :data:`~flightlog.integrity.notary.USER_NOTARY`: the user's
            log key, as ``flightlog run`` signs (resolved here, creating the key on first use); None
            records an unsigned chain.
        tool_nodes: Names of the graph's ``ToolNode`` nodes, whose ``interrupt()`` gates the model's tool
            call it runs (module docstring: readable events); default :data:`TOOL_NODES` (``"tools"``).

    Thread-safe (one lock over the index and the recorders); the async methods run the sync ones in a
    worker thread. Every capability of LangGraph's checkpointer conformance suite is implemented (base and
    extended: ``delete_for_runs``, ``copy_thread``, ``prune``, as markers; nothing is deleted).

    Raises (any method reading a thread):
        LedgerIntegrityError: the thread's chain does not verify, or an artifact is missing or its bytes do
            not hash to its handle, or a value named by a row no signed checkpoint covers is one the strict
            serde refuses (module docstring: values named by unsigned rows); names the sequence of the
            event involved.
    """

    def __init__(
        self,
        store: Store,
        *,
        serde: SerializerProtocol | None = None,
        notary: Notary | UserNotary | None = USER_NOTARY,
        tool_nodes: Sequence[str] = TOOL_NODES,
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.tool_nodes = frozenset(tool_nodes)
        self.notary = resolve_notary(notary)
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.RLock()
        # static interrupts (:attr:`lifecycle`): stops reported before their put (checkpoint id -> status),
        # and each thread's last root checkpoint put by this saver (both ways)
        self._stops: dict[str, str] = {}
        self._last_root: dict[str, str] = {}
        self._root_thread: dict[str, str] = {}
        self._lifecycle: GraphCallbackHandler | None = None
        self._children: dict[str, Recorder] = {}  # subgraph runs' sessions being written
        # threads read from their head record only (:meth:`_head`), not folded in this process
        self._heads: dict[str, _Thread] = {}
        # (serde, its strict clone or None) for values named by unsigned rows (:meth:`_deserialize`)
        self._strict: tuple[SerializerProtocol, SerializerProtocol | None] | None = None

    # ─── the fold ─────────────────────────────────────────────────────────────────────────
    def _thread(self, thread_id: str) -> _Thread:
        """The current read model of a thread, folding the ledger when it is new or moved on elsewhere."""
        sid = session_id_for(thread_id)
        thread = self._threads.get(thread_id)
        try:
            record = self.store.get_session(sid)
        except SessionNotFound:
            record = None
        size = record.head_seq + 1 if record is not None else 0
        if thread is not None and thread.next_seq == size:
            return thread
        if (
            thread is not None
            and record is not None
            and 0 < thread.next_seq < size
            and self.notary is not None
        ):
            # another writer's rows: chained onto what this saver verified, their signatures not checked
            thread.read_unsigned(thread.next_seq, size)
            thread.moved = True
        if (
            thread is not None
            and record is not None
            and 0 < thread.next_seq < size
            and self._extend(thread, size, record.head_hash)
        ):
            return thread  # moved on elsewhere: extended by the rows appended since
        fresh = _Thread(thread_id, sid)
        self._heads.pop(thread_id, None)  # folded whole from now on: the head index is not read again
        if thread is not None:
            fresh.recorder = thread.recorder  # behind the ledger now: _recorder re-attaches before a write
        if record is not None:
            # Signed (the default): the signatures first, as `flightlog audit` checks them: the latest signed
            # checkpoint under the notary's keys, the retained head, the rows after it (O(log n) + the tail;
            # the whole audit when the thread has no signed checkpoint yet). Raises naming the seq.
            notary = self.notary
            anchor = None if notary is None else self._anchor(notary, sid)
            if anchor is not None:
                size, head_hash = anchor.size, anchor.head
            else:
                head_hash = record.head_hash
            tree = None if anchor is None else CompactRange()
            if anchor is not None:
                fresh.read_unsigned(_signed_size(anchor), size)  # before the fold: it loads artifact metadata
            fresh.head = GENESIS  # one pass: each row's chain link and hash checked, then folded
            if self._extend(fresh, size, head_hash, tree=tree):
                if (
                    notary is not None
                    and anchor is not None
                    and tree is not None
                    and tree.root() != anchor.tree.root()
                ):
                    # the rows chain, but are not the rows the signed tree head covers (re-chained):
                    # the full audit names the first divergent seq
                    self._threads.pop(thread_id, None)
                    notary.resume(self.store, sid, full=True, retain=False)
                    raise LedgerIntegrityError(
                        session_id=sid,
                        seq=size - 1,
                        reason="the rows do not hash to the signed checkpoint's tree head",
                    )
                self._threads[thread_id] = fresh
                return fresh
            fresh = _Thread(thread_id, sid, recorder=fresh.recorder, unsigned=fresh.unsigned)
            if self.notary is not None:
                self.notary.resume(self.store, sid, full=True, retain=False)  # the whole audit: names it
            report = verify_session(self.store, sid)  # names every divergence
            if not report.ok:
                first = report.divergences[0]
                raise LedgerIntegrityError(
                    session_id=sid,
                    seq=first.seq,
                    reason=f"{first.reason}: {first.detail}" if first.detail else first.reason,
                    divergences=report.divergences,
                )
            for row in self.store.read_events(sid, stop=report.events):
                self._apply(fresh, row.seq, parse_json(row.event_bytes))
            fresh.next_seq, fresh.head = report.events, report.head
        self._threads[thread_id] = fresh
        return fresh

    def _head(self, thread_id: str) -> _Thread | None:
        """The index of a thread's root namespace as of its latest checkpoint, built from the last
        :data:`HEAD_KIND` record the latest signed checkpoint covers (:meth:`_last_head`) and the rows that
        record names, not by folding the thread: what the first ``get_state`` of a process reads (module
        docstring: reads). None when this cannot be done (no
        notary, no signed checkpoint, no head record within :data:`_HEAD_REACH` rows, a row after the head
        record that it cannot account for, a row that does not check): the caller then folds the thread,
        which refuses naming the seq when the ledger does not verify.

        Every row used is authenticated: the rows from the head record's oldest named seq to the session's
        head are read at once and each row's hash and link checked, the one at the signed checkpoint's last
        seq against the ``chain`` hash its signed note covers (:meth:`_anchor` checked the signature, the
        retained head and the rows after it), so the rows before it are authenticated backwards by their
        hashes and the rows after it as the signed tail is. Values then load through content: a handle in
        an authenticated row names an artifact whose sha256 is checked (:meth:`_load_linked`).

        Raises:
            LedgerIntegrityError: as :meth:`_anchor`.
        """
        notary = self.notary
        if notary is None:
            return None
        sid = session_id_for(thread_id)
        try:
            record = self.store.get_session(sid)
        except SessionNotFound:
            self._heads.pop(thread_id, None)
            return None
        cached = self._heads.get(thread_id)
        if cached is not None and (cached.next_seq, cached.head) == (record.head_seq + 1, record.head_hash):
            return cached
        self._heads.pop(thread_id, None)
        anchor = self._anchor(notary, sid)
        latest = anchor.state.latest if isinstance(anchor.state, SessionNotary) else None
        if latest is None or latest.checkpoint.chain is None:
            return None
        size, signed = anchor.size, latest.size
        start = max(0, signed - _HEAD_WINDOW)
        rows = self._rows(sid, start, size)
        at = self._last_head(rows, signed)
        while at is None:
            if start == 0 or size - start >= _HEAD_REACH:
                return None
            older = max(0, start - (size - start))
            rows[:0] = self._rows(sid, older, start)
            start = older
            at = self._last_head(rows, signed)
        try:
            head = parse_json(rows[at][1])["payload"]
            bodies, writes, early = head["bodies"], head.get("writes", []), head.get("early", [])
            if (
                head.get("checkpoint_ns", "") != ""
                or not bodies
                or not all(type(q) is int and 0 <= q < rows[at][0] for q in (*bodies, *writes, *early))
            ):
                return None
        except (ValueError, KeyError, TypeError):
            return None  # not a head record this saver writes: fold the thread
        lo = min(bodies + writes + early)
        if lo < start:
            rows[:0] = self._rows(sid, lo, start)
            at += start - lo  # the record's index in the rows, now that older ones come first
            start = lo
        if not self._authentic(rows, start, latest.size - 1, latest.checkpoint.chain, anchor.head):
            return None  # the full path names the divergent seq
        thread = _Thread(thread_id, sid)
        thread.read_unsigned(signed, size)
        if not self._seed(thread, rows, start, at, head):
            return None
        thread.next_seq, thread.head = size, anchor.head
        self._heads[thread_id] = thread
        return thread

    def _rows(self, sid: str, start: int, stop: int) -> builtins.list[tuple[int, bytes, str, str]]:
        """Rows ``start <= seq < stop`` as ``(seq, event_bytes, prev_hash, hash)``, unchecked."""
        return [row for page in self.store.read_chain(sid, start=start, stop=stop) for row in page]

    @staticmethod
    def _last_head(rows: Sequence[tuple[int, bytes, str, str]], signed: int) -> int | None:
        """Index in ``rows`` of the last :data:`HEAD_KIND` record among the first ``signed`` rows of the
        session (those the latest signed checkpoint covers), or None. A head record after them is not
        believed: the saver signs each one in the transaction that writes it, so one in the unsigned tail
        was appended without the key (or by a saver without a notary), and the fold, which reads the
        checkpoint rows and ignores head records, would serve something else (an older turn replayed,
        another thread's values named)."""
        for i in range(len(rows) - 1, -1, -1):
            if rows[i][0] < signed and rows[i][1].startswith(_HEAD_PREFIX):
                return i
        return None

    @staticmethod
    def _authentic(
        rows: Sequence[tuple[int, bytes, str, str]], start: int, signed: int, chain: str, head: str
    ) -> bool:
        """Do ``rows`` run from seq ``start`` without a gap, each row's ``hash`` = sha256(``prev_hash`` ‖
        u64_le(seq) ‖ bytes) (ARCHITECTURE.md invariant 4) and its ``prev_hash`` the previous row's
        ``hash``, the row at seq ``signed`` hashing to ``chain`` (the signed checkpoint's) and the last one
        to ``head`` (the session's verified head)?"""
        sha256, pack = hashlib.sha256, _U64.pack
        prev: str | None = None
        for i, (seq, data, prev_hash, hash_) in enumerate(rows):
            if seq != start + i or (prev is not None and prev_hash != prev):
                return False
            if sha256(prev_hash.encode("ascii") + pack(seq) + data).hexdigest() != hash_:
                return False
            if seq == signed and hash_ != chain:
                return False
            prev = hash_
        return bool(rows) and rows[0][0] <= signed <= rows[-1][0] and prev == head

    def _seed(
        self,
        thread: _Thread,
        rows: Sequence[tuple[int, bytes, str, str]],
        start: int,
        at: int,
        head: dict[str, Any],
    ) -> bool:
        """Build ``thread``'s root namespace from the head record ``head`` (at ``rows[at]``) and the rows
        it names (the values the body rows store, from their own entries; the record's ``values`` for the
        others, never over a body row's), then fold the rows after it. False when the rows are not what the record says or a row
        after it is one the partial index cannot fold (a marker that rewrites the thread, a checkpoint
        whose parent it does not hold, ...): the caller then folds the thread whole."""
        try:
            latest_id = ""
            for seq in head["bodies"]:
                data = rows[seq - start][1]
                if not data.startswith(_CHECKPOINT_PREFIX):
                    return False
                payload = parse_json(data)["payload"]
                latest_id = payload["checkpoint_id"]
                if payload.get("checkpoint_ns", "") != "" or ("patch" in payload) == (
                    seq == head["bodies"][0]
                ):
                    return False
                self._add_checkpoint(thread, seq, payload)
                for channel, entry in _with_versions(payload).items():  # what the body rows name themselves
                    if "base" not in entry or "depth" in entry:  # (not a delta of the older form)
                        thread.blobs[("", channel, entry["version"])] = _blob_ref(entry, seq)
            # the latest checkpoint: the last body row's (a record before 2026-12-06 names it as well)
            checkpoint_id = head.get("checkpoint_id", latest_id)
            cp = thread.checkpoints[""][checkpoint_id]
            if cp.body.seq != head["bodies"][-1]:
                return False
            thread.checkpoints[""] = {checkpoint_id: cp}
            versions = self._body(thread, cp.body)["channel_versions"]
            h = rows[at][0]
            for channel, entry in head.get("values", {}).items():  # the values the body rows do not name
                thread.blobs.setdefault(
                    ("", channel, versions[channel]),
                    None
                    if entry["type"] == "empty"
                    else _Ref(entry["type"], _handle(entry), h, None, entry.get("depth")),
                )
            key = ("", checkpoint_id)
            early = head.get("early", ())
            for seq in sorted({*head.get("writes", ()), *early}):
                data = rows[seq - start][1]
                found = _writes_key(data) if data.startswith(_WRITES_PREFIX) else None
                if found is None or found[0] != "" or (found != key and seq not in early):
                    return False
                thread.raw_writes.setdefault(found, []).append((seq, data))
            for seq, data, _prev, _hash in rows[at + 1 :]:
                if data.startswith(_MARKER_PREFIXES):
                    return False
                self._apply_bytes(thread, seq, data)
            # the latest checkpoint's values all accounted for (a checkpoint after the record that forks
            # from an older one reads values the record does not name)
            latest = thread.checkpoints[""][max(thread.checkpoints[""])]
            versions = self._body(thread, latest.body)["channel_versions"]
            if any(("", channel, version) not in thread.blobs for channel, version in versions.items()):
                return False
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, LedgerIntegrityError):
            return False  # not what this saver writes, or beyond the partial index: fold the thread
        return True

    def _anchor(self, notary: Notary, sid: str) -> Anchor:
        """``notary.resume(full=False)`` for a read: outside a write transaction another process may append
        (and sign, and retain its head) between the reads it makes, which it would report as a divergence
        (``head_mismatch``, ``stale_head``); so a refusal is believed only when the session's head did not
        move meanwhile, and otherwise the check is run again (up to :data:`WRITE_ATTEMPTS` times).

        Raises:
            LedgerIntegrityError: as :meth:`~flightlog.integrity.notary.Notary.resume`, naming the seq.
        """
        for attempt in range(WRITE_ATTEMPTS):
            before = self.store.get_session(sid)
            try:
                return notary.resume(self.store, sid, full=False, retain=False)  # a read writes nothing
            except LedgerIntegrityError:
                after = self.store.get_session(sid)
                if attempt == WRITE_ATTEMPTS - 1 or (after.head_seq, after.head_hash) == (
                    before.head_seq,
                    before.head_hash,
                ):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _extend(
        self, thread: _Thread, size: int, head_hash: str, *, tree: CompactRange | None = None
    ) -> bool:
        """Fold the rows another writer appended after what ``thread`` holds (seq ``thread.next_seq`` to
        ``size - 1``), checking that they chain onto its verified head and up to the recorded head, so a
        thread that moves on elsewhere is not re-read and re-hashed whole. False (the thread then half
        folded: the caller rebuilds it, and the full verify names any divergence) when they do not.
        ``tree``, when given, gets each row's RFC 9162 leaf hash, for the caller to compare with a signed
        tree head."""
        prev = thread.head
        sha256, pack, apply = hashlib.sha256, _U64.pack, self._apply_bytes
        # chain_hash (ledger.py) inlined: sha256(prev_hash ‖ u64_le(seq) ‖ event_bytes), hex
        with collector_paused():
            for page in self.store.read_chain(thread.session_id, start=thread.next_seq, stop=size):
                for seq, data, prev_hash, hash_ in page:
                    if (
                        prev_hash != prev
                        or sha256(prev.encode("ascii") + pack(seq) + data).hexdigest() != hash_
                    ):
                        return False
                    if tree is not None:
                        tree.append(sha256(b"\x00" + data).digest())  # RFC 9162 leaf hash (ledger.leaf_hash)
                    apply(thread, seq, data)
                    prev, thread.next_seq = hash_, seq + 1
        thread.head = prev
        return thread.next_seq == size and prev == head_hash

    def _apply_bytes(self, thread: _Thread, seq: int, data: bytes) -> None:
        """:meth:`_apply` on stored canonical bytes. Events of which the fold needs only the kind are
        recognised by their first bytes without parsing them (RFC 8785 sorts keys, so ``kind`` comes first
        in an ``llm_completed`` or ``run_terminal`` and ``custom_kind`` first in a ``custom``; canonical
        bytes are unique); a ``langgraph.writes`` event is only filed under its checkpoint, parsed when
        that checkpoint's writes are needed (:meth:`_writes_of`)."""
        if data.startswith(_LLM_PREFIX):
            thread.history += 1
            thread.run_llm += 1
        elif data.startswith(_TERMINAL_PREFIX):
            thread.run_open = False
            thread.decided.clear()  # an ended run awaits no resume
        elif data.startswith(_CHECKPOINT_PREFIX):
            self._fold_checkpoint(thread, seq, parse_json(data)["payload"])
        elif data.startswith(_USAGE_PREFIX):
            thread.run_tokens += int(parse_json(data)["payload"].get("total_tokens") or 0)
        elif data.startswith(_HEAD_PREFIX):
            return  # a head record: what the index already holds
        elif data.startswith(_WRITES_PREFIX) and (key := _writes_key(data)) is not None:
            thread.raw_writes.setdefault(key, []).append((seq, data))
            thread.write_seqs.setdefault(key, []).append(seq)
        else:
            self._apply(thread, seq, parse_json(data))

    def _writes_of(self, thread: _Thread, ns: str, checkpoint_id: str) -> dict[tuple[str, int], _Write]:
        """The pending writes of a checkpoint, ``(task_id, idx) -> write`` (the thread's own dict: copy
        before changing it), after merging the writes events filed for it and not parsed yet."""
        key = (ns, checkpoint_id)
        raw = thread.raw_writes.pop(key, None)
        if raw:
            stored = thread.writes.setdefault(key, {})
            for seq, data in raw:
                self._merge_writes_event(stored, seq, parse_json(data)["payload"])
        return thread.writes.get(key, {})

    @staticmethod
    def _merge_writes_event(stored: dict[tuple[str, int], _Write], seq: int, payload: dict[str, Any]) -> None:
        task_id, task_path = payload["task_id"], payload["task_path"]
        _merge_writes(
            stored,
            [
                _Write(task_id, w["channel"], _Ref(w["type"], _handle(w), seq), task_path, w["idx"])
                for w in payload["writes"]
            ],
        )

    def _apply(self, thread: _Thread, seq: int, wire: dict[str, Any]) -> None:
        """Fold one event, as its stored JSON (seed 000 wire shape), into the read model: the same code
        for the writer (the rows it just appended) and for a rebuild."""
        kind = wire["kind"]
        if kind == "custom":
            self._apply_custom(thread, seq, wire["custom_kind"], wire.get("payload"))
        elif kind == "run_started":
            thread.run_open, thread.run_llm, thread.run_tokens = True, 0, 0
            thread.run_id = wire["run_id"]
            thread.history += 1
        elif kind == "operation_cancelled":  # gates superseded by new input (_end_run): closed for good
            closed = set(wire["pending_call_ids"])
            for call_id in closed:
                thread.gates.pop(call_id, None)
                thread.decided.pop(call_id, None)
                thread.call_tools.pop(call_id, None)
                thread.call_turns.pop(call_id, None)
            for interrupt_id in [i for i, c in thread.aliases.items() if c in closed]:
                del thread.aliases[interrupt_id]
        elif kind == "llm_completed":
            thread.history += 1
            thread.run_llm += 1
        elif kind == "tool_completed":
            thread.history += len(wire["results"])
            for result in wire["results"]:
                thread.call_turns.pop(result["call_id"], None)
                thread.call_tools.pop(result["call_id"], None)
        elif kind == "tool_requested":
            for call in wire["calls"]:
                thread.call_turns[call["id"]] = wire["turn"]
                thread.call_tools[call["id"]] = (call["name"], call.get("arguments", ""))
        elif kind == "rollbacked":
            thread.history = min(thread.history, wire["checkpoint_history_len"])
        elif kind == "run_terminal":
            thread.run_open = False
            thread.decided.clear()  # an ended run awaits no resume
        elif kind == "tool_gated":
            thread.gates[wire["call_id"]] = wire["tool"]
        elif kind == "resumed":
            for call_id in (*wire.get("approved", ()), *wire.get("denied", ())):
                thread.gates.pop(call_id, None)
                thread.decided.pop(call_id, None)

    def _apply_custom(self, thread: _Thread, seq: int, kind: str, payload: Any) -> None:
        if kind == CHECKPOINT_KIND:
            self._fold_checkpoint(thread, seq, payload)
        elif kind == USER_MESSAGE_KIND:
            thread.history += 1
        elif kind == USAGE_KIND:
            thread.run_tokens += int(payload.get("total_tokens") or 0)
        elif kind == APPROVAL_DECISION:
            thread.gates.pop(payload["call_id"], None)
            if thread.run_open:  # else a late resume write's decision (_special_events): no resume follows
                thread.decided[payload["call_id"]] = payload["approved"] is True
        elif kind == INTERRUPT_CALL_KIND:
            thread.aliases[payload["interrupt_id"]] = payload["call_id"]
        elif kind == THREAD_DELETED_KIND:
            thread.reset()
        elif kind == RUNS_DELETED_KIND:
            doomed = set(payload["run_ids"])
            for ns, checkpoints in thread.checkpoints.items():
                for checkpoint_id in [
                    i for i, cp in checkpoints.items() if cp.metadata.get("run_id") in doomed
                ]:
                    thread.drop(ns, checkpoint_id)
        elif kind == PRUNED_KIND:
            self._prune(thread, payload["strategy"])
        elif kind == THREAD_COPIED_KIND:
            for entry in payload["blobs"]:
                thread.blobs[(entry["checkpoint_ns"], entry["channel"], entry["version"])] = _blob_ref(
                    entry, seq
                )
            for entry in payload["checkpoints"]:
                self._add_checkpoint(thread, seq, entry)
            for w in payload["writes"]:
                self._writes_of(thread, w["checkpoint_ns"], w["checkpoint_id"])  # keeps ledger order
                stored = thread.writes.setdefault((w["checkpoint_ns"], w["checkpoint_id"]), {})
                seqs = thread.write_seqs.setdefault((w["checkpoint_ns"], w["checkpoint_id"]), [])
                if not seqs or seqs[-1] != seq:
                    seqs.append(seq)
                stored[(w["task_id"], w["idx"])] = _Write(
                    w["task_id"], w["channel"], _Ref(w["type"], _handle(w), seq), w["task_path"], w["idx"]
                )
        elif kind == WRITES_KIND:
            ns, checkpoint_id = payload.get("checkpoint_ns", ""), payload["checkpoint_id"]
            self._writes_of(thread, ns, checkpoint_id)  # the ones filed before it first: ledger order
            self._merge_writes_event(thread.writes.setdefault((ns, checkpoint_id), {}), seq, payload)
            thread.write_seqs.setdefault((ns, checkpoint_id), []).append(seq)

    def _fold_checkpoint(self, thread: _Thread, seq: int, payload: dict[str, Any]) -> None:
        """Fold a ``langgraph.checkpoint`` payload: its channel values filed by ``(ns, channel, version)``,
        the checkpoint filed (:meth:`_add_checkpoint`), the readable history length at it. The fold's most
        frequent event: :func:`_blob_ref` is inlined, each ``_Ref`` built by ``tuple.__new__`` (no
        ``__new__`` frame)."""
        ns, checkpoint_id = payload.get("checkpoint_ns", ""), payload["checkpoint_id"]
        blobs, new = thread.blobs, tuple.__new__
        for channel, entry in _with_versions(payload).items():
            kind = entry["type"]
            blobs[(ns, channel, entry["version"])] = (
                None
                if kind == "empty"
                else new(_Ref, (kind, _handle(entry), seq, entry.get("base"), entry.get("depth")))
            )
        self._add_checkpoint(thread, seq, payload)
        thread.cp_history[(ns, checkpoint_id)] = thread.history
        thread.last_cp[ns] = checkpoint_id

    def _add_checkpoint(self, thread: _Thread, seq: int, payload: dict[str, Any]) -> None:
        """File a checkpoint (a ``langgraph.checkpoint`` payload or a ``thread_copied`` entry); a body
        stored as a ``patch`` is bound to its parent's body as the thread holds it at this row."""
        ns, entry = payload.get("checkpoint_ns", ""), payload["metadata"]
        if "json" in entry:
            metadata = entry["json"]
        else:
            meta = self._val(entry, seq)
            metadata = self._load(thread, meta.ref) if meta.ref is not None else meta.json
        parent = payload.get("parent_checkpoint_id")
        checkpoints = thread.checkpoints.setdefault(ns, {})
        if "patch" in payload:
            base = checkpoints.get(parent or "")
            if base is None:
                raise LedgerIntegrityError(
                    session_id=thread.session_id,
                    seq=seq,
                    reason=f"checkpoint patch: its parent {parent!r} is not in the thread",
                )
            body = _Body(
                seq, None, payload["patch"], base.body, payload["checkpoint_id"], payload["channels"]
            )
        else:
            # (its stored channel entries kept too: a head record leaves out the empty ones, _head_payload)
            body = _Body(seq, val=self._val(payload["checkpoint"], seq), channels=payload.get("channels"))
        checkpoints[payload["checkpoint_id"]] = _Cp(
            body, metadata, parent, None if "json" in entry else entry
        )

    @staticmethod
    def _prune(thread: _Thread, strategy: str) -> None:
        """``keep_latest``: each namespace keeps its latest checkpoint (highest id) and its writes;
        ``delete``: nothing is kept (as ``delete_thread``)."""
        if strategy == "delete":
            thread.reset()
            return
        for ns, checkpoints in thread.checkpoints.items():
            latest = max(checkpoints) if checkpoints else None
            for checkpoint_id in [i for i in checkpoints if i != latest]:
                thread.drop(ns, checkpoint_id)

    @staticmethod
    def _val(entry: dict[str, Any], seq: int) -> _Val:
        if "json" in entry:
            return _Val(entry["json"], None)
        return _Val(None, _Ref(entry["type"], _handle(entry), seq))

    def _load(self, thread: _Thread, ref: _Ref) -> Any:
        """Deserialize an artifact after checking that its bytes hash to its handle (:data:`NULL_HANDLE`:
        the empty bytes, not read)."""
        with _refusing(thread, ref.seq):
            content = b"" if ref.handle == NULL_HANDLE else self.store.get_artifact(ref.handle)
        return self._loads(thread, ref, content)

    def _loads(self, thread: _Thread, ref: _Ref, content: bytes | None) -> Any:
        """Deserialize the bytes read for ``ref`` after checking that they hash to its handle (the empty
        bytes for :data:`NULL_HANDLE` when the store holds no such artifact: a thread written since
        2026-12-05 stores none)."""
        if content is None and ref.handle == NULL_HANDLE:
            content = b""
        content = _checked(
            thread, ref.seq, ref.handle.removeprefix("sha256:"), content, f"artifact {ref.handle}"
        )
        return self._deserialize(thread, ref.seq, (ref.type, content), ref.handle)

    def _deserialize(self, thread: _Thread, seq: int, typed: tuple[str, bytes], handle: str) -> Any:
        """``typed`` (serde type tag, authenticated bytes of artifact ``handle``) deserialized for a value
        named by row ``seq``: with the saver's serde, unless the row is one no verified signature covers and
        this saver did not write (:meth:`_Thread.untrusted`: a run in progress elsewhere, a writer killed
        mid-run, or rows chained without the signing key), when it goes to :func:`_strict_clone` instead,
        as LangGraph's default serde imports whatever module a msgpack value names.

        Raises:
            LedgerIntegrityError: the row is unsigned and the value names a type the strict serde refuses,
                has a type tag it does not load, or the saver's serde has no strict clone; names ``seq``.
        """
        if not thread.untrusted(seq):
            return self.serde.loads_typed(typed)
        cached = self._strict
        if cached is None or cached[0] is not self.serde:
            cached = self._strict = (self.serde, _strict_clone(self.serde))
        strict = cached[1]
        if strict is None:
            what = f"the saver's serde ({type(self.serde).__name__}) has no strict mode to read it with"
        elif typed[0] not in _TAIL_TYPES:
            what = f"its serde type {typed[0]!r} is not one the strict mode loads"
        else:
            blocked: builtins.list[str] = []
            _strict_loads.blocked = blocked
            try:
                value = strict.loads_typed(typed)
            finally:
                _strict_loads.blocked = None
            if not blocked:
                return value
            what = (
                f"it names {', '.join(sorted(set(blocked)))}, which LangGraph's strict msgpack mode refuses "
                "(allow a type you trust with the serde's allowed_msgpack_modules)"
            )
        raise _UnsignedValue(
            session_id=thread.session_id,
            seq=seq,
            reason=f"value {handle} is named by a row no signed checkpoint covers (the unsigned tail: a run "
            f"in progress, a writer killed mid-run, or rows chained without the signing key) and {what}; "
            f"`flightlog audit {thread.session_id}` shows the unanchored tail",
        )

    def _load_blob(self, thread: _Thread, ns: str, channel: str, version: str | int | float) -> Any:
        """The value of ``channel`` at ``version``: one artifact, or for a list stored as deltas the base
        value it extends followed by each delta's elements (each artifact's sha256 checked).

        Raises:
            LedgerIntegrityError: a delta's base is not in the thread, or an artifact is missing/altered.
        """
        chain: builtins.list[_Ref] = []
        ref = thread.blobs[(ns, channel, version)]
        if ref is not None and ref.depth is not None:
            return self._load_linked(thread, ref)
        while ref is not None and ref.base is not None:
            chain.append(ref)
            base_ref = thread.blobs.get((ns, channel, ref.base), False)
            if base_ref is False:
                raise LedgerIntegrityError(
                    session_id=thread.session_id,
                    seq=ref.seq,
                    reason=f"channel {channel!r}: the delta's base version {ref.base!r} is not in the thread",
                )
            ref = base_ref  # type: ignore[assignment]  # _Ref | None once False is excluded
        if not chain:
            return None if ref is None else self._load(thread, ref)
        refs = [*([] if ref is None else [ref]), *reversed(chain)]
        try:
            contents = self.store.get_artifacts([r.handle for r in refs])  # one read for the whole chain
        except ArtifactIntegrityError as exc:
            seq = next((r.seq for r in refs if r.handle == exc.handle), refs[-1].seq)  # the row naming it
            with _refusing(thread, seq):
                raise
        value: Any = []
        with collector_paused():
            for r in refs:
                value.extend(self._loads(thread, r, contents.get(r.handle)))
        return value

    def _load_linked(self, thread: _Thread, ref: _Ref) -> Any:
        """The list a content-linked delta stands for (:data:`DELTA_MAGIC`): its links followed down to a
        whole list, each link's sha256 checked against the digest that named it, then the whole list
        followed by each delta's elements (each artifact checked too, before any byte of the chain reaches
        the serde). Needs no event but the one naming ``ref``. Reads one link per delta above the highest
        anchor and one per anchor below it (:data:`SEGMENT`), then the elements in one statement per 500.

        Raises:
            LedgerIntegrityError: an artifact is missing, altered (names ``ref.seq`` and the digest), or
                not a delta of the depth its successor says, or the whole value is not a list.
        """
        parts: builtins.list[tuple[str, str]] = []  # (serde type, elements' digest), newest first
        handle, depth = ref.handle.removeprefix("sha256:"), ref.depth

        def checked(handle: str, content: bytes | None) -> bytes:
            return _checked(
                thread, ref.seq, handle, content, f"artifact {handle} of channel value {ref.handle}"
            )

        def bad(handle: str, what: str) -> LedgerIntegrityError:
            return LedgerIntegrityError(
                session_id=thread.session_id,
                seq=ref.seq,
                reason=f"artifact {handle} of channel value {ref.handle}: {what}",
            )

        while True:
            with _refusing(thread, ref.seq, f" of channel value {ref.handle}"):
                content = self.store.get_artifact(handle)
            header = _split_delta(checked(handle, content))
            if header is None:
                raise bad(handle, "not a content-linked delta")
            kind, elements, base, step = header.get("t"), header.get("e"), header.get("b"), header.get("d")
            if (
                type(step) is not int
                or step != depth
                or not isinstance(kind, str)
                or not isinstance(elements, str)
                or not isinstance(base, str)
            ):
                raise bad(handle, f"delta header {header!r} does not continue a chain at depth {depth}")
            below, run, run_type = header.get("a"), header.get("h"), header.get("ht")
            if (
                isinstance(below, str)
                and isinstance(run_type, str)
                and isinstance(run, builtins.list)
                and _anchor_run(run, step, elements)
            ):
                parts.extend((run_type, e) for e in run)  # the SEGMENT deltas down to the one above `below`
                step -= SEGMENT
                if step == 0:
                    root, root_type = below, header.get("at")
                    break
                handle, depth = below, step
                continue
            parts.append((kind, elements))
            if step == 1:
                root, root_type = base, header.get("bt")
                break
            handle, depth = base, step - 1
        if not isinstance(root_type, str):
            raise bad(handle, "the link to the whole list does not name its type")
        with _refusing(thread, ref.seq, f" of channel value {ref.handle}"):
            contents = self.store.get_artifacts([root, *(e for _, e in parts)])
        loaded = [(root_type, checked(root, contents.get(root)))]
        loaded.extend((kind, checked(e, contents.get(e))) for kind, e in reversed(parts))
        with collector_paused():
            value = self._deserialize(thread, ref.seq, loaded[0], ref.handle)
            if type(value) is not builtins.list:
                raise bad(root, "the whole value a delta chain extends is not a list")
            for typed in loaded[1:]:
                value.extend(self._deserialize(thread, ref.seq, typed, ref.handle))
        return value

    def _body(self, thread: _Thread, body: _Body) -> Any:
        """The checkpoint body ``body`` stores: a whole one, or its base's with the patches on the way
        applied (at most :data:`KEYFRAME` - 1; each resolved body is cached and shared: copy it before
        handing it out).

        Raises:
            LedgerIntegrityError: a patch does not apply to its base (names the patch's seq), or an
                artifact is missing or altered.
        """
        chain: builtins.list[_Body] = []
        b = body
        while b.resolved is None and b.base is not None:
            chain.append(b)
            b = b.base
        if b.resolved is not None:
            value: Any = b.resolved
        elif b.val is None:  # pragma: no cover - a whole body always has val
            raise AssertionError("a checkpoint body with neither a value nor a base")
        elif b.val.ref is None:
            value = b.resolved = b.val.json
        else:
            value = self._load(thread, b.val.ref)  # not cached: deserialized objects are not shared
        for link in reversed(chain):
            try:
                value = _patched(_rebased(value, _over(link.id, link.channels or {})), link.patch or {})
            except (KeyError, TypeError, AttributeError) as exc:
                raise LedgerIntegrityError(
                    session_id=thread.session_id,
                    seq=link.seq,
                    reason=f"checkpoint patch does not apply to its parent's body: {exc!r}",
                ) from exc
            link.resolved = value
        return value

    def _tuple(self, thread: _Thread, ns: str, checkpoint_id: str, config: RunnableConfig) -> CheckpointTuple:
        cp = thread.checkpoints[ns][checkpoint_id]
        body: dict[str, Any] = copy.deepcopy(self._body(thread, cp.body))
        values: dict[str, Any] = {}
        for channel, version in body["channel_versions"].items():
            key = (ns, channel, version)
            if key not in thread.blobs:
                continue
            if thread.blobs[key] is not None:
                values[channel] = self._load_blob(thread, ns, channel, version)
        stored = self._writes_of(thread, ns, checkpoint_id)
        ordered = sorted(stored.values(), key=_writes_sort_key)
        pending: builtins.list[PendingWrite] = [
            (w.task_id, w.channel, self._load(thread, w.ref)) for w in ordered
        ]
        parent: RunnableConfig | None = (
            {
                "configurable": {
                    "thread_id": thread.thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": cp.parent_id,
                }
            }
            if cp.parent_id
            else None
        )
        checkpoint: Checkpoint = {**body, "channel_values": values}  # type: ignore[typeddict-item]  # body is a stored Checkpoint minus channel_values
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=copy.deepcopy(cp.metadata),  # type: ignore[arg-type]  # stored CheckpointMetadata
            parent_config=parent,
            pending_writes=pending,
        )

    # ─── BaseCheckpointSaver: reads ───────────────────────────────────────────────────────
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config["configurable"]["checkpoint_id"]`` of the thread and namespace
        (``checkpoint_ns``, default ``""``), or the latest one (highest id) without a checkpoint id.

        Returns None when there is none (or the thread was deleted after it). As InMemorySaver: channel
        values are the stored value of each channel at its version in ``channel_versions``, pending
        writes are in ``writes_sort_key`` order, ``parent_config`` points at the parent checkpoint, and
        ``config`` is the given one when it names a checkpoint.

        Raises:
            KeyError: no ``thread_id`` in ``config["configurable"]``.
            LedgerIntegrityError: see the class.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        with self._lock:
            if ns == "" and not get_checkpoint_id(config) and thread_id not in self._threads:
                head = self._head(thread_id)
                if head is not None and (roots := head.checkpoints.get("")):
                    latest = max(roots)
                    try:
                        return self._tuple(head, "", latest, _config(thread_id, "", latest))
                    except LedgerIntegrityError:
                        # an artifact did not check (or a delta's base is older than the head): the full
                        # path below reads it again and refuses naming the event's seq, or reads it whole
                        self._heads.pop(thread_id, None)
            return self._reread_once(self._thread(thread_id), lambda t: self._latest_or(t, ns, config))[0]

    def _reread_once(self, thread: _Thread, read: Callable[[_Thread], _T]) -> tuple[_T, _Thread]:
        """``read(thread)`` and the thread it read; when it refuses a value named by another writer's rows,
        read unsigned (:class:`_UnsignedValue` on a thread that :attr:`_Thread.moved`), that writer may have
        signed them since, so the thread is read afresh (its signatures checked again) and ``read`` runs
        once more on it before the value is refused. Called with ``self._lock`` held.

        Raises:
            LedgerIntegrityError: ``read`` refused a value (on the fresh thread, or on one not moved).
        """
        try:
            return read(thread), thread
        except _UnsignedValue:
            if not thread.moved:
                raise
            self._threads.pop(thread.thread_id, None)
            fresh = self._thread(thread.thread_id)
            return read(fresh), fresh

    def _latest_or(self, thread: _Thread, ns: str, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` on the index ``thread``: the checkpoint ``config`` names, or the latest."""
        checkpoints = thread.checkpoints.get(ns, {})
        if checkpoint_id := get_checkpoint_id(config):
            if checkpoint_id not in checkpoints:
                return None
            return self._tuple(thread, ns, checkpoint_id, config)
        if not checkpoints:
            return None
        latest = max(checkpoints)
        return self._tuple(thread, ns, latest, _config(thread.thread_id, ns, latest))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id), per thread and namespace, as InMemorySaver.list.

        Args:
            config: Restricts to its ``thread_id`` (and ``checkpoint_ns`` / ``checkpoint_id`` when present);
                None lists every LangGraph thread in the store, oldest session first.
            filter: Metadata keys that must equal these values.
            before: Only checkpoints whose id is lower than its ``checkpoint_id``.
            limit: At most this many tuples.

        Raises:
            LedgerIntegrityError: see the class.
        """
        if config is not None:
            thread_ids: Sequence[str] = (config["configurable"]["thread_id"],)
            want_ns: str | None = config["configurable"].get("checkpoint_ns")
            want_id = get_checkpoint_id(config)
        else:
            thread_ids = [
                r.session_id.removeprefix(SESSION_PREFIX)
                for r in self.store.list_sessions()
                if r.source == SOURCE and r.session_id.startswith(SESSION_PREFIX)
            ]
            want_ns, want_id = None, None
        before_id = get_checkpoint_id(before) if before else None
        remaining = limit
        for thread_id in thread_ids:
            with self._lock:
                thread = self._thread(thread_id)
                picked: builtins.list[tuple[str, str]] = []
                for ns, checkpoints in thread.checkpoints.items():
                    if want_ns is not None and ns != want_ns:
                        continue
                    for checkpoint_id in sorted(checkpoints, reverse=True):
                        if want_id and checkpoint_id != want_id:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        metadata = checkpoints[checkpoint_id].metadata
                        if filter and not all(v == metadata.get(k) for k, v in filter.items()):
                            continue
                        picked.append((ns, checkpoint_id))
            for ns, checkpoint_id in picked:
                if remaining is not None and remaining <= 0:
                    return
                read = functools.partial(self._held_tuple, ns=ns, checkpoint_id=checkpoint_id)
                with self._lock:
                    item, thread = self._reread_once(thread, read)
                if item is None:
                    continue
                if remaining is not None:
                    remaining -= 1
                yield item

    def _held_tuple(self, thread: _Thread, *, ns: str, checkpoint_id: str) -> CheckpointTuple | None:
        """:meth:`_tuple` of a checkpoint :meth:`list` picked; None when ``thread`` no longer holds it (a thread
        read afresh after another writer deleted or pruned it)."""
        if checkpoint_id not in thread.checkpoints.get(ns, {}):
            return None
        return self._tuple(thread, ns, checkpoint_id, _config(thread.thread_id, ns, checkpoint_id))

    # ─── BaseCheckpointSaver: writes ──────────────────────────────────────────────────────
    def _recorder(self, thread: _Thread) -> Recorder:
        """The thread's recorder, (re-)attaching when it has none or another writer took authority since
        (called inside the write transaction, so the epoch read is the one the append is checked against)."""
        rec = thread.recorder
        if rec is not None and (
            rec.next_seq != thread.next_seq or self.store.authority_epoch(thread.session_id) != rec.epoch
        ):
            thread.recorder = None  # fenced off or behind: take authority again from the verified ledger
        if thread.recorder is None:
            if thread.next_seq == 0:
                thread.recorder = Recorder.create(
                    self.store,
                    session_id=thread.session_id,
                    task=f"LangGraph thread {thread.thread_id}",
                    source=SOURCE,
                    metadata={"thread_id": thread.thread_id, "run_source": "workflow"},
                    notary=self.notary,
                )
            else:  # signed: from the latest signed checkpoint and the rows after it, not every row again
                thread.recorder = Recorder.attach(
                    self.store, thread.session_id, notary=self.notary, full=self.notary is None
                )
        return thread.recorder

    def _typed(self, rec: Recorder, value: Any) -> dict[str, str]:
        """``value`` serialized and stored as an artifact: its entry ``{"type", "ref"}``; the serde's
        ``None`` (type ``null``, no bytes) is ``{"type": "null"}``, no artifact (:data:`NULL_HANDLE`)."""
        kind, data = self.serde.dumps_typed(value)
        if kind == "null" and not data:
            return {"type": kind}
        return {"type": kind, "ref": rec.put_artifact(data)}

    def _inline_or_ref(self, rec: Recorder, value: Any) -> dict[str, Any]:
        return {"json": value} if _exact_json(value) else self._typed(rec, value)

    def _write(
        self,
        thread_id: str,
        kind: str,
        build: Callable[[_Thread, Recorder], tuple[builtins.list[Event], dict[str, Any]] | None],
    ) -> None:
        """Append the readable events and then the ``custom`` event of kind ``kind`` built by ``build``
        (which stores their artifacts; None: nothing to write) in one transaction, together with the
        session row when this is the thread's first write; then fold them into the index. ``build`` sees
        the thread as of inside the transaction (after any re-fold).

        Re-folds and re-attaches when another writer moved the thread on (module docstring: writers);
        retries a write the store refused because a concurrent writer committed first. On failure nothing
        is written and the index is rebuilt from the ledger on next use.

        Raises:
            StaleWriter, AppendConflict: still refused after :data:`WRITE_ATTEMPTS` attempts.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            thread: _Thread | None = None
            try:
                with self.store.transaction():
                    thread = self._thread(thread_id)
                    rec = self._recorder(thread)
                    with rec.atomic():
                        built = build(thread, rec)
                        if built is None:
                            raise _NothingToWrite  # rolls back a session row or attach made for it
                        events = [*built[0], Custom(custom_kind=kind, payload=built[1])]
                        rows = rec.append_many(events)
                        if (status := _status_after(events)) is not None:
                            self.store.set_session_status(thread.session_id, status)
                        if _stopped_after(thread, events):
                            if any(isinstance(e, RunTerminal | Suspended) for e in events):
                                # the run ended or waits: record what its latest checkpoint reads from
                                # (folded first: the head describes the thread after these rows); writes
                                # landing later are folded forward from it by a reader
                                for row in rows:
                                    self._apply_bytes(thread, row.seq, row.event_bytes)
                                thread.next_seq, thread.head = rec.next_seq, rec.head
                                head = self._head_payload(thread)
                                rows = (
                                    []
                                    if head is None
                                    else rec.append_many([Custom(custom_kind=HEAD_KIND, payload=head)])
                                )
                            rec.checkpoint()  # the graph stopped: sign what it did now, not at the cadence
            except _NothingToWrite:
                self._forget(thread)
                return
            except (StaleWriter, AppendConflict):
                self._forget(thread)
                if attempt == WRITE_ATTEMPTS:
                    raise
                continue
            except BaseException:
                self._forget(thread)
                raise
            for row in rows:
                self._apply_bytes(thread, row.seq, row.event_bytes)
            thread.next_seq, thread.head = rec.next_seq, rec.head
            return

    def _head_payload(self, thread: _Thread) -> dict[str, Any] | None:
        """The :data:`HEAD_KIND` record of the thread's root namespace as the index holds it; None when
        there is no root checkpoint or one of its values is a delta of the older, version-linked form
        (a read then folds the thread)."""
        roots = thread.checkpoints.get("", {})
        if not roots:
            return None
        latest = max(roots)
        cp = roots[latest]
        bodies: builtins.list[int] = []
        # (channel, version) a body row itself stores as empty (its entries: _Body.channels)
        empties: set[tuple[str, Any]] = set()
        b: _Body | None = cp.body
        while b is not None:
            bodies.append(b.seq)
            empties.update((c, e["version"]) for c, e in (b.channels or {}).items() if e["type"] == "empty")
            b = b.base
        values: dict[str, Any] = {}
        named = set(bodies)  # rows a reader folds anyway: their own channel entries are not repeated
        for channel, version in self._body(thread, cp.body).get("channel_versions", {}).items():
            key = ("", channel, version)
            if key not in thread.blobs:
                continue
            ref = thread.blobs[key]
            if ref is not None and ref.base is not None and ref.depth is None:
                return None
            if (ref.seq in named) if ref is not None else ((channel, version) in empties):
                continue
            values[channel] = {"type": "empty"} if ref is None else _value_entry(ref)
        # the latest checkpoint is the last body row's; writes and values only when there are some
        head: dict[str, Any] = {**_ns_entry(""), "bodies": bodies[::-1]}
        if writes := builtins.list(thread.write_seqs.get(("", latest), ())):
            head["writes"] = writes
        if values:
            head["values"] = values
        # writes saved before their checkpoint (LangGraph saves in the background): a checkpoint put
        # after this record may own them. Only ids above the latest: a head read serves the highest id,
        # and writes whose checkpoint never came (a writer killed between the two) would otherwise be
        # listed by every later record, each later read reaching back to them
        early = sorted(
            seq
            for (ns, cid), seqs in thread.write_seqs.items()
            if ns == "" and cid > latest and cid not in roots
            for seq in seqs
        )
        if early:
            head["early"] = early
        return head

    @staticmethod
    def _forget(thread: _Thread | None) -> None:
        """After a failed write: rebuild the index and re-attach on next use (the session row and the
        epoch bump of a first write may have rolled back with it)."""
        if thread is not None:
            thread.next_seq = -1
            thread.recorder = None

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append one ``langgraph.checkpoint`` event, in one transaction with the artifacts of the values
        of the channels in ``new_versions`` (only those: LangGraph passes the channels that changed) and,
        in the root namespace, the readable events of the step (module docstring: readable events).

        A list value that extends the parent checkpoint's value of the channel (same serialized elements
        first) is stored as a delta: the new elements only, with the base version (module docstring).
        The parent is ``config["configurable"]["checkpoint_id"]``; metadata is
        ``get_checkpoint_metadata(config, metadata)``, as InMemorySaver.put.

        Returns:
            ``{"configurable": {"thread_id", "checkpoint_ns", "checkpoint_id"}}`` of the stored checkpoint.

        Raises:
            KeyError: no ``thread_id`` in ``config["configurable"]``.
            LedgerIntegrityError: the thread's ledger does not verify (nothing written).
            StaleWriter: another saver took over writing this thread.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        body: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = body.pop("channel_values")
        meta = get_checkpoint_metadata(config, metadata)
        parent: str | None = config["configurable"].get("checkpoint_id")

        def build(thread: _Thread, rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]]:
            channels: dict[str, Any] = {}
            appended: builtins.list[BaseMessage] = []
            dropped: builtins.list[BaseMessage] | None = None  # None: no earlier message rewritten
            for channel, version in new_versions.items():
                if channel not in values:
                    channels[channel] = {"version": version, "type": "empty"}
                    continue
                value = values[channel]
                entry, new, removed = self._store_value(thread, rec, ns, channel, version, value, parent)
                channels[channel] = {"version": version, **entry}
                if removed and ns == "" and (old := self._dropped(thread, ns, channel, parent, removed)):
                    dropped = [*(dropped or []), *old]
                    appended.extend(m for m in new if isinstance(m, BaseMessage))
                elif _is_messages(new):
                    appended.extend(new)
            payload: dict[str, Any] = {
                **_ns_entry(ns),
                "checkpoint_id": checkpoint["id"],
                **self._body_entry(thread, rec, ns, parent, body, checkpoint["id"], channels),
                "metadata": self._inline_or_ref(rec, meta),
                **_shared_version(channels),
            }
            if parent:
                payload["parent_checkpoint_id"] = parent
            events: builtins.list[Event] = []
            if ns != "" and checkpoint["id"] not in thread.checkpoints.get(ns, {}):
                events = self._subgraph_events(
                    thread, ns, checkpoint["id"], parent, dict(meta), values, appended
                )
            if ns == "" and checkpoint["id"] not in thread.checkpoints.get(ns, {}):
                self._writes_of(thread, ns, checkpoint["id"])  # writes saved before it, for its events
                events = self._step_events(
                    thread, checkpoint["id"], parent, dict(meta), values, (appended, dropped), config
                )
                if (stop := self._stops.get(checkpoint["id"])) is not None:  # reported before this put
                    events.extend(self._stop_events(thread, meta.get("step"), stop, values, events))
            return events, payload

        with self._lock:
            self._write(thread_id, CHECKPOINT_KIND, build)
            if ns == "":
                self._stops.pop(checkpoint["id"], None)
                self._root_thread.pop(self._last_root.get(thread_id, ""), None)
                self._last_root[thread_id] = checkpoint["id"]
                self._root_thread[checkpoint["id"]] = thread_id
        return _config(thread_id, ns, checkpoint["id"])

    def _child_call_turns(self, sid: str) -> dict[str, int]:
        """Requested tool call id -> turn of its ``tool_requested`` in a subgraph run's session (read when a
        step of that run answers calls: the thread's fold does not hold the child's events)."""
        turns: dict[str, int] = {}
        for row in self.store.read_events(sid):
            if row.kind == "tool_requested":
                wire = parse_json(row.event_bytes)
                turns.update((call["id"], wire["turn"]) for call in wire["calls"])
        return turns

    def _subgraph_events(
        self,
        thread: _Thread,
        ns: str,
        checkpoint_id: str,
        parent: str | None,
        meta: dict[str, Any],
        values: dict[str, Any],
        appended: builtins.list[BaseMessage],
    ) -> builtins.list[Event]:
        """Record a subgraph checkpoint as its run's readable events, in the run's own session (module
        docstring: subgraphs), appended in the thread's write transaction; returns the events for the
        thread's session (the process table entries of a subgraph of the root graph)."""
        outer, _, _ = ns.rpartition("|")
        node = ns.rsplit("|", 1)[-1].split(":", 1)[0]
        sid = f"{SUBGRAPH_PREFIX}{thread.thread_id}|{ns}"
        parent_sid = f"{SUBGRAPH_PREFIX}{thread.thread_id}|{outer}" if outer else thread.session_id
        outer_cp = thread.checkpoints.get(outer, {}).get(thread.last_cp.get(outer, ""))
        outer_step = outer_cp.metadata.get("step") if outer_cp is not None else None
        outer_turn = outer_step + 1 if isinstance(outer_step, int) and outer_step >= 0 else 0
        step = meta.get("step")
        turn = step if isinstance(step, int) and step > 0 else 0
        child = self._child_recorder(
            sid, parent_sid, f"LangGraph subgraph {node} of thread {thread.thread_id}"
        )
        parent_cp = thread.checkpoints.get(ns, {}).get(parent or "")
        entry: builtins.list[Event] = []
        events: builtins.list[Event] = []
        if meta.get("source") == "input":
            start = values.get("__start__")
            held = _input_messages(start)
            asks = [m for m in held if isinstance(m, HumanMessage)] if isinstance(held, list) else []
            goal = _text(asks[-1].content) if asks else _goal(start)
            prompt = _system_prompt(held)
            events.append(RunStarted(run_id=checkpoint_id, goal=goal, system_prompt=prompt))
            entry.append(self._process(outer_turn, sid, parent_sid, node, "running", None))
        else:
            if parent_cp is None or parent_cp.metadata.get("source") != "input":  # else: its input
                asked = (
                    self._child_call_turns(sid) if any(isinstance(m, ToolMessage) for m in appended) else None
                )
                events.extend(_message_events(appended, turn, skip_user=False, call_turns=asked))
            if meta.get("source") == "loop" and _finished(values):
                llm, tokens = 0, 0
                for row in self.store.read_events(sid):
                    wire = parse_json(row.event_bytes)
                    llm += wire["kind"] == "llm_completed"
                    if wire["kind"] == "custom" and wire["custom_kind"] == USAGE_KIND:
                        tokens += int(wire["payload"].get("total_tokens") or 0)
                for e in events:
                    llm += isinstance(e, LlmCompleted)
                    if isinstance(e, Custom) and e.custom_kind == USAGE_KIND:
                        tokens += int(e.payload.get("total_tokens") or 0)
                events.append(RunTerminal(reason="completed", turns_used=llm, total_tokens=tokens))
                entry.append(self._process(outer_turn, sid, parent_sid, node, "exited", "completed"))
        events.append(
            Custom(
                custom_kind=SUBGRAPH_STEP_KIND,
                payload={"thread_id": thread.thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id},
            )
        )
        child.append_many(events)
        if (status := _status_after(events)) is not None:
            self.store.set_session_status(sid, status)
        if any(isinstance(e, RunTerminal) for e in events):
            self._children.pop(sid, None)
        if outer and entry:  # a nested subgraph: its entry goes to the enclosing subgraph's run
            self._child_recorder(parent_sid, thread.session_id, "").append_many(entry)
            return []
        return entry

    @staticmethod
    def _process(
        turn: int, sid: str, parent_sid: str, node: str, state: str, termination: str | None
    ) -> AgentProcessChanged:
        """A process table entry of a subgraph run (the kernel's sub-agent record, seed 000)."""
        return AgentProcessChanged(
            turn=turn,
            agent_id=sid,
            parent_session_id=parent_sid,
            role=node,
            isolation="shared",
            context_inheritance="full",
            state=state,
            result_termination=termination,
        )

    def _child_recorder(self, sid: str, parent_sid: str, task: str) -> Recorder:
        """The recorder of a subgraph run's session: created with the thread's first checkpoint of the
        subgraph, else (re-)attached when it is not at the session's head and epoch (another writer, or a
        rolled-back write)."""
        try:
            record = self.store.get_session(sid)
        except SessionNotFound:
            record = None
        rec = self._children.get(sid)
        if record is None:
            rec = Recorder.create(
                self.store,
                session_id=sid,
                task=task,
                source=SUBGRAPH_SOURCE,
                parent_session_id=parent_sid,
                metadata={"run_source": "workflow"},
                notary=self.notary,
            )
        elif (
            rec is None or rec.next_seq != record.head_seq + 1 or self.store.authority_epoch(sid) != rec.epoch
        ):
            rec = Recorder.attach(self.store, sid, notary=self.notary, full=self.notary is None)
        self._children[sid] = rec
        return rec

    @property
    def lifecycle(self) -> GraphCallbackHandler:
        """A LangGraph graph lifecycle callback handler that records static interrupts on this saver.

        LangGraph tells a checkpointer nothing when a graph stops at an ``interrupt_before`` /
        ``interrupt_after`` node (the last ``put`` looks like any step's); it reports the stop only to the
        :class:`langgraph.callbacks.GraphCallbackHandler` callbacks of the run. Pass this one with the
        graph's runs: ``graph.with_config(callbacks=[saver.lifecycle])`` or ``config["callbacks"]``; each
        stop at a root checkpoint of a run still open is then recorded as ``suspended`` (module docstring).
        Dynamic ``interrupt()`` and subgraph stops are ignored here (the writes record the former).

        Raises:
            ImportError: the installed LangGraph has no ``langgraph.callbacks`` (lifecycle callbacks).
        """
        if self._lifecycle is None:
            from langgraph.callbacks import GraphCallbackHandler, GraphInterruptEvent

            saver = self

            class _Lifecycle(GraphCallbackHandler):
                def on_interrupt(self, event: GraphInterruptEvent) -> None:
                    if event.status in ("interrupt_before", "interrupt_after") and not event.checkpoint_ns:
                        saver._static_interrupt(event.checkpoint_id, event.status)

            self._lifecycle = _Lifecycle()
        return self._lifecycle

    def _static_interrupt(self, checkpoint_id: str, status: str) -> None:
        """Record that the graph stopped at root checkpoint ``checkpoint_id`` for a static interrupt:
        ``suspended`` now when its ``put`` is recorded, else with that ``put`` (LangGraph saves checkpoints
        in the background, so the callback may come first)."""
        with self._lock:
            thread_id = self._root_thread.get(checkpoint_id)
            if thread_id is None:
                self._stops[checkpoint_id] = status
                while len(self._stops) > _MAX_STOPS:  # stops of checkpoints another saver puts: not ours
                    self._stops.pop(next(iter(self._stops)))
                return

            def build(thread: _Thread, _rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]] | None:
                cp = thread.checkpoints.get("", {}).get(checkpoint_id)
                if cp is None or thread.last_cp.get("") != checkpoint_id:
                    return None  # the thread moved on (another writer) or forgot it
                values = self._tuple(thread, "", checkpoint_id, _config(thread_id, "", checkpoint_id))
                events = self._stop_events(
                    thread, cp.metadata.get("step"), status, values.checkpoint["channel_values"], []
                )
                if not events:
                    return None
                payload = {"thread_id": thread_id, "checkpoint_id": checkpoint_id, "status": status}
                return events, payload

            self._write(thread_id, STOPPED_KIND, build)

    def _body_entry(
        self,
        thread: _Thread,
        rec: Recorder,
        ns: str,
        parent: str | None,
        body: dict[str, Any],
        checkpoint_id: str,
        channels: dict[str, Any],
    ) -> dict[str, Any]:
        """How a checkpoint body is stored (module docstring): ``{"patch": ...}`` on the parent's body
        (:func:`_rebased` with what the event's ``checkpoint_id`` and stored ``channels`` say) when both
        are exact JSON, the parent is in the thread, its patch chain is shorter than :data:`KEYFRAME` - 1
        and the patch applies back to exactly ``body``; else ``{"checkpoint": {"json"} or {"type",
        "ref"}}``, whole."""
        if not _exact_json(body):
            return {"checkpoint": self._typed(rec, body)}
        cp = thread.checkpoints.get(ns, {}).get(parent or "")
        if (
            cp is not None
            and cp.body.depth + 1 < KEYFRAME
            and (cp.body.val is None or cp.body.val.ref is None)
            and _exact_json(over := _over(checkpoint_id, channels))
        ):
            base = _rebased(self._body(thread, cp.body), over)
            patch = _diff(base, body)
            if _same(_patched(base, patch), body):
                return {"patch": patch}
        return {"checkpoint": {"json": body}}

    def _store_value(
        self,
        thread: _Thread,
        rec: Recorder,
        ns: str,
        channel: str,
        version: str | int | float,
        value: Any,
        parent: str | None,
    ) -> tuple[dict[str, Any], Any, int]:
        """Store one channel value; returns its entry, what is new in it and how many of the parent's
        elements it drops: for a list, the elements after the parent's value when that value is the list's
        beginning (serialized element by element and compared by their sha256; stored as a delta; drops
        none), else the elements from the first one that differs from the parent's (a rewrite: it drops the
        parent's elements from there on), else the whole value."""
        if type(value) is not list:
            return self._typed(rec, value), value, 0
        if not value:  # emptied (REMOVE_ALL_MESSAGES): drops the parent's whole list
            base = self._base_list(thread, ns, channel, parent)
            return self._typed(rec, value), value, len(base[1]) if base is not None else 0
        elements = self._digests(value)
        base = self._base_list(thread, ns, channel, parent)
        thread.lists[(ns, channel)] = (version, elements)
        if base is not None:
            base_version, base_elements = base
            n = len(base_elements)
            if 0 < n <= len(elements) and elements[:n] == base_elements:
                linked = self._linked_delta(thread, rec, ns, channel, base_version, value[n:])
                if linked is None:  # the base is a delta of the older, version-linked form
                    return self._typed(rec, value), value[n:], 0
                return {**linked, "base": base_version}, value[n:], 0
            k = next(
                (i for i, (a, b) in enumerate(zip(elements, base_elements, strict=False)) if a != b),
                min(n, len(value)),
            )
            return self._typed(rec, value), value[k:], n - k
        return self._typed(rec, value), value, 0

    def _linked_delta(
        self,
        thread: _Thread,
        rec: Recorder,
        ns: str,
        channel: str,
        base_version: str | int | float,
        new: builtins.list[Any],
    ) -> dict[str, Any] | None:
        """Store ``new`` (the elements appended to the channel's value at ``base_version``) as a
        content-linked delta (:data:`DELTA_MAGIC`); returns its entry ``{"type", "ref", "depth"}``, or None
        when the base value is a delta of the older form (linked by version only: its chain cannot be
        named by content)."""
        base = thread.blobs.get((ns, channel, base_version))
        if base is None or (base.base is not None and base.depth is None):
            return None
        elements = self._typed(rec, new)  # a plain value's bytes: stored once with the write that added them
        header: dict[str, Any] = {
            "t": elements["type"],
            "e": elements["ref"].removeprefix("sha256:"),
            "b": base.handle.removeprefix("sha256:"),
        }
        if base.base is None:
            depth = 1
            header["bt"] = base.type
        else:
            depth = (base.depth or 0) + 1
        header["d"] = depth
        if depth % SEGMENT == 0:
            header.update(self._anchor_fields(thread, ns, channel, base, header))
        content = langgraph_delta_bytes(header)
        return {"type": elements["type"], "ref": rec.put_artifact(content), "depth": depth}

    def _anchor_fields(
        self, thread: _Thread, ns: str, channel: str, base: _Ref, header: dict[str, Any]
    ) -> dict[str, Any]:
        """The anchor fields of the delta ``header`` (depth a multiple of :data:`SEGMENT`, extending
        ``base``): ``h`` the elements digests of it and the ``SEGMENT - 1`` deltas below it (newest
        first), ``ht`` their common serde type, ``a`` the digest of the value ``SEGMENT`` deltas down
        (an anchor, or the whole list, then of serde type ``at``). Read from the links below, each checked
        against its digest; ``{}`` (no anchor: a read follows every link) when they are not all there as
        the index says, or their types differ."""
        depth: int = header["d"]
        links: builtins.list[_Ref] = []
        ref: _Ref | None = base
        while ref is not None and len(links) < SEGMENT - 1:
            links.append(ref)
            ref = None if ref.base is None else thread.blobs.get((ns, channel, ref.base))
        if ref is None or len(links) < SEGMENT - 1 or ref.depth != (depth - SEGMENT or None):
            return {}
        try:
            contents = self.store.get_artifacts([r.handle for r in links])
        except (
            ArtifactIntegrityError
        ):  # a link below was altered: no anchor; a read follows the links and refuses it
            return {}
        run, kinds = [header["e"]], {header["t"]}
        for i, r in enumerate(links):
            content = contents.get(r.handle)
            if content is None or hashlib.sha256(content).hexdigest() != r.handle.removeprefix("sha256:"):
                return {}
            link = _split_delta(content)
            if link is None or link.get("d") != depth - 1 - i or not isinstance(link.get("e"), str):
                return {}
            run.append(link["e"])
            kinds.add(link.get("t"))
        if len(kinds) != 1:
            return {}
        fields: dict[str, Any] = {"h": run, "ht": header["t"], "a": ref.handle.removeprefix("sha256:")}
        if ref.depth is None:
            fields["at"] = ref.type
        return fields

    def _base_list(
        self, thread: _Thread, ns: str, channel: str, parent: str | None
    ) -> tuple[str | int | float, builtins.list[bytes]] | None:
        """The parent checkpoint's version of ``channel`` and its elements' digests (from the writer's
        cache, else loaded from the ledger), or None when the parent has no list there."""
        cp = thread.checkpoints.get(ns, {}).get(parent or "")
        if cp is None:
            return None
        body = self._body(thread, cp.body)
        version = body.get("channel_versions", {}).get(channel)
        if version is None or thread.blobs.get((ns, channel, version)) is None:
            return None
        cached = thread.lists.get((ns, channel))
        if cached is not None and cached[0] == version:
            return cached
        value = self._load_blob(thread, ns, channel, version)
        if type(value) is not list:
            return None
        return version, self._digests(value)

    def _dropped(
        self, thread: _Thread, ns: str, channel: str, parent: str | None, dropped: int
    ) -> builtins.list[BaseMessage]:
        """The parent's last ``dropped`` messages of ``channel`` (those a rewrite replaced or removed; read
        from the parent's checkpoint, on this rare path only)."""
        if parent is None or parent not in thread.checkpoints.get(ns, {}):
            return []
        values = self._tuple(thread, ns, parent, _config(thread.thread_id, ns, parent)).checkpoint
        old = values["channel_values"].get(channel)
        return list(old[len(old) - dropped :]) if isinstance(old, list) and _is_messages(old) else []

    def _digests(self, value: builtins.list[Any]) -> builtins.list[bytes]:
        """sha256 of each element's serialized form (serde type tag and bytes): what two lists are compared
        by, element by element, without keeping their bytes."""
        sha = hashlib.sha256
        return [
            sha(kind.encode() + b"\0" + data).digest() for kind, data in map(self.serde.dumps_typed, value)
        ]

    def _step_events(
        self,
        thread: _Thread,
        checkpoint_id: str,
        parent: str | None,
        meta: dict[str, Any],
        values: dict[str, Any],
        messages: tuple[builtins.list[BaseMessage], builtins.list[BaseMessage] | None],
        config: RunnableConfig,
    ) -> builtins.list[Event]:
        """The readable events of a new root checkpoint (module docstring: readable events).

        ``messages``: the messages the step added (from the first changed one on), and the parent's
        messages it replaced or removed (None when it only appended)."""
        step = meta.get("step")
        turn = step if isinstance(step, int) and step > 0 else 0
        events: builtins.list[Event] = []
        if meta.get("source") == "input":
            events.extend(_end_run(thread, turn, step - 1 if isinstance(step, int) else None))
            start = values.get("__start__")
            held = values.get("messages")
            prompt = _system_prompt(held if _is_messages(held) else _input_messages(start))
            return [*events, RunStarted(run_id=checkpoint_id, goal=_goal(start), system_prompt=prompt)]
        if (
            thread.run_open
            and not thread.gates
            and meta.get("source") != "update"
            and self.store.get_session(thread.session_id).status == "suspended"
        ):  # resumed after a static interrupt (``invoke(None, config)``; module docstring)
            events.append(Resumed(turn=turn))
        if not thread.run_open:
            goal = f"continue thread {thread.thread_id} from checkpoint {parent}"
            prompt = _system_prompt(values.get("messages"))
            events.append(RunStarted(run_id=checkpoint_id, goal=goal, system_prompt=prompt))
        if parent and parent != thread.last_cp.get("") and ("", parent) in thread.cp_history:
            # after the run_started: back to the history at the parent, without the new run's goal
            events.append(Rollbacked(turn=turn, checkpoint_history_len=thread.cp_history[("", parent)]))
        parent_cp = thread.checkpoints.get("", {}).get(parent or "")
        from_input = parent_cp is not None and parent_cp.metadata.get("source") == "input"
        appended, dropped = messages
        if dropped is not None:  # back to the history before the first rewritten message, then the rest
            at_parent = thread.cp_history.get(("", parent or ""), thread.history)
            keep = at_parent - _replay_size(dropped) - (1 if from_input else 0)  # the goal follows them
            events.append(Rollbacked(turn=turn, checkpoint_history_len=max(0, keep)))
            from_input = False  # the goal was rolled back with them: the input's messages are recorded
        events.extend(_message_events(appended, turn, skip_user=from_input, call_turns=thread.call_turns))
        stored = thread.writes.get(("", checkpoint_id), {})
        if stored:  # writes recorded before their checkpoint (LangGraph saves them in the background)
            ordered = sorted(stored.values(), key=_writes_sort_key)
            loaded = [(w.task_id, w.task_path, w.channel, self._load(thread, w.ref)) for w in ordered]
            events.extend(self._special_events(thread, step, loaded, config, events, checkpoint_id, values))
        if (
            meta.get("source") == "loop"
            and _finished(values)
            and not any(isinstance(e, RunTerminal) for e in events)
        ):
            events.append(_terminal("completed", thread, events, step))
        return events

    def _stop_events(
        self, thread: _Thread, step: Any, status: str, values: dict[str, Any], before: Sequence[Event]
    ) -> builtins.list[Event]:
        """``suspended`` for a static interrupt LangGraph reported at a root checkpoint (``status``:
        ``interrupt_before`` or ``interrupt_after``; ``values``: its channel values, whose ``branch:to:*``
        name the nodes that run next), when the run is open after ``before``; else nothing."""
        started = any(isinstance(e, RunStarted) for e in before)
        if any(isinstance(e, RunTerminal) for e in before) or not (thread.run_open or started):
            return []
        turn = step + 1 if isinstance(step, int) and step >= 0 else 0
        nodes = sorted(c.removeprefix("branch:to:") for c in values if c.startswith("branch:to:"))
        reason = f"waiting for input ({status}, next: {', '.join(nodes) or 'nothing'})"
        return [Suspended(turn=turn, reason=reason)]

    def _special_events(
        self,
        thread: _Thread,
        step: Any,
        writes: Sequence[tuple[str, str, str, Any]],
        config: RunnableConfig,
        before: Sequence[Event],
        checkpoint_id: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> builtins.list[Event]:
        """Readable events of a task's interrupt, error and resume writes ``(task_id, task_path, channel,
        value)`` linked to a root checkpoint whose metadata ``step`` is ``step`` (module docstring: readable
        events); their turn is the step the tasks ran in, ``step + 1``. ``checkpoint_id``: that checkpoint,
        whose stored writes name the interrupts a task's resume write answers (None: only ``writes``);
        ``values``: its channel values when at hand (else its pending sends are read from the thread)."""
        turn = step + 1 if isinstance(step, int) and step >= 0 else 0
        events: builtins.list[Event] = []
        gates, decided, aliases = dict(thread.gates), dict(thread.decided), dict(thread.aliases)
        for task_id, task_path, channel, value in writes:
            named = channel in ("__interrupt__", "__error__")  # only these name the node (loads the sends)
            node = self._task_node(thread, task_path, task_id, (checkpoint_id, values)) if named else ""
            if channel == "__interrupt__":
                fresh = [
                    i
                    for i in _interrupts(value)
                    if aliases.get(i.id, i.id) not in gates and aliases.get(i.id, i.id) not in decided
                ]
                call = self._tool_call(
                    thread, task_path, [*before, *events], gates, decided, (checkpoint_id, values)
                )
                for i in fresh:
                    reason = _short_json(i.value, 500)
                    if call is None or len(fresh) > 1:  # a plain node's interrupt: under the node
                        gates[i.id] = node
                        events.append(ToolGated(turn=turn, call_id=i.id, tool=node, reason=reason))
                        requested = PermissionRequested(
                            turn=turn, tool=node, arguments=_short_json(i.value), reason=reason
                        )
                        events.append(requested)
                        continue
                    call_id, (tool, arguments) = call
                    gates[call_id], aliases[i.id] = tool, call_id
                    events.append(ToolGated(turn=turn, call_id=call_id, tool=tool, reason=reason))
                    events.append(
                        PermissionRequested(turn=turn, tool=tool, arguments=arguments, reason=reason)
                    )
                    link = {"interrupt_id": i.id, "call_id": call_id}
                    events.append(Custom(custom_kind=INTERRUPT_CALL_KIND, payload=link))
                if fresh:
                    pending = [aliases.get(i.id, i.id) for i in fresh]
                    events.append(
                        Suspended(
                            turn=turn, reason="interrupt: waiting for human input", pending_calls=pending
                        )
                    )
            elif channel == "__error__":
                error = f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else str(value)
                history = _history_after(thread.history, [*before, *events])
                fatal = RollbackReason.FatalToolError(tool_name=node, error=error[:2000])
                events.append(Rollbacked(turn=turn, checkpoint_history_len=history, reason=fatal))
                if thread.run_open or any(isinstance(e, RunStarted) for e in before):
                    events.append(
                        _terminal(f"error in node {node}: {error}"[:500], thread, [*before, *events], step)
                    )
            elif channel == "__resume__" and gates:
                answers = self._answers(thread, checkpoint_id, task_id, value, writes, gates, aliases)
                who = _responder(config)
                # A task's resume write LangGraph saved after the checkpoint that ended the run (it saves
                # writes in the background): the decision is recorded, the ended run is not resumed.
                ended = not _open_after(thread.run_open, [*before, *events])
                for k, answer in answers.items():
                    ok = _approved(answer)
                    if not ended:
                        decided[k] = ok
                    # As flightlog approve/deny: seed 000's responder, the name in the decision record.
                    events.append(PermissionResolved(turn=turn, approved=ok, responder=_HUMAN))
                    events.append(
                        approval_decision(
                            turn=turn,
                            call_id=k,
                            gate="approval",
                            approved=ok,
                            responder=who,
                            reason=None if ok else denial_reason(who),
                        )
                    )
                    gates.pop(k)
                if answers and not gates and not ended:  # as a kernel run: resumed once no gate is left open
                    approved = [k for k, ok in decided.items() if ok]
                    events.append(
                        Resumed(turn=turn, approved=approved, denied=[k for k in decided if not decided[k]])
                    )
                    decided.clear()
        return events

    def _answers(
        self,
        thread: _Thread,
        checkpoint_id: str | None,
        task_id: str,
        value: Any,
        writes: Sequence[tuple[str, str, str, Any]],
        gates: dict[str, str],
        aliases: Mapping[str, str],
    ) -> dict[str, Any]:
        """The open gates a ``__resume__`` write answers, ``gate call id -> resume value`` (a gate's call
        id: the model's tool call id an interrupt gated, per ``aliases`` (interrupt id -> call id), else the
        interrupt id).

        LangGraph's null task carries ``Command(resume=value)`` (every open interrupt gets ``value``; a map
        of interrupt ids, as older releases wrote it there, answers those it names). A resume map
        (``Command(resume={interrupt_id: value})``, the only way to answer one of several interrupts) reaches
        a checkpointer only as the ``__resume__`` write of each task it resumes: the task's answers so far,
        in order, whose last ones answer the task's open interrupts (those of its stored ``__interrupt__``
        write, in ``writes`` or under ``checkpoint_id``). A task's resume write after its null-task one
        answers nothing new (its interrupt is no longer open)."""
        if task_id == NULL_TASK:
            if isinstance(value, dict) and value:
                named = {aliases.get(k, k): v for k, v in value.items()}
                if set(named) <= set(gates):
                    return named
            return dict.fromkeys(gates, value)
        if not isinstance(value, list) or not value:
            return {}
        raised = next((v for t, _p, c, v in writes if t == task_id and c == "__interrupt__"), None)
        if raised is None and checkpoint_id is not None:
            stored = self._writes_of(thread, "", checkpoint_id).get(
                (task_id, WRITES_IDX_MAP["__interrupt__"])
            )
            raised = None if stored is None else self._load(thread, stored.ref)
        asked = [k for k in (aliases.get(i.id, i.id) for i in _interrupts(raised)) if k in gates]
        n = min(len(asked), len(value))
        return dict(zip(asked[len(asked) - n :], value[len(value) - n :], strict=True)) if n else {}

    def _task_node(
        self, thread: _Thread, task_path: str, task_id: str, at: tuple[str | None, Mapping[str, Any] | None]
    ) -> str:
        """The node a task ran: for a ``Send`` task, the node its send targets (:meth:`_send_of`, ``at``:
        the checkpoint the task ran from); else the last part of its path (:func:`_node`)."""
        if (
            task_path.startswith("~__pregel_push, ")
            and (packet := self._send_of(thread, task_path, at)) is not None
        ):
            return packet.node
        return _node(task_path, task_id)

    def _tool_call(
        self,
        thread: _Thread,
        task_path: str,
        before: Sequence[Event],
        gates: Mapping[str, str],
        decided: Mapping[str, bool],
        at: tuple[str | None, Mapping[str, Any] | None],
    ) -> tuple[str, tuple[str, str]] | None:
        """The model's tool call an ``interrupt()`` raised in the task at ``task_path`` gates, as
        ``(call id, (tool name, arguments))``, or None when it is not a tool's (keeps the node's name).

        LangGraph's ``ToolNode`` (langgraph-prebuilt 1.x, ``ToolNode._func``) run as a pulled node (task
        path ``"~__pregel_pull, <node>"``) runs every tool call of the last ``AIMessage`` in that one task,
        and an ``interrupt()`` inside a tool raises out of the task with nothing naming the call (the
        interrupt id hashes the task's namespace). So the gated call is known only when the node is one of
        :attr:`tool_nodes` and exactly one requested call is unanswered and not already gated or decided
        (the folded ``tool_requested`` less ``tool_completed``, with ``before``, events not yet folded);
        with several, which tool raised cannot be told and the gate keeps the node's name. A task sent
        with ``Send`` (``"~__pregel_push, <idx>, ..."``, as ``create_agent`` sends each call) runs the
        pending send ``idx`` of the checkpoint (``at``: its id and, when at hand, its channel values): when
        that send goes to a node of :attr:`tool_nodes` with one tool call (a list of one ``ToolCall``, or a
        ``ToolCallWithContext``), the gate is that call's."""
        open_calls = dict(thread.call_tools)
        for e in before:
            if isinstance(e, ToolRequested):
                open_calls.update((c.id, (c.name, c.arguments)) for c in e.calls)
            elif isinstance(e, ToolCompleted):
                for r in e.results:
                    open_calls.pop(r.call_id, None)
        if task_path.startswith("~__pregel_push, "):
            sent = self._sent_call(thread, task_path, at)  # as the model requested it, when recorded
            return None if sent is None else (sent[0], open_calls.get(sent[0], sent[1]))
        if not task_path.startswith("~__pregel_pull, ") or _node(task_path, "") not in self.tool_nodes:
            return None
        candidates = [(k, v) for k, v in open_calls.items() if k not in gates and k not in decided]
        return candidates[0] if len(candidates) == 1 else None

    def _send_of(
        self, thread: _Thread, task_path: str, at: tuple[str | None, Mapping[str, Any] | None]
    ) -> Send | None:
        """The ``Send`` a pushed task (``task_path`` ``"~__pregel_push, <idx>, <flag>"``, LangGraph 1.x's
        ``task_path_str``) runs: pending send ``idx`` of the checkpoint, whose sends are its
        ``__pregel_tasks`` value (``at[1]``, else the stored checkpoint ``at[0]``'s, each artifact's hash
        checked as any read); None for any other path, or when that send is not recorded."""
        parts = task_path.split(", ")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        checkpoint_id, values = at
        sends: Any = None
        if values is not None and _TASKS in values:
            sends = values[_TASKS]
        else:
            cp = thread.checkpoints.get("", {}).get(checkpoint_id or "")
            version = None if cp is None else self._body(thread, cp.body)["channel_versions"].get(_TASKS)
            if version is not None and thread.blobs.get(("", _TASKS, version)) is not None:
                sends = self._load_blob(thread, "", _TASKS, version)
        idx = int(parts[1])
        if not isinstance(sends, list) or idx >= len(sends):
            return None
        packet = sends[idx]
        return packet if isinstance(packet, Send) else None

    def _sent_call(
        self, thread: _Thread, task_path: str, at: tuple[str | None, Mapping[str, Any] | None]
    ) -> tuple[str, tuple[str, str]] | None:
        """The one tool call a ``Send`` task (:meth:`_send_of`) runs on a node of :attr:`tool_nodes`, as
        ``(call id, (tool name, arguments))``; None otherwise (see :meth:`_tool_call`)."""
        packet = self._send_of(thread, task_path, at)
        if packet is None or packet.node not in self.tool_nodes:
            return None
        arg = packet.arg
        calls = (
            [arg.get("tool_call")] if isinstance(arg, dict) and arg.get("__type") == _WITH_CONTEXT else arg
        )
        if not isinstance(calls, list) or len(calls) != 1 or not isinstance(calls[0], dict):
            return None
        call = calls[0]
        if not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
            return None
        return call["id"], (call["name"], json.dumps(call.get("args", {}), ensure_ascii=False))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append one ``langgraph.writes`` event with the writes of a task linked to a checkpoint, after
        the readable events of its interrupt, error and resume writes (root namespace, when the checkpoint
        is recorded; else they are recorded with the checkpoint's ``put``).

        Idempotency, as InMemorySaver.put_writes: each write's index is its position, or
        ``WRITES_IDX_MAP[channel]`` (negative) for special channels (error, interrupt, ...); a regular write
        whose (task_id, idx) is already stored for this checkpoint is ignored, a special one replaces it.
        Nothing is appended when every write is ignored.

        Raises:
            KeyError: no ``thread_id`` or ``checkpoint_id`` in ``config["configurable"]``.
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id: str = config["configurable"]["checkpoint_id"]
        dummy = _Ref("", "", -1)

        def build(thread: _Thread, rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]] | None:
            probe = dict(self._writes_of(thread, ns, checkpoint_id))
            wanted = _merge_writes(
                probe,
                [
                    _Write(task_id, c, dummy, task_path, WRITES_IDX_MAP.get(c, i))
                    for i, (c, _) in enumerate(writes)
                ],
            )
            if not wanted:
                return None
            entries: builtins.list[dict[str, Any]] = []
            kept: builtins.list[tuple[str, str, str, Any]] = []
            for i, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, i)
                if (task_id, idx) in wanted:
                    entries.append({"idx": idx, "channel": channel, **self._typed(rec, value)})
                    kept.append((task_id, task_path, channel, value))
            events: builtins.list[Event] = []
            cp = thread.checkpoints.get(ns, {}).get(checkpoint_id)
            if ns == "" and cp is not None:
                events = self._special_events(
                    thread, cp.metadata.get("step"), kept, config, [], checkpoint_id
                )
            payload = {
                **_ns_entry(ns),
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "writes": entries,
            }
            return events, payload

        with self._lock:
            self._write(thread_id, WRITES_KIND, build)

    def delete_thread(self, thread_id: str) -> None:
        """Forget a thread: appends ``langgraph.thread_deleted``; reads then see nothing written before it.

        The ledger is append-only (ARCHITECTURE.md invariant 1): the deleted history stays stored and
        provable (``flightlog verify``/``export``/``show``); only this saver's view of the thread is
        emptied, as InMemorySaver.delete_thread empties its dicts. A thread that was never written is a
        no-op. New checkpoints after it start the thread afresh in the same session.

        Raises:
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        with self._lock:
            self._write(
                thread_id,
                THREAD_DELETED_KIND,
                lambda thread, _rec: ([], {"thread_id": thread_id}) if thread.next_seq else None,
            )

    def _thread_ids(self) -> builtins.list[str]:
        return [
            r.session_id.removeprefix(SESSION_PREFIX)
            for r in self.store.list_sessions()
            if r.source == SOURCE and r.session_id.startswith(SESSION_PREFIX)
        ]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Forget every checkpoint whose metadata ``run_id`` is one of ``run_ids``, with its writes, in
        every thread of the store: appends ``langgraph.runs_deleted`` to each thread that holds one (no
        ledger row is deleted: the history stays provable, as for :meth:`delete_thread`).

        Raises:
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        doomed = sorted(set(run_ids))
        if not doomed:
            return

        def build(thread: _Thread, _rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]] | None:
            hit = any(
                cp.metadata.get("run_id") in doomed
                for cps in thread.checkpoints.values()
                for cp in cps.values()
            )
            return ([], {"run_ids": doomed}) if hit else None

        for thread_id in self._thread_ids():
            with self._lock:
                self._write(thread_id, RUNS_DELETED_KIND, build)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``; its pending writes stay) or none
        (``delete``) of each thread: appends ``langgraph.pruned`` (no ledger row is deleted; a list channel
        stored as deltas still reads whole, since the values the kept checkpoint extends stay readable).

        Raises:
            ValueError: an unknown ``strategy``.
            LedgerIntegrityError, StaleWriter: as :meth:`put`.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune: unknown strategy {strategy!r} (keep_latest or delete)")

        def build(thread: _Thread, _rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]] | None:
            return ([], {"strategy": strategy}) if any(thread.checkpoints.values()) else None

        for thread_id in thread_ids:
            with self._lock:
                self._write(thread_id, PRUNED_KIND, build)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and pending write of a thread into another (ids, metadata, order
        and namespaces kept): appends one ``langgraph.thread_copied`` event to the target holding the
        source's references (artifacts are content-addressed: nothing is stored twice). A source with
        nothing in it copies nothing.

        Raises:
            LedgerIntegrityError, StaleWriter: as :meth:`put` (for either thread).
        """
        with self._lock:
            src = self._thread(source_thread_id)
            for ns, checkpoint_id in builtins.list(src.raw_writes):
                self._writes_of(src, ns, checkpoint_id)
            latest = self._copied_state(src)
            checkpoints = [
                {
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                    "checkpoint": {"json": self._body(src, cp.body)}
                    if cp.body.val is None or cp.body.val.ref is None
                    else _ref_entry(cp.body.val.ref.type, cp.body.val.ref.handle),
                    "metadata": cp.metadata_entry(),
                    **({"parent_checkpoint_id": cp.parent_id} if cp.parent_id else {}),
                }
                for ns, cps in src.checkpoints.items()
                for checkpoint_id, cp in cps.items()
            ]
            blobs = [
                {"checkpoint_ns": ns, "channel": channel, "version": version, **_blob_entry(ref)}
                for (ns, channel, version), ref in src.blobs.items()
            ]
            writes = [
                {
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                    "task_id": w.task_id,
                    "task_path": w.task_path,
                    "idx": w.idx,
                    "channel": w.channel,
                    **_ref_entry(w.ref.type, w.ref.handle),
                }
                for (ns, checkpoint_id), stored in src.writes.items()
                for w in stored.values()
            ]
        if not checkpoints:
            return
        payload = {
            "source_thread_id": source_thread_id,
            "checkpoints": checkpoints,
            "blobs": blobs,
            "writes": writes,
        }

        def build(thread: _Thread, _rec: Recorder) -> tuple[builtins.list[Event], dict[str, Any]]:
            return self._copy_events(thread, source_thread_id, latest), payload

        with self._lock:
            self._write(target_thread_id, THREAD_COPIED_KIND, build)

    def _copied_state(
        self, src: _Thread
    ) -> tuple[CheckpointTuple, builtins.list[tuple[str, str, str, Any]]] | None:
        """The source thread's latest root checkpoint (what the copy's next run continues from) and its
        pending writes ``(task_id, task_path, channel, value)``."""
        roots = src.checkpoints.get("", {})
        if not roots:
            return None
        latest = max(roots)
        ordered = sorted(src.writes.get(("", latest), {}).values(), key=_writes_sort_key)
        writes = [(w.task_id, w.task_path, w.channel, self._load(src, w.ref)) for w in ordered]
        return self._tuple(src, "", latest, _config(src.thread_id, "", latest)), writes

    def _copy_events(
        self,
        thread: _Thread,
        source_thread_id: str,
        copied: tuple[CheckpointTuple, builtins.list[tuple[str, str, str, Any]]] | None,
    ) -> builtins.list[Event]:
        """The readable record of a copied thread (module docstring: readable events): a run started at
        the copy holding the messages of the source's latest root checkpoint, then its state (pending
        interrupts, a failed node, or completed when nothing is left to run)."""
        if copied is None:
            return []
        latest, writes = copied
        step = latest.metadata.get("step")
        turn = step if isinstance(step, int) and step > 0 else 0
        events: builtins.list[Event] = _end_run(thread, turn)
        values = latest.checkpoint["channel_values"]
        held = values.get("messages")
        messages = list(held) if isinstance(held, list) and _is_messages(held) else []
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        first = rest[0] if rest and isinstance(rest[0], HumanMessage) else None
        goal = _text(first.content) if first is not None else f"copy of LangGraph thread {source_thread_id}"
        run_id = latest.config["configurable"]["checkpoint_id"]
        events.append(RunStarted(run_id=run_id, goal=goal, system_prompt=_system_prompt(messages)))
        events.extend(_message_events(rest, turn, skip_user=first is not None))
        cfg: RunnableConfig = {"configurable": {"thread_id": thread.thread_id}}
        events.extend(self._special_events(thread, step, writes, cfg, events, None, values))
        if any(isinstance(e, RunTerminal | Suspended) for e in events):
            return events
        if _finished(values):
            events.append(_terminal("completed", thread, events))
        elif self.store.get_session(session_id_for(source_thread_id)).status == "suspended":
            events.extend(self._stop_events(thread, step, "static interrupt", values, events))
        return events

    def get_next_version(self, current: str | None, channel: None) -> str:
        """InMemorySaver's versions: ``<32-digit counter>.<16-digit random>``, so a fork from an earlier
        checkpoint never reuses a version already stored for the channel."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ─── async variants: the sync ones in a worker thread ─────────────────────────────────
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, each tuple built in a worker thread (one at a time: bounded memory)."""
        it = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, it, None)) is not None:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
