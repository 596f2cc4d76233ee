"""Identifiers as the spec defines them, read one way on both sides.

The spec says UUIDs are "version-4 UUID strings"; RFC 9562 reads their hex digits
case-insensitively, and services differ in how they write them (SQL Server renders GUIDs in
upper case).  devmon compares UUIDs only in canonical form (lower case): every UUID an answer
carries passes through ``canonical_uuid`` before it is compared with, or keyed against, what
the mirror holds (the mirror's UUID columns are canonical by type).
"""

from __future__ import annotations


def canonical_uuid(text: str) -> str:
    """``text`` in the form devmon compares UUIDs in (lower case); cheap for text already in
    it, so hot paths may call it on every key."""
    return text if text.islower() or not text else text.lower()
