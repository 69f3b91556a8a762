"""Provider-neutral messages: the transcript that replay reconstructs and providers render.

Wire shape (JSON): a ``Message`` is ``{"role": ..., "content": [part, ...]}`` with optional ``tool_calls``;
each content part is tagged by ``"type"``:

===================== ============================================================================
``text``              ``{"type": "text", "text": str}``
``image``             ``{"type": "image", "ref": str, "media_type"?: str}`` (a logical ref: artifact
                      handle ``sha256:<hex>``, a URL or a data URI; never a local path)
``thinking``          ``{"type": "thinking", "thinking": str, "signature"?: str}``
``redacted_thinking`` ``{"type": "redacted_thinking", "data": str}`` (opaque, byte-exact)
``tool_call``         ``{"type": "tool_call", "id", "name", "arguments"}`` (``arguments`` raw JSON text)
``tool_result``       ``{"type": "tool_result", "call_id", "output", "is_error"?}``
===================== ============================================================================

Absent optionals are omitted on output and defaulted on input. Source: seed 000 (``Message``,
``ToolCall``, ``ToolResult``, ``ContentPart`` of ``crate::types::message``); the seed names the types,
the field sets here are flightlog's.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_serializer

__all__ = [
    "ContentPart",
    "ImagePart",
    "Message",
    "RedactedThinkingPart",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ToolResultPart",
    "WireModel",
    "content_part_adapter",
]

U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
"""An unsigned 32-bit integer, as the seed's ``u32``."""
U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
"""An unsigned 64-bit integer, as the seed's ``u64`` (canonical encoding further caps it at 2**53-1)."""


class WireModel(BaseModel):
    """Base of every wire model: frozen; which absent values are written is decided field by field.

    * ``None`` is omitted (serde ``#[serde(default, skip_serializing_if = "Option::is_none")]``), except
      for the fields named in ``_write_null``, which are written as ``null`` (a seed ``Option`` field with
      no ``skip_serializing_if``: serde writes ``null`` for ``None``).
    * An empty list is omitted for the fields named in ``_skip_empty`` (serde ``skip_serializing_if =
      "Vec::is_empty"``); every other list (serde ``default`` only, or required) is always written.

    On input a missing field takes its default (``None`` for every optional, as serde does for ``Option``
    whether or not it is written as ``null``).
    """

    model_config = ConfigDict(
        frozen=True, extra="ignore", populate_by_name=True, ser_json_inf_nan="constants"
    )
    _skip_empty: ClassVar[frozenset[str]] = frozenset()
    _write_null: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: Any) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        skip, nulls = self._skip_empty, self._write_null
        return {
            key: value
            for key, value in data.items()
            if (value is not None or key in nulls) and not (key in skip and value == [])
        }

    def to_wire(self) -> dict[str, Any]:
        """This model as a JSON-ready dict (wire names; absent values per the field rules above)."""
        return self.model_dump(mode="json")


Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks in a :class:`Message`."""


class TextPart(WireModel):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ImagePart(WireModel):
    """An image by reference (artifact handle, URL or data URI); bytes live in the artifact store."""

    type: Literal["image"] = "image"
    ref: str
    media_type: str | None = None


class ThinkingPart(WireModel):
    """Model reasoning shown in clear; ``signature`` is kept byte-exact for provider replay."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class RedactedThinkingPart(WireModel):
    """Reasoning the provider returned encrypted; ``data`` is opaque and kept byte-exact."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolCallPart(WireModel):
    """A tool call inside message content (``arguments`` is the raw JSON text the model produced)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = ""


class ToolResultPart(WireModel):
    """A tool result inside message content."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    output: str = ""
    is_error: bool | None = None


ContentPart = Annotated[
    TextPart | ImagePart | ThinkingPart | RedactedThinkingPart | ToolCallPart | ToolResultPart,
    Field(discriminator="type"),
]
"""One content part of a :class:`Message`, tagged by ``type`` (table in the module docs)."""
content_part_adapter: TypeAdapter[ContentPart] = TypeAdapter(ContentPart)
"""Validates and dumps one :data:`ContentPart` (e.g. ``content_part_adapter.validate_python(wire)``)."""


class ToolCall(WireModel):
    """One tool call requested by the model.

    Attributes:
        id: The provider's call id (``toolu_...``, ``call_...``), unique within a session.
        name: The tool name.
        arguments: Raw JSON text as the model produced it (possibly malformed; repair is recorded
            separately as ``tool_argument_repaired``).
    """

    id: str
    name: str
    arguments: str = ""


class ToolResult(WireModel):
    """The result of one tool call.

    Attributes:
        call_id: The ``ToolCall.id`` this answers.
        output: The tool's output text.
        is_error: True when the tool failed (always written; defaults to false on input).
        token_count: Tokens the output costs in context, when known.
    """

    call_id: str
    output: str = ""
    is_error: bool = False
    token_count: U32 | None = None


class Message(WireModel):
    """A provider-neutral chat message.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: Ordered content parts (list of ``ContentPart``).
        tool_calls: Calls an assistant message makes (also allowed as ``tool_call`` parts).
        name: Optional author name (e.g. a sub-agent id).
    """

    role: Role
    content: list[ContentPart] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    name: str | None = None
    _skip_empty = frozenset({"tool_calls"})

    @classmethod
    def text(cls, role: Role, text: str) -> Message:
        """A message with a single text part."""
        return cls(role=role, content=[TextPart(text=text)])

    def text_content(self) -> str:
        """The concatenated text parts, newline-separated ("" when there are none)."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))
