"""Where devmon keeps its files: the platform's user directories (platformdirs), never the
install folder (which is read-only in an installed app).

- the default mirror: ``user_data_dir/devmon/mirror.duckdb`` (``DEVMON_DATA_DIR`` overrides);
- logs: ``user_log_dir/devmon/`` (``DEVMON_LOG_DIR`` overrides);
- settings and profiles: ``devmon_sync.credentials.config_dir()`` and the GUI's QSettings.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "devmon"
ENV_DATA_DIR = "DEVMON_DATA_DIR"
ENV_LOG_DIR = "DEVMON_LOG_DIR"


def data_dir() -> Path:
    override = os.environ.get(ENV_DATA_DIR)
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))


def default_mirror() -> Path:
    """The mirror a command uses when no ``--db`` is given."""
    return data_dir() / "mirror.duckdb"


def log_dir() -> Path:
    override = os.environ.get(ENV_LOG_DIR)
    return Path(override) if override else Path(platformdirs.user_log_dir(APP_NAME))
