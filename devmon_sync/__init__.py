"""devmon: offline sync of a Device Monitoring Service into one DuckDB file."""

__version__ = "0.1.0"
