"""Build the ``flightlog`` click command tree lazily: a command is converted when it is looked up (issue 19).

typer turns every registered command into a click command before it parses anything: for each it reads the
function's signature and evaluates every annotation (``typing.get_type_hints``), 100-160 ms for the whole
tree on a loaded 2-core machine, paid by ``flightlog --version`` and by every single command. Here the root
group is built with its own options only, and its ``commands`` mapping holds each command's (or command
group's) name with a factory: typer's own converter (``typer.main.get_command_from_info`` /
``get_group_from_info``) runs the first time click looks the name up (``get_command`` when dispatching,
``list_commands`` + ``get_command`` when printing ``--help``). So ``flightlog --version`` builds nothing
below the root and ``flightlog ls`` builds ``ls`` only, while the converted commands, their order and
every help text are typer's own (``tests/test_cli_lazy.py`` compares the help of the root and of every
command and group with the eager build).
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import typer
import typer.main


class LazyCommands(MutableMapping[str, Any]):
    """A click group's ``commands``: names in registration order, each built by its factory on first access.

    Iterating (``list_commands``, suggestions for a mistyped name) builds nothing; ``commands[name]`` builds
    ``name`` once and keeps it. Setting a name (click's ``add_command``) stores the command as given.
    """

    def __init__(self, factories: dict[str, Callable[[], Any]]) -> None:
        self._factories = factories
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            factory = self._factories[name]  # KeyError: not a command, as a dict would say
            self._built[name] = factory()
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._factories.setdefault(name, lambda: command)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._factories[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories


def lazy_command(app: typer.Typer) -> Any:
    """The click group of ``app`` with its sub-commands built on demand (see the module docstring).

    ``app`` must have a callback (a group, as the ``flightlog`` root has). The commands of a group added
    without a name are merged into the parent, each lazy too, as typer merges them.
    """
    shell = copy.copy(app)  # the root alone: its callback's options (--db, --debug, --version, completion)
    shell.registered_commands = []
    shell.registered_groups = []
    group: Any = typer.main.get_command(shell)
    options: dict[str, Any] = {
        "pretty_exceptions_short": app.pretty_exceptions_short,
        "rich_markup_mode": app.rich_markup_mode,
    }
    group_options = dict(options)
    if "suggest_commands" in inspect.signature(typer.main.get_group_from_info).parameters:
        group_options["suggest_commands"] = getattr(app, "suggest_commands", True)
    factories: dict[str, Callable[[], Any]] = {}
    _add_factories(factories, app, options, group_options)
    group.commands = LazyCommands(factories)
    return group


def _add_factories(
    factories: dict[str, Callable[[], Any]],
    app: typer.Typer,
    options: dict[str, Any],
    group_options: dict[str, Any],
) -> None:
    """Name -> factory for every command and group of ``app``, in the order (and with the overrides) of
    ``typer.main.get_group_from_info``: commands first, then groups; a group added without a name
    contributes its own commands and groups in its place (its callback, if any, is built at once, as
    typer warns about it)."""
    for info in app.registered_commands:
        assert info.callback is not None, "a typer command has a callback"
        name = info.name or typer.main.get_command_name(info.callback.__name__)
        factories[name] = _command_factory(info, options)
    for sub in app.registered_groups:
        group_name = typer.main.solve_typer_info_defaults(sub).name
        if group_name:
            factories[group_name] = _group_factory(sub, group_options)
        elif sub.typer_instance is not None and not _has_callback(sub):
            _add_factories(factories, sub.typer_instance, options, group_options)
        else:  # typer warns about the callback here; let it
            built = typer.main.get_group_from_info(sub, **group_options)
            for sub_name, command in built.commands.items():
                factories[sub_name] = _ready(command)


def _has_callback(info: Any) -> bool:
    return bool(info.typer_instance.registered_callback or info.callback)


def _command_factory(info: Any, options: dict[str, Any]) -> Callable[[], Any]:
    return lambda: typer.main.get_command_from_info(info, **options)


def _group_factory(info: Any, options: dict[str, Any]) -> Callable[[], Any]:
    return lambda: typer.main.get_group_from_info(info, **options)


def _ready(command: Any) -> Callable[[], Any]:
    return lambda: command


class LazyTyper(typer.Typer):
    """A :class:`typer.Typer` whose ``app()`` runs the lazily built tree of :func:`lazy_command`.

    Only for apps with typer's pretty exceptions off (``pretty_exceptions_enable=False``, as ``flightlog``):
    an uncaught exception then goes to Python's own excepthook, as typer would send it.
    ``typer.main.get_command(app)`` (``typer.testing.CliRunner``) still builds the whole tree eagerly.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.pretty_exceptions_enable:
            return super().__call__(*args, **kwargs)
        if sys.excepthook is not typer.main.except_hook:
            sys.excepthook = typer.main.except_hook
        return lazy_command(self)(*args, **kwargs)
