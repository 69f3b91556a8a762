"""Governance rules: tool-name globs, path globs, command prefixes, effect classes, first match, default."""

from __future__ import annotations

import pytest

from flightlog.kernel import Decision, Policy, Rule
from flightlog.kernel.policy import glob_match


def test_first_matching_rule_wins_and_the_default_decides_the_rest() -> None:
    policy = Policy(
        rules=(
            Rule("deny", tool="shell", arg="command", command_prefix="rm"),
            Rule("allow", tool="shell", arg="command", command_prefix="git status"),
            Rule("ask", tool="shell"),
            Rule("allow", effect="read_only"),
        ),
        default="deny",
    )
    assert policy.decide("shell", {"command": "rm -rf /"}, "side_effect").action == "deny"
    allowed = policy.decide("shell", {"command": "git status --short"}, "side_effect")
    assert allowed == Decision("allow", "policy rule 1 (tool=shell arg=command command_prefix=git status)", 1)
    assert policy.decide("shell", {"command": "git push"}, "side_effect").rule == 2
    assert policy.decide("read_file", {}, "read_only").action == "allow"
    fallback = policy.decide("send_mail", {}, "side_effect")
    assert fallback == Decision("deny", "policy default (deny)", None)


def test_tool_name_globs() -> None:
    policy = Policy(rules=(Rule("ask", tool="write_*", reason="writes need a human"),))
    assert policy.decide("write_file", {}, "side_effect") == Decision("ask", "writes need a human", 0)
    assert policy.decide("read_file", {}, "read_only").action == "allow"
    assert policy.decide("Write_file", {}, "side_effect").action == "allow"  # case-sensitive


def test_effect_class_rules() -> None:
    policy = Policy(rules=(Rule("ask", effect="side_effect"),), default="allow")
    assert policy.decide("anything", {}, "side_effect").action == "ask"
    assert policy.decide("anything", {}, "idempotent").action == "allow"


@pytest.mark.parametrize(
    ("path", "pattern", "matches"),
    [
        ("/etc/passwd", "/etc/**", True),
        ("/etc", "/etc/**", False),
        ("src/a.py", "src/*.py", True),
        ("src/pkg/a.py", "src/*.py", False),
        ("src/pkg/a.py", "src/**/*.py", True),
        ("src/a.py", "src/**/*.py", True),  # **/ also matches no directory
        ("src/../etc/passwd", "etc/**", True),  # normalised before matching
        ("./src/./a.py", "src/*.py", True),
        ("src\\win\\a.py", "src/**", True),
        ("a.txt", "?.txt", True),
        ("ab.txt", "?.txt", False),
        ("data/b1.csv", "data/[ab][0-9].csv", True),
        ("data/c1.csv", "data/[!ab]1.csv", True),
    ],
)
def test_path_globs(path: str, pattern: str, matches: bool) -> None:
    assert glob_match(path, pattern) is matches


def test_path_rules_look_at_the_named_argument_only() -> None:
    policy = Policy(rules=(Rule("deny", tool="*", arg="path", path="/etc/**"),))
    assert policy.decide("write", {"path": "/etc/../etc/shadow"}, "side_effect").action == "deny"
    assert policy.decide("write", {"path": "/tmp/x"}, "side_effect").action == "allow"
    assert policy.decide("write", {"target": "/etc/x"}, "side_effect").action == "allow"  # no such arg
    assert policy.decide("write", {"path": 3}, "side_effect").action == "allow"  # not a string


@pytest.mark.parametrize(
    ("command", "matches"),
    [
        ("git push origin main", True),
        ("git push", True),
        ("  git   push --force", True),
        ("git pushx", False),
        ("git", False),
        ("/usr/bin/git push", True),  # first word by base name
        ("'git' push", True),  # shell quoting
        (["git", "push", "-f"], True),  # argv lists
        (["git", "pull"], False),
        (42, False),
    ],
)
def test_command_prefix_rules(command: object, matches: bool) -> None:
    rule = Rule("deny", tool="shell", arg="cmd", command_prefix="git push")
    assert rule.matches("shell", {"cmd": command}, "side_effect") is matches


def test_arg_presence_rule() -> None:
    rule = Rule("ask", arg="force")
    assert rule.matches("x", {"force": False}, "idempotent")
    assert not rule.matches("x", {}, "idempotent")


def test_bad_rules_and_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="must name the argument"):
        Rule("deny", path="/etc/**")
    with pytest.raises(ValueError, match="not both"):
        Rule("deny", arg="a", path="x", command_prefix="y")
    with pytest.raises(ValueError, match="action"):
        Rule("maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="effect"):
        Rule("allow", effect="mutating")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="default"):
        Policy(default="sometimes")  # type: ignore[arg-type]


def test_policy_from_plain_data() -> None:
    policy = Policy.from_dict(
        {
            "default": "ask",
            "rules": [{"action": "allow", "effect": "read_only"}, {"action": "deny", "tool": "rm"}],
        }
    )
    assert policy.default == "ask" and len(policy.rules) == 2
    assert policy.decide("rm", {}, "side_effect").action == "deny"
    with pytest.raises(ValueError, match="unknown policy keys"):
        Policy.from_dict({"defaults": "ask"})
    with pytest.raises(ValueError, match="bad policy rule"):
        Policy.from_dict({"rules": [{"action": "allow", "tools": "x"}]})
