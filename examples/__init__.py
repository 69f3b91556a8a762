"""Runnable examples (a checkout's ``examples/`` folder; not part of the installed package)."""
