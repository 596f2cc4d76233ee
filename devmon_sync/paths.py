"""Where devmon keeps its files: the platform's user directories (platformdirs), never the
install folder (which is read-only in an installed app).

- the default mirror: ``user_data_dir/devmon/mirror.duckdb`` (``DEVMON_DATA_DIR`` overrides);
- logs: ``user_log_dir/devmon/`` (``DEVMON_LOG_DIR`` overrides);
- caches: ``user_cache_dir/devmon/`` (``DEVMON_CACHE_DIR`` overrides), e.g. the desktop
  app's matplotlib font list (``keep_matplotlib_cache``);
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
ENV_CACHE_DIR = "DEVMON_CACHE_DIR"


def data_dir() -> Path:
    override = os.environ.get(ENV_DATA_DIR)
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))


def default_mirror() -> Path:
    """The mirror a command uses when no ``--db`` is given."""
    return data_dir() / "mirror.duckdb"


def log_dir() -> Path:
    override = os.environ.get(ENV_LOG_DIR)
    return Path(override) if override else Path(platformdirs.user_log_dir(APP_NAME))


def cache_dir() -> Path:
    override = os.environ.get(ENV_CACHE_DIR)
    return Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME))


def keep_matplotlib_cache() -> Path | None:
    """Point matplotlib at a lasting folder, ``cache_dir() / "matplotlib"``, before it is
    imported; the folder, or None when it cannot be made or written (matplotlib then keeps
    whatever folder it was given).

    For the desktop app, whose entry scripts call this first: PyInstaller's run-time hook
    gives matplotlib a new temporary folder in every process (a one-file app moves its
    fonts at every start), so each start of the app, and each report worker it spawns,
    listed every font of the system again (0.12 CPU s plus 0.25 ms a font here,
    ``benchmarks/bench_font_list.py``; hundreds of fonts on a Windows laptop), and a killed
    process left the list behind in its folder.  devmon is built as one folder, whose fonts
    stay where they are; a list that names a font no longer there is made again by
    matplotlib itself (``findfont``'s ``rebuild_if_missing``)."""
    folder = cache_dir() / "matplotlib"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        return None
    os.environ["MPLCONFIGDIR"] = str(folder)
    return folder


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
