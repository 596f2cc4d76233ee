"""The reference Device Monitoring API server: a deterministic simulator of the whole read API.

It shares nothing mutable with the sync client; both read ``devmon_sync.api_contract``.
"""

from devmon_sync.server.config import FaultConfig, ServerConfig, parse_api_key
from devmon_sync.server.http import ReferenceServer
from devmon_sync.server.misbehave import Misbehaviour
from devmon_sync.server.world import WorldSize

__all__ = ["FaultConfig", "Misbehaviour", "ReferenceServer", "ServerConfig", "WorldSize",
           "parse_api_key"]
