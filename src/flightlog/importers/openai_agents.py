"""OpenAI Agents SDK ``RunState`` importer: one ``RunState.to_json()`` file → one :class:`ImportedSession`.

Source shape (openai-agents-python ``src/agents/run_state.py``, ``$schemaVersion`` 1.0 to 1.17): ONE JSON
object, the SDK's pause/resume boundary: ``original_input`` (a string, or a list of Responses API input
items), ``generated_items`` (run items ``{type, raw_item, agent, output?, tool_name?...}``:
``message_output_item``, ``tool_call_item``, ``tool_call_output_item``, ``reasoning_item``,
``handoff_call_item``, ``handoff_output_item``, ``tool_approval_item``, ``mcp_approval_request_item``...),
``model_responses`` (``{output: [items], usage, response_id, request_id}``), ``current_step`` (``null``,
``{type: next_step_run_again}`` or ``{type: next_step_interruption, data: {interruptions: [tool approval
items]}}``), ``context`` (``approvals: {tool: {approved, rejected, rejection_messages}}``, ``usage``),
``current_turn``, ``max_turns``, ``current_agent``, ``trace``, ``session_items`` and more.

The file is decoded whole (:func:`~flightlog.importers.jsondoc.read_json_document`); a value that is not
an object with ``$schemaVersion`` raises :class:`~flightlog.errors.ImportFormatError` naming the file.
RunState holds no timestamps: the session's times stay unknown (never the import time).

Mapping rules (Responses API items, whether in ``original_input`` or a run item's ``raw_item``):

1. **Prompts.** ``original_input`` as a string starts the run: ``RunStarted(run_id="<key>:input",
   goal=<it>)``. As a list, each input item is mapped by the rules below in order; ``system``/``developer``
   messages before the first ``user`` message are ``RunStarted.system_prompt``, each ``user`` message
   starts a run (``run_id="<key>:input[i]"``, the previous run ends ``completed``).
2. **Completions.** Consecutive model items (assistant ``message``, ``reasoning``, ``function_call``,
   ``custom_tool_call``, ``computer_call``, ``program``, ``shell_call``, ``apply_patch_call``,
   ``local_shell_call``, ``mcp_call``, hosted ``*_call`` items, handoff calls) that belong to one model
   response (``model_responses[].output`` by item ``id``) are ONE ``LlmCompleted``: text (``output_text``
   parts), thinking (``reasoning.summary`` texts, else ``encrypted_content`` as ``RedactedThinkingPart``),
   and a ``ToolCall`` per call item that the SDK answers with an output item (``function_call``: name and
   ``arguments``; ``custom_tool_call``: ``input``; others: the item without ``type``/``id`` as JSON);
   ``ProviderReplay(protocol="openai.responses", native_blocks=<the items verbatim>)``. Hosted calls
   (``web_search_call``, ``file_search_call``, ``code_interpreter_call``, ``image_generation_call``,
   ``mcp_call``) ran inside the response: they are kept in ``native_blocks`` only.
3. **Results.** ``function_call_output``, ``custom_tool_call_output``, ``computer_call_output``,
   ``program_output``, ``shell_call_output``, ``apply_patch_call_output``, ``local_shell_call_output``
   (and a ``handoff_output_item``) are ``ToolCompleted`` paired by ``call_id`` (reused ids get ``#2``).
4. **Approvals.** A ``tool_approval_item`` (in ``generated_items`` or among the interruptions) is
   ``ToolGated(turn, call_id, tool, reason="approval required")`` for its call. ``context.approvals``
   decisions are kept as ``Custom("openai_agents.approval_decision", {tool_name, call_id, approved,
   message?})``; a rejected call of this session that has no result also gets ``ToolDenied(reason=<the
   rejection message or "rejected">)``. ``mcp_approval_request_item``/``mcp_approval_response_item`` are
   kept as ``Custom``.
5. **The end.** ``current_step`` ``next_step_interruption`` → ``Suspended(turn, reason="awaiting
   approval", pending_calls=<the interrupted call ids>)`` and no ``RunTerminal``: the ledger shows the run
   waiting for a decision, as the SDK left it. The document is recorded whole (status ``incomplete``,
   sealed when imported with a notary), so ``flightlog runs`` shows it interrupted and ``pending`` does
   not list it: the decision belongs to the SDK, or to a live ``FlightlogSession``.
   Otherwise ``RunTerminal(reason)``: ``completed`` when nothing is pending
   and the last item is an assistant message, else ``incomplete`` (``next_step_run_again``: a state saved
   mid-run). ``total_tokens`` is ``context.usage.total_tokens`` (input, cached input included, plus
   output, as the Responses API counts); ``Custom("token_usage", <context.usage>)`` keeps the breakdown
   (``cached_tokens``, ``cache_write_tokens``, ``reasoning_tokens``).
6. **Kept whole.** Every run item's fields beyond ``raw_item`` that the mapping does not use (``agent``,
   ``tool_origin``, ``custom_data``...) are kept in ``Custom("openai_agents.item", {index, type, ...})``;
   the rest of the state (everything but ``original_input``, ``generated_items``, ``model_responses``) is
   kept as ``Custom("openai_agents.state")``; unknown item types as ``Custom("openai_agents.item.<type>")``.

Session: ``key = "openai-agents:<trace.id, else conversation_id, else the file name>"``; metadata:
``schema_version``, ``agent`` (``current_agent.name``), ``current_turn``, ``max_turns``, ``trace_id``,
``workflow_name``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ImportFormatError
from ..events import Custom, ProviderReplay, Suspended, ToolDenied, ToolGated
from ..messages import ContentPart, RedactedThinkingPart, ThinkingPart
from .base import ImportedSession, ImportWarning, JsonObj, as_list, as_obj, as_str
from .chatlog import SessionBuilder, chat_content, text_parts, uint
from .jsondoc import read_json_document

__all__ = ["FORMAT", "VERSION", "looks_like", "read"]

FORMAT = "openai-agents"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

_PREFIX = "openai_agents"
_PROTOCOL = "openai.responses"
_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "program",
        "shell_call",
        "apply_patch_call",
        "local_shell_call",
    }
)
"""Call items the SDK executes and answers with an output item (rule 2)."""
_HOSTED = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "program_output",
        "shell_call_output",
        "apply_patch_call_output",
        "local_shell_call_output",
    }
)
_MODEL_ITEMS = frozenset({"message_output_item", "reasoning_item", "tool_call_item", "handoff_call_item"})
_MAPPED_STATE = frozenset({"original_input", "generated_items", "model_responses"})
_ITEM_FIELDS = frozenset({"type", "raw_item"})


def looks_like(value: Any) -> bool:
    """A decoded document is a RunState: an object with a string ``$schemaVersion`` and a
    ``generated_items`` or ``original_input`` key."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("$schemaVersion"), str)
        and ("generated_items" in value or "original_input" in value)
    )


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Read one RunState (see the module docstring).

    Raises:
        ImportFormatError: not valid JSON or not a RunState object (names the file).
    """
    document = read_json_document(path, warnings)
    if not looks_like(document):
        raise ImportFormatError(path=str(path), reason="not an OpenAI Agents RunState: no $schemaVersion")
    return [_Builder(path, warnings, document).build()]


def _call_name(raw: JsonObj) -> str:
    kind = as_str(raw.get("type")) or ""
    if kind in ("function_call", "custom_tool_call"):
        return as_str(raw.get("name")) or ""
    return {"computer_call": "computer", "program": "program"}.get(kind, kind.removesuffix("_call"))


def _call_arguments(raw: JsonObj) -> str:
    kind = raw.get("type")
    if kind == "function_call":
        arguments = raw.get("arguments")
        return arguments if isinstance(arguments, str) else json.dumps(arguments)
    if kind == "custom_tool_call":
        return json.dumps({"input": raw.get("input")}, ensure_ascii=False)
    rest = {k: v for k, v in raw.items() if k not in ("type", "id", "call_id", "status")}
    return json.dumps(rest, ensure_ascii=False, separators=(",", ":"))


def _output_text(raw: JsonObj, item: JsonObj) -> str:
    """A result's text: the output item's ``output`` (or ``result``), else the run item's ``output``."""
    for value in (raw.get("output"), raw.get("result"), item.get("output")):
        if isinstance(value, str):
            return value
        if value is not None:
            text, _ = chat_content(value)
            return text or json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return ""


def _reasoning_parts(raw: JsonObj) -> list[ContentPart]:
    summary = raw.get("summary")
    texts = [as_str(as_obj(s).get("text")) for s in summary] if isinstance(summary, list) else []
    parts: list[ContentPart] = [ThinkingPart(thinking=t) for t in texts if t]
    encrypted = as_str(raw.get("encrypted_content"))
    if not parts and encrypted:
        parts.append(RedactedThinkingPart(data=encrypted))
    return parts


class _Builder(SessionBuilder):
    def __init__(self, path: Path, warnings: list[ImportWarning], document: JsonObj) -> None:
        super().__init__(path, warnings, _PREFIX)
        self.document = document
        trace = as_obj(document.get("trace"))
        self.trace_id = as_str(trace.get("id"))
        native = self.trace_id or as_str(document.get("conversation_id")) or path.stem
        self.key = f"{FORMAT}:{native}"
        self.system: list[str] = []
        self.group: list[JsonObj] = []  # raw items of the completion being gathered
        self.group_response: int | None = None
        self.responses: dict[str, int] = {}
        self.usage: list[int] = []
        for index, response in enumerate(as_list(document.get("model_responses"))):
            response = as_obj(response)
            self.usage.append(uint(as_obj(response.get("usage")).get("total_tokens")))
            for out in as_list(response.get("output")):
                item_id = as_str(as_obj(out).get("id"))
                if item_id:
                    self.responses.setdefault(item_id, index)
        self.answerable: set[str] = set()  # native call ids that have an output item somewhere
        self.gated: dict[str, str] = {}  # native call id → recorded call id, for approvals
        self.last_kind = ""

    # ── the whole state ──

    def build(self) -> ImportedSession:
        document = self.document
        self.answerable = self.output_call_ids()
        original = document.get("original_input")
        if isinstance(original, list):
            for index, item in enumerate(original):
                self.input_item(index, item)
        else:
            goal = original if isinstance(original, str) else ""
            self.begin(f"{self.key}:input", goal)
            if original is not None and not isinstance(original, str):
                self.record("original_input", original)
        for index, item in enumerate(as_list(document.get("generated_items"))):
            self.run_item(index, item)
        self.flush()
        self.finish()
        return self.session(self.key, FORMAT, metadata=self.metadata())

    def output_call_ids(self) -> set[str]:
        found: set[str] = set()
        items = [as_obj(i).get("raw_item") for i in as_list(self.document.get("generated_items"))]
        original = self.document.get("original_input")
        items += original if isinstance(original, list) else []
        for raw in items:
            raw = as_obj(raw)
            if as_str(raw.get("type")) in _OUTPUTS and isinstance(raw.get("call_id"), str):
                found.add(raw["call_id"])
        return found

    def metadata(self) -> JsonObj:
        document = self.document
        return {
            "schema_version": as_str(document.get("$schemaVersion")),
            "agent": as_str(as_obj(document.get("current_agent")).get("name")),
            "current_turn": document.get("current_turn")
            if isinstance(document.get("current_turn"), int)
            else None,
            "max_turns": document.get("max_turns") if isinstance(document.get("max_turns"), int) else None,
            "trace_id": self.trace_id,
            "workflow_name": as_str(as_obj(document.get("trace")).get("workflow_name")),
        }

    def begin(self, run_id: str, goal: str) -> None:
        self.flush()
        system = "\n\n".join(self.system) if self.system else None
        self.system = []
        self.start_run(run_id, goal, system=system)

    # ── items ──

    def input_item(self, index: int, item: Any) -> None:
        """Rule 1: one item of a list ``original_input``."""
        raw = as_obj(item)
        role = raw.get("role")
        if raw.get("type", "message") == "message" and role in ("user", "system", "developer"):
            text, images = chat_content(raw.get("content"))
            if role == "user":
                self.begin(f"{self.key}:input[{index}]", text)
                if images:
                    self.record("input_images", {"index": index, "content": raw.get("content")})
            elif self.run is None:
                self.system.append(text)
            else:
                self.record("input.system", {"index": index, **raw})
            return
        self.raw(f"original_input[{index}]", raw, {})

    def run_item(self, index: int, item: Any) -> None:
        """Rules 2-4, 6: one generated run item."""
        item = as_obj(item)
        kind = as_str(item.get("type")) or "record"
        raw = as_obj(item.get("raw_item"))
        where = f"generated_items[{index}]"
        if kind == "tool_approval_item":
            self.flush()
            self.gate(raw, item)
        elif kind in _MODEL_ITEMS or kind in ("tool_call_output_item", "handoff_output_item"):
            self.raw(where, raw, item)
        elif kind in ("mcp_approval_request_item", "mcp_approval_response_item", "mcp_list_tools_item"):
            self.flush()
            self.record(f"item.{kind}", {"index": index, **item})
            return
        else:
            self.flush()
            self.record(f"item.{kind}" if kind.isidentifier() else "item.record", {"index": index, **item})
            return
        rest = {k: v for k, v in item.items() if k not in _ITEM_FIELDS}
        if rest:
            self.record("item", {"index": index, "type": kind, **rest})

    def raw(self, where: str, raw: JsonObj, item: JsonObj) -> None:
        """A Responses item: gathered into the completion, or a result, or kept."""
        kind = as_str(raw.get("type")) or ("message" if "role" in raw else "")
        self.last_kind = kind if kind != "message" else f"message:{raw.get('role')}"
        if kind in _OUTPUTS or item.get("type") == "handoff_output_item":
            self.flush()
            native = as_str(raw.get("call_id")) or ""
            failed = raw.get("status") in ("failed", "incomplete")
            self.result(native, _output_text(raw, item), is_error=failed, where=where)
            return
        if kind == "message" and raw.get("role") == "user":
            self.flush()
            text, _ = chat_content(raw.get("content"))
            self.begin(f"{self.key}:{where}", text)
            return
        if kind in ("message", "reasoning") or kind in _CALLS or kind in _HOSTED or kind.endswith("_call"):
            response = self.responses.get(as_str(raw.get("id")) or "")
            if self.group and response is not None and response != self.group_response:
                self.flush()
            self.group.append(raw)
            self.group_response = response if response is not None else self.group_response
            return
        self.flush()
        self.record(f"item.{kind}" if kind.isidentifier() else "item.record", {"where": where, **raw})

    def flush(self) -> None:
        """Emit the gathered model items as one completion (rule 2)."""
        if not self.group:
            return
        group, self.group = self.group, []
        response, self.group_response = self.group_response, None
        thinking: list[ContentPart] = []
        texts: list[str] = []
        calls: list[tuple[str, str, str]] = []
        for raw in group:
            kind = raw.get("type")
            if kind == "reasoning":
                thinking.extend(_reasoning_parts(raw))
            elif kind == "message" or ("role" in raw and kind is None):
                texts.append(chat_content(raw.get("content"))[0])
            elif kind in _CALLS or (as_str(raw.get("call_id")) or "") in self.answerable:
                calls.append((as_str(raw.get("call_id")) or "", _call_name(raw), _call_arguments(raw)))
        tokens = self.usage[response] if response is not None and response < len(self.usage) else 0
        replay = ProviderReplay(protocol=_PROTOCOL, provider="openai", native_blocks=list(group))
        self.complete(
            text_parts("\n".join(t for t in texts if t), thinking),
            calls,
            where="generated_items",
            replay=replay,
            tokens=tokens,
        )

    def gate(self, raw: JsonObj, item: JsonObj) -> None:
        """Rule 4: an approval the run asked for."""
        native = as_str(raw.get("call_id")) or as_str(raw.get("id")) or ""
        open_calls = {c.native_id: c for c in self.calls.pending()}
        call = open_calls.get(native)
        call_id = call.call_id if call is not None else native
        if native in self.gated:
            return
        self.gated[native] = call_id
        tool = as_str(item.get("tool_name")) or _call_name(raw)
        self.emit(ToolGated(turn=self.turn, call_id=call_id, tool=tool, reason="approval required"))

    # ── the end ──

    def finish(self) -> None:
        """Rules 4-6: approvals, interruptions, the terminal record, usage and the rest of the state."""
        document = self.document
        if self.run is None:
            self.begin(f"{self.key}:input", "")
        self.decisions(as_obj(as_obj(document.get("context")).get("approvals")))
        step = as_obj(document.get("current_step"))
        interrupted = step.get("type") == "next_step_interruption"
        if interrupted:
            for raw in as_list(as_obj(step.get("data")).get("interruptions")):
                raw = as_obj(raw)
                self.gate(as_obj(raw.get("raw_item")), raw)
        usage = as_obj(as_obj(document.get("context")).get("usage"))
        if usage:
            self.emit(Custom(custom_kind="token_usage", payload=usage))
        self.record("state", {k: v for k, v in document.items() if k not in _MAPPED_STATE})
        total = uint(usage.get("total_tokens"))
        if self.run is not None and total:
            self.run.tokens = total
        if interrupted:
            pending = [self.gated[n] for n in self.gated]
            self.emit(Suspended(turn=self.turn, reason="awaiting approval", pending_calls=pending))
            return
        done = not self.pending() and self.last_kind == "message:assistant" and step.get("type") is None
        self.end_run("completed" if done else "incomplete")

    def decisions(self, approvals: JsonObj) -> None:
        """Rule 4: decisions already taken (``approved``/``rejected`` lists, or ``true`` for every call)."""
        open_calls = {c.native_id: c for c in self.calls.pending()}
        for tool, record in approvals.items():
            record = as_obj(record)
            messages = as_obj(record.get("rejection_messages"))
            for approved, key in ((True, "approved"), (False, "rejected")):
                value = record.get(key)
                ids = value if isinstance(value, list) else []
                if value is True:
                    self.record(
                        "approval_decision", {"tool_name": tool, "call_id": None, "approved": approved}
                    )
                for native in (i for i in ids if isinstance(i, str)):
                    message = as_str(messages.get(native))
                    decision = {"tool_name": tool, "call_id": native, "approved": approved}
                    self.record(
                        "approval_decision", {**decision, **({"message": message} if message else {})}
                    )
                    call = open_calls.get(native)
                    if not approved and call is not None:
                        self.calls.answer_id(call.call_id)
                        self.emit(
                            ToolDenied(
                                turn=call.turn,
                                call_id=call.call_id,
                                tool_name=tool,
                                reason=message or "rejected",
                            )
                        )
