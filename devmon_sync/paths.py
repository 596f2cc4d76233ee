"""Where devmon keeps its files: the platform's user directories (platformdirs), never the
install folder (which is read-only in an installed app).

- the default mirror: ``user_data_dir/devmon/mirror.duckdb`` (``DEVMON_DATA_DIR`` overrides);
- logs: ``user_log_dir/devmon/`` (``DEVMON_LOG_DIR`` overrides);
- settings and profiles: ``devmon_sync.credentials.config_dir()`` and the GUI's QSettings.

And how a name from the data becomes part of a file or folder name (``file_name_part``,
``fits_folder_name``): bounded, so that a service's 10,000-character name cannot make a
report or an export fail with "File name too long", and unique, so that two long names
differing only at their end still get a file each.
"""

from __future__ import annotations

import hashlib
import os
import re
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


MAX_NAME_BYTES = 100
"""The most a name from the data takes of a file or folder name, in bytes (UTF-8): file
systems allow 255 a name, and devmon adds a prefix or suffix (``site-``, ``_plan.png``,
``device_serial_number=``)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_HASH_CHARS = 12  # hex digits of the full name's SHA-256 kept: 48 bits


def file_name_part(text: str, max_bytes: int = MAX_NAME_BYTES,
                   always_hash: bool = False) -> str:
    """``text`` as part of a file name: letters, digits, ``.``, ``_`` and ``-`` (every
    other run of characters becomes one ``-``; no leading dot), at most ``max_bytes``
    bytes.  A longer one (or any, with ``always_hash``) is cut and ends in ``~`` and a hash
    of the whole ``text``, so two names differing only after the cut still get different
    files."""
    safe = _UNSAFE.sub("-", text).strip("-").lstrip(".") or "unnamed"
    if len(safe) <= max_bytes and not always_hash:  # ASCII: a character a byte
        return safe
    return f"{safe[:max_bytes - _HASH_CHARS - 1]}~{name_hash(text)}"


def name_hash(text: str) -> str:
    """A short hash of ``text`` (any string, lone surrogates too) that tells long names
    apart in file names."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]


def fits_folder_name(text: str, max_bytes: int = MAX_NAME_BYTES) -> bool:
    """Whether ``text`` fits a folder name percent-encoded (as a Hive partition value is),
    counting every byte that is not an ASCII letter or digit as encoded (``%XX``)."""
    size = sum(1 if c.isascii() and c.isalnum() else 3 * len(c.encode("utf-8", "surrogatepass"))
               for c in text)
    return 0 < size <= max_bytes
