"""flightlog."""
