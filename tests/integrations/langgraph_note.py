"""A custom pydantic state value for the killed-writer tests: not one of LangGraph's safe msgpack types, so a
strict serde refuses it. Imported by ``langgraph_head_writer.py`` as the top-level module ``langgraph_note``
(the writer runs as a script from this directory), which is what its msgpack form names."""

from __future__ import annotations

from pydantic import BaseModel


class Note(BaseModel):
    text: str
