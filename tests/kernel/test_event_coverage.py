"""Every event kind the kernel can emit is checked field by field somewhere in these tests.

The emitted set is derived from the kernel's source (event classes it constructs, ``Custom`` kinds it
names), so a new emission without a test fails here.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

from flightlog import events
from flightlog.kernel import records
from flightlog.kernel.errors import AgentSpecError, NotPending

KERNEL_SRC = Path(records.__file__).parent
TESTS = Path(__file__).parent

_EVENT_CLASSES = {
    name: cls
    for name in events.__all__
    if isinstance(cls := getattr(events, name), type) and issubclass(cls, events.Event) and name != "Custom"
}
_RECORDER_CUSTOM = ("external_effect_intent", "external_effect_completed")  # written by Recorder for us


def _emitted() -> tuple[set[str], set[str]]:
    source = "\n".join(p.read_text() for p in KERNEL_SRC.glob("*.py"))
    classes = {name for name in _EVENT_CLASSES if re.search(rf"\b{name}\(", source)}
    customs = {value for name, value in vars(records).items() if name.isupper() and isinstance(value, str)}
    return classes, customs | set(_RECORDER_CUSTOM)


def test_the_kernel_emits_the_expected_vocabulary() -> None:
    classes, customs = _emitted()
    assert classes == {
        "RunStarted",
        "CheckpointTaken",
        "LlmCompleted",
        "ToolRequested",
        "ToolArgumentRepaired",
        "PermissionResolved",
        "ToolDenied",
        "ToolGated",
        "PermissionRequested",
        "Suspended",
        "Resumed",
        "ToolCompleted",
        "Rollbacked",
        "BudgetExceeded",
        "OperationCancelled",
        "RunTerminal",
    }
    assert customs == {
        "provider_capability_evidence",
        "budget_limits",
        "model_usage",
        "tool_decisions",
        "approval_decision",
        "provider_retry",
        "route_failover",
        "effect_reconciled",
        "grant_policy",
        "external_effect_intent",
        "external_effect_completed",
    }


def test_every_emitted_kind_is_checked_by_a_test() -> None:
    classes, customs = _emitted()
    tests = "\n".join(p.read_text() for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name)
    for name in classes:  # compared as a whole event, or its fields read after of(store, sid, Class)
        assert re.search(rf"\b{name}\(|of\([^)]*\b{name}\)", tests), name
    for kind in customs:  # payloads compared via customs(store, sid, kind)
        assert f'customs(store, sid, "{kind}")' in tests or f'"{kind}")' in tests, kind


def test_kernel_errors_pickle() -> None:
    for error in (NotPending(session_id="s", call_id="c"), AgentSpecError(spec="m:a", reason="nope")):
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is type(error) and str(clone) == str(error)
