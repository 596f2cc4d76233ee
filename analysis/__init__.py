"""GNSS deformation analysis: pure functions on numpy arrays (no Qt, no HTTP, no SQL)."""
