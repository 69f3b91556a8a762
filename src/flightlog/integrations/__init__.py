"""Adapters that put other agent frameworks' state and traces on the flightlog ledger.

Each submodule imports its framework's SDK; importing this package imports none of them.
"""
