"""The reference Device Monitoring API server: a deterministic simulator of the whole read API.

It shares nothing mutable with the sync client; both read ``devmon_sync.api_contract``.
"""

from devmon_sync.lazy import exports

#: The names offered here and the module each comes from, imported when first asked for
#: (PEP 562): `devmon` builds the ``serve`` command's parser from ``server.contracts`` and
#: ``server.config`` without loading the HTTP server and the world (0.15 s of every
#: command's start).
_EXPORTS = {"FaultConfig": "config", "ServerConfig": "config", "parse_api_key": "config",
            "ReferenceServer": "http", "Misbehaviour": "misbehave", "WorldSize": "world"}

__all__ = sorted(_EXPORTS)
__getattr__ = exports("devmon_sync.server", _EXPORTS)
