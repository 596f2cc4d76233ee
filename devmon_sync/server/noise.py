"""Counter-based randomness: the value at sample k is a pure function of (stream, k).

Series are generated lazily for whatever window a request asks for, so the noise of a sample
cannot depend on which samples were generated before it (as a sequential RNG would).  Each
stream gets a 64-bit key from a cryptographic hash of its name; each sample index is mixed with
that key through SplitMix64's finaliser.  Vectorised over numpy uint64 arrays.
"""

from __future__ import annotations

import hashlib
import uuid

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_PI = 2.0 * np.pi


def stream_key(*parts: object) -> int:
    """A 64-bit key naming one random stream, e.g. ``stream_key(seed, "noise", param_uuid)``."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _mix(x: np.ndarray) -> np.ndarray:
    # uint64 array arithmetic wraps modulo 2**64 silently, as SplitMix64 wants.
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def hash64(key: int, index: np.ndarray) -> np.ndarray:
    """Well-mixed uint64 for each index of the stream ``key``."""
    idx = np.asarray(index).astype(np.int64).view(np.uint64)
    return _mix(_mix(idx) ^ np.uint64(key))


def uniform(key: int, index: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1), one per index."""
    return (hash64(key, index) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def normal(key: int, index: np.ndarray) -> np.ndarray:
    """Standard normal floats, one per index (Box-Muller on two sub-streams)."""
    u1 = uniform(key, index)
    u2 = uniform(key ^ 0x5DEECE66D, index)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(_TWO_PI * u2)


def uuid4_from(*parts: object) -> str:
    """A deterministic, valid version-4 UUID string for the named thing."""
    raw = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=16).digest()
    return str(uuid.UUID(bytes=raw, version=4))
