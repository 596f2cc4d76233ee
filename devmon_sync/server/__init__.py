"""The reference Device Monitoring API server: a deterministic simulator of the whole read API.

It shares nothing mutable with the sync client; both read ``devmon_sync.api_contract``.
"""

import importlib

#: The names offered here and the module each comes from, imported when first asked for
#: (PEP 562): `devmon` builds the ``serve`` command's parser from ``server.contracts`` and
#: ``server.config`` without loading the HTTP server and the world (0.15 s of every
#: command's start).
_EXPORTS = {"FaultConfig": "config", "ServerConfig": "config", "parse_api_key": "config",
            "ReferenceServer": "http", "Misbehaviour": "misbehave", "WorldSize": "world"}

__all__ = sorted(_EXPORTS)


# (its own __getattr__, not devmon_sync.lazy: the server shares no module with the client)
def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'devmon_sync.server' has no attribute {name!r}")
    return getattr(importlib.import_module(f"devmon_sync.server.{_EXPORTS[name]}"), name)
