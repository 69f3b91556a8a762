"""Store URLs in messages: the one rule that keeps a password out of every error and log line.

A module of its own, below every backend: :mod:`flightlog.store.postgres` redacts its URLs with it and the
package re-exports it (``flightlog.store.redact_url``) for the CLI.
"""

from __future__ import annotations

import re

__all__ = ["redact_url"]

_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#\s]*:)[^@\s]*@")
_KEYWORD_PASSWORD = re.compile(r"(?i)(?<![\w%])((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&;\s]*)")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for error messages and logs).

    Masks the URL's ``user:password@``, ``password=`` and ``sslpassword=`` query parameters, and the same
    keywords in a libpq keyword string (``host=... password=secret``, quoted values included).
    """
    url = _USERINFO_PASSWORD.sub(r"\1***@", url)
    return _KEYWORD_PASSWORD.sub(r"\1***", url)
