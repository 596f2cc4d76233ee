"""What kind of device a serial number is, in words, for the commands that take GNSS
rovers only: a crack meter given to ``analyze``, ``report`` or GNSS levels in ``alarms`` is
named as a crack meter with the commands that do read it, not as "no GNSS rover" as for a
serial number mistyped."""

from __future__ import annotations

from devmon_sync.printable import printable
from devmon_sync.store import Mirror, queries
from devmon_sync.store.browse import device_tree

#: The commands that read a device that is no GNSS rover, named when one is given to analyze.
READS_OTHER_DEVICES = ("its readings are plotted by `devmon gui` (Plots tab) and written by "
                       "`devmon export`; levels on its parameters are set with `devmon alarms "
                       "--device {serial} --parameter UUID:alert=...`")


ANALYSED = ("`devmon analyze` and `devmon report` analyse GNSS rovers (here: {rovers})")
GNSS_LEVELS = ("displacement and velocity levels apply to GNSS rovers (here: {rovers})")


def not_a_rover(mirror: Mirror, serial: str, refused: str = ANALYSED) -> str:
    """"DM24-15028 (Mattmark Crackmeter 12) is a crack meter, not a GNSS rover: ..." with
    what is refused (``refused``, with the rovers there are as ``{rovers}``) and the
    commands that read such a device (issue 30.12: analyze said "No GNSS rover", as for a
    serial number mistyped; report "no GNSS rover in 1 device"; alarms set GNSS levels on
    a crack meter that no analysis would read)."""
    device = next(d for site in device_tree(mirror) for d in site.devices
                  if d.serial_number == serial)
    label = serial if device.display_name == serial else f"{serial} ({device.display_name})"
    rovers = [d.serial_number for d in queries.gnss_devices(mirror) if d.epochs]
    listed = ", ".join(rovers[:8]) + (", ..." if len(rovers) > 8 else "")
    return (f"{printable(label)} is {_kind(device)}, not a GNSS rover: "
            f"{refused.format(rovers=listed or 'none')}; "
            f"{READS_OTHER_DEVICES.format(serial=printable(serial))}")


def is_rover(mirror: Mirror, serial: str) -> bool:
    """Whether ``serial`` is a GNSS rover of the mirror (base stations are not)."""
    return any(d.serial_number == serial for d in queries.gnss_devices(mirror))


_INSTRUMENTS = ("meter", "gauge", "prism", "radar", "transducer", "station", "logger")
_NOT_ITS_KIND = ("logger internals", "barometer")  # on most devices beside what they are


def _kind(device) -> str:
    """What a device is, by its sensors: "a crack meter", "a GNSS base station", "a device
    with weather sensors", "a device with no sensors"."""
    if device.is_gnss_base:
        return "a GNSS base station (it solves no position of its own)"
    names = [s.name for s in device.sensors if s.name]
    main = next((n for n in names if n.casefold() not in _NOT_ITS_KIND), None) or \
        next(iter(names), None)
    if main is None:
        return "a device with no sensors"
    words = printable(main).lower()
    if words.endswith(_INSTRUMENTS):
        return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"
    return f"a device with {words} sensors"
