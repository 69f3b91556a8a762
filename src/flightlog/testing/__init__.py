"""Test helpers shipped with flightlog (``store_contract``: the suite every storage backend must pass)."""
