"""An attacker with write access to a SQLite ledger file: edit events, then re-chain so the plain chain verifies.

``rechain(db, session_id, edit)`` replaces each event's bytes by ``edit(seq, data)`` and recomputes every
chain hash and the session row's head and Merkle root, as someone who knows the (public) hashing rule can.
Only signatures (checkpoints, retained heads, the index log) can tell such a ledger from the original.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from flightlog.ledger import chain_hash, leaf_hash, merkle_root


def rechain(db: Path, session_id: str, edit: Callable[[int, bytes], bytes]) -> None:
    """Rewrite ``session_id``'s events in ``db`` through ``edit`` and re-chain them (module docstring)."""
    raw = sqlite3.connect(db)
    try:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        rows = raw.execute(
            "SELECT seq, event FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        prev, leaves = "GENESIS", []
        for seq, stored in rows:
            data = edit(seq, bytes(stored))
            digest = chain_hash(prev, seq, data)
            raw.execute(
                "UPDATE events SET event = ?, prev_hash = ?, hash = ? WHERE session_id = ? AND seq = ?",
                (data, prev, digest, session_id, seq),
            )
            prev = digest
            leaves.append(leaf_hash(data))
        raw.execute(
            "UPDATE sessions SET head_hash = ?, merkle_root = ? WHERE session_id = ?",
            (prev, merkle_root(leaves).hex(), session_id),
        )
        raw.commit()
    finally:
        raw.close()
