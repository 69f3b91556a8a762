"""Paths and commands under the grant in force, checked at the moment a tool opens or runs them.

Planning checks a call's arguments lexically (:mod:`flightlog.kernel.ceiling`), possibly long before the
call runs. The filesystem decides what a path reaches: ``src/link/passwd`` matches ``src/**`` while
``src/link`` is a symlink to ``/etc``. This module checks paths against the real filesystem, and gives
tool authors three functions that apply the session's grant (:func:`~flightlog.kernel.ceiling.
current_ceiling`) when they run; with no grant in force they open, resolve and run as usual.

* :func:`open_path` ``(path, mode)``: open a file for the tool, refusing what resolves outside.
* :func:`resolve_path` ``(path)``: the checked real path, for code that must be handed a path.
* :func:`run_command` ``(command)``: run a command string (or argv) *without a shell*; the string must
  be one plain command (:func:`~flightlog.kernel.shell.parse_command`) inside ``command_prefixes``.

**Where a path may lead** (:func:`real_path_problem`). The path is first checked lexically, as at
planning. Then every symlink in it that exists is followed (:func:`os.path.realpath`, relative paths from
the working directory at that moment, as the tool's own ``open`` would) and the real path must lie where
some glob of ``path_globs`` really is:

* for a relative path, a relative glob's literal leading directories (``src`` of ``src/**``, nothing of
  ``**``) are resolved from the working directory too, and the real path must lie under them with the
  rest matching the glob's wildcards (``src/**`` where ``src`` itself links to ``/mnt/src`` allows
  ``/mnt/src/...``; a symlink from ``src`` to ``/etc`` leads out). Under ``**`` a relative path must
  stay inside the real working directory;
* an absolute glob is matched against the real path as written, or with its literal leading
  directories resolved (``/tmp/ws/**`` where ``/tmp`` links to ``/private/tmp``);
* for an absolute path, a relative glob is matched against the real path as written (so ``**``, which
  lexically allows any absolute path, still does).

**The guarantee of** :func:`open_path` (POSIX; Linux for the last step). Under a grant it (1) refuses a
path outside, lexically or resolved, opening nothing; (2) opens the resolved path one component at a
time from ``/``, each directory with ``O_DIRECTORY | O_NOFOLLOW`` relative to the previous one
(``openat``), the file with ``O_NOFOLLOW``, so a component swapped for a symlink after the check fails
the open (refused, naming the component) instead of being followed; (3) writes (``w``, ``a``, ``x``,
``+``) refuse a regular file with more than one hard link, before anything is truncated (``O_TRUNC`` is
applied with ``ftruncate`` after the checks); (4) re-checks the opened descriptor's own path
(``/proc/self/fd/N``) against the ceiling, refusing (and closing) when a directory on the way was moved
outside meanwhile. What was opened is the file reached through checked, symlink-free components.

**Its limits.** A hard link inside the ceiling to a file outside is read like any file inside (only
writes are refused); where ``/proc`` is missing (not Linux) step 4 is skipped, so a directory renamed
out between steps 2 and 4 goes unnoticed; :func:`resolve_path` is only a check (code that reopens the
path later can be raced: prefer :func:`open_path`); a tool that opens paths itself (``open(path)``,
``shutil``, a subprocess) gets only the kernel's check before the call, which a process racing that
tool can defeat; mount points count as directories like any other; Windows is not supported under a
grant (there is no ``O_NOFOLLOW`` or ``openat``): :func:`open_path` raises ``OSError`` there.

Source: POSIX.1-2017 ``openat``, ``O_NOFOLLOW``, ``O_DIRECTORY``; Linux ``open(2)`` (``O_PATH``),
``proc(5)`` (``/proc/self/fd``).
"""

from __future__ import annotations

import codecs
import errno
import os
import shlex
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..integrity.grants import GrantPolicy
from .ceiling import Ceiling, argv_problem, current_ceiling, path_problem
from .errors import OutsideCeiling
from .policy import glob_match
from .records import CallPlan
from .shell import parse_command
from .tether import tethered
from .tools import Tool

__all__ = ["open_path", "real_path_problem", "resolve_path", "run_command", "runtime_problem"]

_WILDCARDS = frozenset("*?[")
_PROC_FD = "/proc/self/fd"


def _glob_base(glob: str) -> tuple[str, str]:
    """``(literal leading directories, rest)`` of a path glob: ``src/**`` → ``("src", "**")``."""
    segments = glob.split("/")
    for index, segment in enumerate(segments):
        if _WILDCARDS & set(segment):
            base = "/".join(segments[:index])
            return (base or ("/" if glob.startswith("/") else "")), "/".join(segments[index:])
    return glob, ""


def _under(real: str, glob: str, here: str) -> bool:
    """Whether ``real`` lies under ``glob``'s resolved literal directories, the rest matching."""
    base, rest = _glob_base(glob)
    root = os.path.realpath(os.path.join(here, base))
    if real == root:
        return not rest or glob_match(".", rest)
    prefix = root.rstrip("/") + "/"
    return bool(rest) and real.startswith(prefix) and glob_match(real[len(prefix) :], rest)


def _inside(policy: GrantPolicy, real: str, here: str, *, relative: bool) -> bool:
    for glob in policy.path_globs:
        if glob.startswith("/"):
            if glob_match(real, glob) or _under(real, glob, here):
                return True
        elif relative:
            if _under(real, glob, here):
                return True
        elif glob_match(real, glob):
            return True
    return False


def real_path_problem(policy: GrantPolicy, value: str, *, cwd: str | None = None) -> tuple[str, str | None]:
    """Resolve a path argument on the filesystem and say why it lies outside the path ceiling.

    Args:
        policy: The grant.
        value: The path as the tool receives it (relative to ``cwd``, or absolute).
        cwd: The working directory relative paths start from (default: the process's, now).

    Returns:
        ``(real path, problem)``: the absolute path with every existing symlink followed, and None when
        it is inside (see the module docs), else why not.
    """
    here = os.path.realpath(cwd if cwd is not None else os.getcwd())
    real = os.path.realpath(os.path.join(here, value))
    lexical = path_problem(policy, value)
    if lexical is not None:
        return real, lexical
    if _inside(policy, real, here, relative=not os.path.isabs(value)):
        return real, None
    return real, f"it resolves to {real!r} through a symlink, outside path_globs {policy.path_globs}"


def runtime_problem(ceiling: Ceiling, plan: CallPlan, tool: Tool | None) -> str | None:
    """Why a planned call must not run now: a path argument resolves outside the grant (None: none does).

    The kernel calls it right before running each call of a session with a grant.
    """
    for name, value in ceiling.path_arguments(plan, tool):
        _, problem = real_path_problem(ceiling.policy, value)
        if problem is not None:
            return f"argument {name!r} = {value!r}: {problem}"
    return None


def _checked(ceiling: Ceiling, value: str, here: str) -> str:
    real, problem = real_path_problem(ceiling.policy, value, cwd=here)
    if problem is not None:
        raise OutsideCeiling(value=value, reason=f"grant policy {ceiling.policy.policy_id}: {problem}")
    return real


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """The real path of ``path`` (every existing symlink followed), checked against the grant in force.

    A check, not a lock: code that opens the returned path later can be raced (see the module docs);
    prefer :func:`open_path` for files.

    Returns:
        The absolute real path (relative paths from the working directory).

    Raises:
        OutsideCeiling: under a grant, the path is outside ``path_globs``, lexically or resolved.
    """
    value = os.fspath(path)
    ceiling = current_ceiling()
    if ceiling is None:
        return Path(os.path.realpath(value))
    return Path(_checked(ceiling, value, os.path.realpath(os.getcwd())))


_ACCESS = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


def _flags(mode: str) -> int:
    kinds = [c for c in mode if c in _ACCESS]
    if len(kinds) != 1 or set(mode) - set("rwaxbt+") or len(set(mode)) != len(mode):
        raise ValueError(f"invalid mode {mode!r}")
    flags = _ACCESS[kinds[0]]
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    return flags | getattr(os, "O_CLOEXEC", 0)


def _refuse_swapped(value: str, walked: str, exc: OSError) -> None:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and os.path.islink(walked):
        raise OutsideCeiling(
            value=value,
            reason=f"{walked!r} is a symlink now, after the path was checked (nothing was opened)",
        ) from exc


def _open_walk(value: str, real: str, flags: int) -> int:
    """Open ``real`` (absolute, symlink-free when checked) one component at a time, following no symlink."""
    dir_flags = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
    parts = real.split("/")[1:]
    fd = os.open("/", dir_flags)
    try:
        walked = ""
        for part in parts[:-1]:
            walked += "/" + part
            try:
                step = os.open(part, dir_flags, dir_fd=fd)
            except OSError as exc:
                _refuse_swapped(value, walked, exc)
                raise
            os.close(fd)
            fd = step
        last = parts[-1] or "."
        try:
            return os.open(last, flags | os.O_NOFOLLOW, 0o666, dir_fd=fd)
        except OSError as exc:
            _refuse_swapped(value, walked + "/" + last, exc)
            raise
    finally:
        os.close(fd)


def _after_open(ceiling: Ceiling, value: str, fd: int, flags: int, here: str) -> None:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", value)
    writes = flags & (os.O_WRONLY | os.O_RDWR)
    if writes and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise OutsideCeiling(
            value=value,
            reason=f"the file has {info.st_nlink} hard links (another name of it may lie outside the "
            "grant); refused to write",
        )
    if not os.path.isdir(_PROC_FD):
        return
    now = os.readlink(f"{_PROC_FD}/{fd}")
    if not _inside(ceiling.policy, now, here, relative=not os.path.isabs(value)):
        raise OutsideCeiling(
            value=value,
            reason=f"grant policy {ceiling.policy.policy_id}: the file opened is {now!r} (a directory "
            f"was moved while opening), outside path_globs {ceiling.policy.path_globs}",
        )


def open_path(
    path: str | os.PathLike[str],
    mode: str = "r",
    *,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
) -> IO[Any]:
    """Open a file for a tool, under the grant in force (see the module docs for the guarantee).

    Args:
        path: The path argument, relative to the working directory or absolute.
        mode: As for :func:`open`: one of ``r``, ``w``, ``a``, ``x``, optionally with ``+`` and ``b``/``t``.
        encoding: Text mode encoding (default: the locale's, as :func:`open`).
        errors: Text mode error handler.
        newline: Text mode newline handling.

    Returns:
        The open file object, as :func:`open` returns it.

    Raises:
        OutsideCeiling: under a grant: the path is outside ``path_globs`` (lexically or resolved), a
            component became a symlink while opening, a written file has several hard links, or the
            opened file is outside (nothing is left open, nothing truncated).
        OSError: as :func:`open` (missing file, permissions, a directory); under a grant on a platform
            without ``openat``/``O_NOFOLLOW`` (Windows), ``ENOSYS``.
        ValueError: an invalid mode.
    """
    value = os.fspath(path)
    ceiling = current_ceiling()
    if ceiling is None:
        return open(value, mode, encoding=encoding, errors=errors, newline=newline)
    if os.open not in os.supports_dir_fd or not hasattr(os, "O_NOFOLLOW"):
        raise OSError(errno.ENOSYS, "open_path under a grant needs POSIX openat and O_NOFOLLOW", value)
    flags = _flags(mode)
    if encoding is not None:
        codecs.lookup(encoding)
    here = os.path.realpath(os.getcwd())
    real = _checked(ceiling, value, here)
    fd = _open_walk(value, real, flags & ~os.O_TRUNC)
    try:
        _after_open(ceiling, value, fd, flags, here)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, mode, encoding=encoding, errors=errors, newline=newline)


def run_command(
    command: str | Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command without a shell (``subprocess.run(argv, shell=False)``), under the grant in force.

    Args:
        command: A command line (must be one plain command: :func:`~flightlog.kernel.shell.parse_command`
            splits it to argv), or the argv itself (run as given: without a shell nothing in it is
            interpreted).
        cwd: Working directory of the command; under a grant it is a path checked like any other
            (:func:`resolve_path`).
        timeout_s: Kill the command after this many seconds (``subprocess.TimeoutExpired``).
        input: Text fed to its standard input (default: none, ``/dev/null``).
        env: Its environment (default: this process's).

    On Linux the command runs under :mod:`~flightlog.kernel.tether`: it dies with the kernel process (a
    command must not finish an effect behind a resume that found its call in doubt); its own children do
    not, unless they die with it.

    Returns:
        The finished process, stdout and stderr captured as text; a non-zero exit is not an error here
        (``args`` is the tethered command line on Linux).

    Raises:
        CommandRefused: the string has a shell construct (redirection, expansion, chaining...), named.
        OutsideCeiling: under a grant, argv does not start with one of ``command_prefixes``, or ``cwd``
            is outside ``path_globs``.
        ValueError: an empty argv.
        OSError: the program cannot be started (not found, not executable).
    """
    argv = parse_command(command) if isinstance(command, str) else [str(arg) for arg in command]
    if not argv:
        raise ValueError("run_command needs a non-empty command")
    workdir = None if cwd is None else os.fspath(cwd)
    ceiling = current_ceiling()
    if ceiling is not None:
        problem = argv_problem(ceiling.policy, argv)
        if problem is not None:
            raise OutsideCeiling(
                value=shlex.join(argv), reason=f"grant policy {ceiling.policy.policy_id}: {problem}"
            )
        if workdir is not None:
            workdir = str(resolve_path(workdir))
    return subprocess.run(
        tethered(argv, cwd=workdir, path=(os.environ if env is None else env).get("PATH", os.defpath)),
        shell=False,
        cwd=workdir,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
