"""The engine: runner, campaign state, events, scheduling."""
