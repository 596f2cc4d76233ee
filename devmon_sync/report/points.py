"""Which device each point number of the report details is for.

The details file keys point numbers by a device's serial number or name (``[points]``), as a
person writes them; the mirror decides what a key names, the way ``--device`` does
(``queries.serials_named``: serial number, display name, alias or name, any case).  A key
no device has, a name several devices share, one device given two numbers and one number
given to two devices are all warned about on the report's cover: each would put a wrong or
missing number on the register and the plans, which a client reads as the site's own
numbering.  A shared name numbers none of its devices (guessing would number the wrong
point)."""

from __future__ import annotations

from dataclasses import dataclass

from devmon_sync.report.details import ReportDetails
from devmon_sync.store import Mirror, queries


@dataclass(frozen=True)
class PointNumbers:
    """Point number by serial number, and what to warn about (sentences)."""

    by_serial: dict[str, str]
    warnings: tuple[str, ...]


def point_numbers(mirror: Mirror, details: ReportDetails) -> PointNumbers:
    """The point numbers of ``details`` resolved against the devices of ``mirror``."""
    where = f" in {details.source}" if details.source else ""
    by_serial: dict[str, str] = {}
    keyed_by: dict[str, str] = {}
    unknown, warnings = [], []
    for key, number in details.point_numbers:
        serials = queries.serials_named(mirror, key)
        if not serials:
            unknown.append(key)
        elif len(serials) > 1:
            warnings.append(
                f"Point number {number}{where} is keyed by {key!r}, which {len(serials)} "
                f"devices are named ({', '.join(serials)}): none of them is numbered. Key it "
                f"by the serial number of the one it is for.")
        elif serials[0] in by_serial and by_serial[serials[0]] != number:
            sn = serials[0]
            warnings.append(
                f"{sn} is given two point numbers{where}: {by_serial[sn]} (as "
                f"{keyed_by[sn]!r}) and {number} (as {key!r}); {by_serial[sn]} is used. "
                f"Keep one.")
        else:
            by_serial[serials[0]] = number
            keyed_by[serials[0]] = key
    if unknown:
        warnings.insert(0, f"Point numbers{where} name no device of the mirror: "
                           f"{', '.join(unknown)}. Check the spelling (a device's name or "
                           f"serial number).")
    return PointNumbers(by_serial, tuple(warnings + _shared_numbers(by_serial, where)))


def _shared_numbers(by_serial: dict[str, str], where: str) -> list[str]:
    """One number (in any case) given to several devices."""
    holders: dict[str, list[str]] = {}
    for sn, number in by_serial.items():
        holders.setdefault(number.casefold(), []).append(sn)
    return [f"Point number {by_serial[sns[0]]}{where} is given to {len(sns)} devices "
            f"({', '.join(sns)}): give each point its own number."
            for sns in holders.values() if len(sns) > 1]
