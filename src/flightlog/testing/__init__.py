"""Test helpers shipped with flightlog, for backends outside this package.

``concurrency``: force thread interleavings (no pytest needed). ``store_contract``: the suite every storage
backend must pass, a pytest class (``pip install 'flightlog[testing]'``; without pytest, importing it raises
an ImportError naming that extra).
"""
