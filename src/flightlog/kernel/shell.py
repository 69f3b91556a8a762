"""Shell command strings: parsed with a Bash grammar, accepted only as one plain command, split to argv.

A tool argument that is a shell command (the grant's command ceiling, :mod:`flightlog.kernel.ceiling`) is
only safe to prefix-check when it *is* one command with literal words: a redirection (``>``, ``>>``,
``<``, ``2>``, ``&>``, a here-document), an expansion (``$VAR``, ``${...}``, ``$(...)``, backticks,
``$((...))``, globs, ``{a,b}``, ``~``), a second command (``;``, ``&``, ``&&``, ``||``, ``|``, a
newline) or a compound (a subshell, ``{ ...; }``, ``if``/``for``/functions, ``[[ ]]``) would let
``git status`` write, read or run anything. :func:`parse_command` proves a string is none of these, or
refuses it naming the construct (:class:`~flightlog.kernel.errors.CommandRefused`).

**How it proves it.** The string is parsed with tree-sitter's Bash grammar (``tree-sitter-bash``, a
maintained, MIT-licensed grammar of the whole Bash language; ``bashlex`` was rejected: GPL-3.0, last
released in 2023). It is accepted only when all of these hold:

1. The parse has no error, and the program is exactly one ``command`` node: nothing before or after it
   (no ``;``, ``&``, newline, comment), no redirection, assignment, negation, pipeline, list or compound
   around it.
2. Only printable characters and spaces (no newline, tab, carriage return or other control character).
3. Each word of the command is a bare word, a ``'single-quoted'`` string, a ``"double-quoted"`` string
   whose only content is literal text, or a concatenation of those (``a"b"'c'``): no other node (no
   expansion, substitution, ``$'...'``, ``$"..."``, brace expression) anywhere in it.
4. Bare words have none of the characters Bash gives a meaning to: ``$`` `````, ``*`` ``?`` ``[`` ``]``
   (globs), ``{`` ``}`` (brace expansion), ``~`` (tilde expansion), ``!`` (history, negation), ``#``
   (comments), ``\\`` (escapes), ``;`` ``&`` ``|`` ``<`` ``>`` ``(`` ``)``. Double-quoted text has no
   ``$``, ````` or ``\\`` (the characters Bash still interprets inside double quotes).
5. The first word is not a Bash reserved word (``if``, ``time``, ``coproc``, ``!``, ``[[`` ...).
6. The argv read from the tree (quotes removed) equals :func:`shlex.split` of the string (POSIX mode,
   no comments): two independent readings must agree, or the string is refused.

What is left is a list of literal words, which every POSIX shell reads the same way. The argv it returns
is what to run *without* a shell (``subprocess.run(argv, shell=False)``:
:func:`flightlog.kernel.confine.run_command`); a tool that hands the string to a shell instead still gets
the same words, since nothing in it is interpreted.

**What it does not prove.** A command prefix grants whatever the program does with its other arguments:
``git diff --output=/etc/x`` writes a file, ``find -exec`` runs programs. The grant's author decides
which programs and subcommands to trust; the kernel only guarantees the shell adds nothing.

Source: Bash Reference Manual §3.1.2 (quoting), §3.5 (shell expansions), §3.6 (redirections), §3.2
(reserved words, pipelines, lists); POSIX.1-2017 XCU §2.2-2.10 (shell command language).
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from typing import TYPE_CHECKING

from .errors import CommandRefused

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = ["CONSTRUCTS", "RESERVED_WORDS", "WORD_SPECIALS", "parse_command"]

CONSTRUCTS: dict[str, str] = {
    "redirected_statement": "a redirection",
    "file_redirect": "a redirection (>, >>, <, 2>, &>, >&)",
    "heredoc_redirect": "a here-document (<<)",
    "herestring_redirect": "a here-string (<<<)",
    "simple_expansion": "a parameter expansion ($VAR)",
    "expansion": "a parameter expansion (${...})",
    "command_substitution": "a command substitution ($(...) or backticks)",
    "process_substitution": "a process substitution (<(...) or >(...))",
    "arithmetic_expansion": "an arithmetic expansion ($((...)))",
    "ansi_c_string": "an ANSI-C quoted string ($'...')",
    "translated_string": 'a locale-translated string ($"...")',
    "brace_expression": "a brace expansion ({a..b})",
    "pipeline": "a pipeline (|)",
    "list": "command chaining (&&, ||)",
    "subshell": "a subshell ((...))",
    "compound_statement": "a compound command ({ ...; } or ((...)))",
    "variable_assignment": "an environment assignment (NAME=value)",
    "variable_assignments": "an environment assignment (NAME=value)",
    "declaration_command": "a declaration (declare, export, local, readonly)",
    "unset_command": "an unset command",
    "negated_command": "a negated command (!)",
    "test_command": "a test command ([[ ]])",
    "comment": "a comment (#)",
    "if_statement": "an if statement",
    "while_statement": "a loop",
    "for_statement": "a loop",
    "c_style_for_statement": "a loop",
    "case_statement": "a case statement",
    "function_definition": "a function definition",
    ";": "command chaining (;)",
    "&": "a background command (&)",
    "$": 'a $ construct ($"..." or a lone $)',
}
"""Human names of the Bash grammar's node types the parser refuses (any other refused node is named by
its type)."""

RESERVED_WORDS = frozenset(
    {"!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
     "function", "if", "in", "select", "then", "time", "until", "while"}
)  # fmt: skip
"""Bash reserved words (Bash manual §2, "reserved word"), refused as the first word of a command."""

WORD_SPECIALS: dict[str, str] = {
    "$": "a parameter expansion or substitution ($)",
    "`": "a command substitution (backtick)",
    "*": "a glob (*)",
    "?": "a glob (?)",
    "[": "a glob ([...])",
    "]": "a glob ([...])",
    "{": "a brace expansion ({...})",
    "}": "a brace expansion ({...})",
    "~": "a tilde expansion (~)",
    "!": "a history expansion or negation (!)",
    "#": "a comment (#)",
    "\\": "a backslash escape (\\)",
    ";": "command chaining (;)",
    "&": "a background command or chaining (&)",
    "|": "a pipeline (|)",
    "<": "a redirection (<)",
    ">": "a redirection (>)",
    "(": "a subshell or substitution (()",
    ")": "a subshell or substitution ())",
}
"""Characters refused in a bare (unquoted) word, each with the construct it could start."""

_IN_DOUBLE_QUOTES = ("$", "`", "\\")
_PLAIN = frozenset({"word", "number", "raw_string", "string", "concatenation"})


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def _refuse(command: str, construct: str) -> CommandRefused:
    return CommandRefused(command=command, construct=construct)


def _named(node: Node) -> str:
    if node.type == "redirected_statement":
        redirects = [c for c in node.children if c.type.endswith("_redirect")]
        return _named(redirects[0]) if redirects else CONSTRUCTS[node.type]
    if node.type == "file_redirect":
        operator = "".join(_text(c) for c in node.children if c.type == "file_descriptor" or not c.is_named)
        return f"a redirection ({operator})"
    return CONSTRUCTS.get(node.type, f"a Bash {node.type.replace('_', ' ')}")


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8")


def _check_characters(command: str) -> None:
    for char in command:
        if char == "\n" or char == "\r":
            raise _refuse(command, "a newline or carriage return")
        if char != " " and not char.isprintable():
            raise _refuse(command, f"a control or non-printing character ({char!r})")


def _literal_word(command: str, text: str) -> str:
    for char in text:
        if char in WORD_SPECIALS:
            raise _refuse(command, WORD_SPECIALS[char])
    return text


def _double_quoted(command: str, node: Node) -> str:
    parts: list[str] = []
    for child in node.children:
        if child.type == '"':
            continue
        if child.type != "string_content":
            raise _refuse(command, _named(child))
        text = _text(child)
        for char in _IN_DOUBLE_QUOTES:
            if char in text:
                raise _refuse(command, f"{WORD_SPECIALS[char]} inside double quotes")
        parts.append(text)
    return "".join(parts)


def _word(command: str, node: Node) -> str:
    if node.type not in _PLAIN:
        raise _refuse(command, _named(node))
    if node.type in ("word", "number"):
        if node.child_count:
            raise _refuse(command, _named(node.children[0]))
        return _literal_word(command, _text(node))
    if node.type == "raw_string":
        return _text(node)[1:-1]
    if node.type == "string":
        return _double_quoted(command, node)
    return "".join(_word(command, part) for part in node.children)


def _the_command(command: str, root: Node) -> Node:
    if root.has_error:
        raise _refuse(command, "text the Bash grammar cannot parse (an unbalanced quote or operator)")
    statements = list(root.children)
    if not statements:
        raise _refuse(command, "an empty command")
    for node in statements:
        if node.type != "command":
            raise _refuse(command, _named(node))
    if len(statements) > 1:
        raise _refuse(command, "more than one command (chaining with a newline)")
    return statements[0]


def parse_command(command: str) -> list[str]:
    """Prove ``command`` is one plain command of literal words, and return its argv.

    Args:
        command: A shell command line, as a tool argument carries it.

    Returns:
        The words with quotes removed (``git commit -m "a b"`` → ``["git", "commit", "-m", "a b"]``),
        never empty.

    Raises:
        CommandRefused: the string is anything else (see the module docs); ``construct`` names the first
            shell construct found ("a redirection (2>)", "a here-document (<<)", "a parameter expansion
            ($VAR)", "command chaining (&&, ||)", ...).

    Source: Bash Reference Manual §3.1.2, §3.2, §3.5, §3.6; POSIX.1-2017 XCU §2.
    """
    root = _parser().parse(command.encode("utf-8")).root_node
    node = _the_command(command, root)
    _check_characters(command)
    argv: list[str] = []
    for child in node.children:
        target = child.children[0] if child.type == "command_name" and child.child_count == 1 else child
        argv.append(_word(command, target))
    if not argv:
        raise _refuse(command, "an empty command")
    if argv[0] in RESERVED_WORDS:
        raise _refuse(command, f"a Bash reserved word ({argv[0]})")
    try:
        split = shlex.split(command, comments=False, posix=True)
    except ValueError as exc:
        raise _refuse(command, f"text shlex cannot split ({exc})") from exc
    if split != argv:
        raise _refuse(command, f"words the Bash grammar and shlex read differently ({argv} vs {split})")
    return argv
