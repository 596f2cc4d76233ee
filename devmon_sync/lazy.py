"""Names a package re-exports, imported only when first asked for (PEP 562): `devmon`
builds every command's parser at start, and a package that imported its heavy modules
eagerly (``devmon_sync.report``: matplotlib) would make every command pay for them.  The
reference server has its own copy of the few lines: it shares no module with the client
side (tests/test_layers.py)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def exports(package: str, modules: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``modules`` maps each name offered to the
    submodule it comes from."""
    def __getattr__(name: str) -> object:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
    return __getattr__
