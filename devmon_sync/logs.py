"""The sync log: a rotating file for support, with no secret in it.

Each ``devmon sync`` (and a sync from the GUI) appends what it did (requests, waits the
service asked for, retries, problems, the outcome) to ``sync.log`` in the user log folder
(``devmon_sync.paths.log_dir()``), 1 MB per file and 5 old files kept.  API keys never reach
the log: the client does not log them, and a filter masks any key it is told about and the
header that carries one, as a second line of defence.
"""

from __future__ import annotations

import logging
import re
from logging.handlers import RotatingFileHandler
from pathlib import Path

from devmon_sync.paths import log_dir
from devmon_sync.printable import printable

LOG_FILE = "sync.log"
#: "devmon" (the client's retries and waits) and "devmon.sync", which does not propagate
#: (its lines are for the file; the console shows the progress bar)
LOGGERS = ("devmon", "devmon.sync")
MAX_BYTES = 1_000_000
BACKUPS = 5
_HEADER = re.compile(r"(x-api-key['\"]?\s*[:=]\s*['\"]?)[^'\"\s,}]+", re.IGNORECASE)


class RedactSecrets(logging.Filter):
    """Masks the given secrets, and any ``x-api-key: ...`` value, in every record."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        super().__init__()
        self.secrets = [s for s in (secrets or []) if s]

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        for secret in self.secrets:
            text = text.replace(secret, "***")
        record.msg, record.args = _HEADER.sub(r"\1***", text), None
        return True


class PrintableRecords(logging.Filter):
    """Shows control and bidi characters of a record's message, newlines included, as
    escapes (``devmon_sync.printable``): a name from the service cannot start a line of its
    own in the log, nor act on the terminal that shows it."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        shown = printable(text)
        if shown != text:
            record.msg, record.args = shown, None
        return True


class HideFileOnly(logging.Filter):
    """For a terminal handler: drop records meant for the sync log only (``extra`` with
    ``log_file_only``: the library's long texts behind a short line already shown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "log_file_only", False)


def open_sync_log(secrets: list[str] | None = None) -> tuple[logging.Handler, Path] | None:
    """Attach the rotating sync log to the ``devmon`` loggers; returns (handler, path) to pass
    to ``close_sync_log``, or None when the log folder cannot be written (logging is then
    skipped: a sync never fails for want of a log)."""
    folder = log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(folder / LOG_FILE, maxBytes=MAX_BYTES,
                                      backupCount=BACKUPS, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secrets))
    handler.addFilter(PrintableRecords())
    handler.setLevel(logging.INFO)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))
    return handler, folder / LOG_FILE


def close_sync_log(opened: tuple[logging.Handler, Path] | None) -> None:
    if opened is not None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(opened[0])
        opened[0].close()
