"""``python -m flightlog.fleet --db URL [--concurrency N] [--lease S] [--poll S]``: run one worker.

The same worker as ``flightlog worker``, without the CLI app (fast start for supervisors and tests).
SIGTERM/SIGINT stop claiming and let the running activations finish.
"""

from __future__ import annotations

import argparse
import logging
import signal

from ..store import open_store
from .worker import Worker


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run a worker until signalled (or idle/limit), return 0."""
    parser = argparse.ArgumentParser(prog="python -m flightlog.fleet", description="Run a fleet worker.")
    parser.add_argument("--db", required=True, help="store URL or path")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--lease", type=float, default=30.0, help="lease length, seconds")
    parser.add_argument("--poll", type=float, default=1.0, help="longest idle wait, seconds")
    parser.add_argument("--idle-exit", type=float, default=None, help="exit after this many idle seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with open_store(args.db) as store:
        worker = Worker(store, concurrency=args.concurrency, lease_ttl_s=args.lease, poll_s=args.poll)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: worker.stop())
        worker.run(idle_exit_s=args.idle_exit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
