"""Reading the metadata a mirror keeps, whatever options the service honours.

The list routes (GET /sites, /devices, /device-groups) are what an honest service answers
in a handful of requests.  When their answers lack something (``metadata_check``), the spec's
full routes fill it in: GET /devices/{sn} "returns full device information (sensors,
formulas, current configuration)", GET /device-groups/{uuid} one group with its devices.
Each fallback costs a request per device or group and is said in the run's notes, so the
user knows why a sync took longer and what the service would not give.
"""

from __future__ import annotations

from collections.abc import Callable

from devmon_sync import service_profile as assumed
from devmon_sync.client import ApiClient, ForbiddenError, NotFoundError
from devmon_sync.client.paging import ListReading
from devmon_sync.sync.metadata_check import (
    groups_without_devices,
    listed_serials,
    named_elsewhere,
    with_full_records,
    without_formulas,
    without_internal,
)

DQ = assumed.DEVICES_QUERY
MISSING_NAMED = 50
"""Devices a note names one by one before it says "and N more"."""
GQ = assumed.DEVICE_GROUPS_QUERY


class MetadataReader:
    """Reads sites, devices and groups, completing what the lists lack."""

    def __init__(self, client: ApiClient, notes: list[str],
                 problem: Callable[[str, Exception], None]):
        self.client = client
        self.notes = notes
        self.problem = problem
        self.groups_whole = True
        """False once a group listing was refused: the memberships then stay as they were."""
        self.devices_whole = False
        """True once ``read`` found the device list whole (``_known_whole``): only then may a
        mirrored device it lacks be marked removed upstream."""

    def read(self) -> tuple[list[dict], list[dict], dict]:
        """(sites, devices, groups) as complete as the spec's routes allow."""
        sites = self.client.sites(include_devices=True)
        devices = self.client.devices()
        groups = self._groups()
        return sites, self._completed(devices, sites, groups), groups

    def full_records(self, serials: list[str]) -> dict[str, dict]:
        """GET /devices/{sn} of each serial; a device refused or gone is a problem, skipped."""
        out = {}
        for serial in serials:
            try:
                out[serial] = self.client.device(serial)
            except (ForbiddenError, NotFoundError) as err:
                self.problem(f"device:{serial}", err)
        return out

    # -- devices

    def _completed(self, devices: list[dict], sites: list[dict], groups: dict) -> list[dict]:
        named = named_elsewhere(sites, groups)
        devices, reading = self._walked_again(devices, named)
        listed = listed_serials(devices)
        missing = named - listed
        self._note_walks(reading)
        if missing:
            self.notes.append(
                f"GET /devices listed {len(listed)} devices in {_walks(reading)}, but the "
                f"sites and groups name {len(missing)} more: devmon read them one by one "
                f"(GET /devices/{{sn}}): {_some(missing, shown=MISSING_NAMED)}.")
        partial = set()
        inactive = self._option_refused(DQ["include_inactive_sensors"]) or \
            self._option_refused(DQ["include_sensors"])
        if inactive:
            partial = set(listed)
            self.notes.append(
                f"The service refuses {inactive}: devmon read all {len(listed)} devices one "
                f"by one (GET /devices/{{sn}}) to keep inactive sensors and their archived "
                f"data.")
        formulas = without_formulas(devices) - partial
        if formulas:
            partial |= formulas
            self.notes.append(
                f"The device list gave derived parameters of {len(formulas)} devices without "
                f"their formulas (the service {self._refuses_or_ignores(DQ['include_formulas'])}"
                f"): devmon read those devices one by one (GET /devices/{{sn}}).")
        self._note_internal(devices)
        full = self.full_records(sorted(missing | partial)) if missing or partial else {}
        self._note_short(reading, listed | (missing & set(full)), missing & set(full))
        self.devices_whole = _known_whole(reading, listed | (missing & set(full)),
                                          missing - set(full))
        return with_full_records(devices, full) if full else devices

    def _walked_again(self, devices: list[dict], named: set[str]
                      ) -> tuple[list[dict], ListReading | None]:
        """The device list, walked once more when the sites and groups name devices it
        lacks and the client walked it only once (its order may have moved unseen), with
        every device either walk listed; and what the walks showed."""
        reading = self.client.list_reading
        listed = listed_serials(devices)
        if reading is None or reading.walks > 1 or not named - listed:
            return devices, reading
        again = self.client.devices(walks=1)
        second = self.client.list_reading or reading
        merged = devices + [d for d in again if d.get("serialNumber") not in listed]
        return merged, ListReading(
            len(listed_serials(merged)), second.total if second.total is not None
            else reading.total, reading.moved or second.moved, reading.walks + second.walks)

    def _note_walks(self, reading: ListReading | None) -> None:
        if reading is not None and reading.moved:
            self.notes.append(
                f"GET /devices changed its order while devmon walked it (a page listed again "
                f"devices an earlier page had, as a list sorted by last contact does): "
                f"devmon walked it {_times(reading.walks)} and kept every device any walk "
                f"listed ({reading.listed}).")

    def _note_short(self, reading: ListReading | None, have: set[str],
                    read_alone: set[str]) -> None:
        """Say so when the service's total counts devices no route gave: they are lost
        to the mirror, and only the user can take it further."""
        total = reading.total if reading is not None else None
        if total is None or len(have) >= total:
            return
        also = f" and the sites and groups named {len(read_alone)} more" if read_alone else ""
        short = total - len(have)
        self.notes.append(
            f"GET /devices said it holds {total} devices, but {_walks(reading)} listed "
            f"{reading.listed}{also}: {short} device{'s' if short > 1 else ''} that no "
            f"other route names {'are' if short > 1 else 'is'} not mirrored. Run the sync "
            f"again (a list whose order moves may list {'them' if short > 1 else 'it'} "
            f"then); if the count stays short, ask the service's provider why its device "
            f"list and its total disagree.")

    def _note_internal(self, devices: list[dict]) -> None:
        if without_internal(devices):
            self.notes.append(
                f"The service gives no `_internal` device fields (it "
                f"{self._refuses_or_ignores(DQ['include_internal'])}); they are not mirrored.")

    # -- groups

    def _groups(self) -> dict:
        try:
            groups = self.client.device_groups(include_devices=True, include_ungrouped=False)
        except ForbiddenError as err:  # groups are a view; the devices are what matters
            self.groups_whole = False
            self.problem("device-groups", err)
            return {"grouped": [], "ungrouped": []}
        if not groups_without_devices(groups):
            return groups
        roots = [g for g in groups.get("grouped") or () if isinstance(g, dict) and "uuid" in g]
        self.notes.append(
            f"The service gave device groups without their devices (it "
            f"{self._refuses_or_ignores(GQ['include_devices'], '/device-groups')}): devmon "
            f"read the {len(roots)} top-level groups one by one (GET /device-groups/{{uuid}}).")
        return {"grouped": [self._group(g) for g in roots],
                "ungrouped": groups.get("ungrouped") or []}

    def _group(self, group: dict) -> dict:
        try:
            return self.client.device_group(group["uuid"])
        except (ForbiddenError, NotFoundError) as err:
            self.groups_whole = False
            self.problem(f"device-group:{group['uuid']}", err)
            return group

    # -- words

    def _option_refused(self, name: str, path: str = "/devices") -> str:
        return f"{name} (HTTP 400)" if self.client.refused(path, name) else ""

    def _refuses_or_ignores(self, name: str, path: str = "/devices") -> str:
        return f"refuses {name}" if self.client.refused(path, name) else f"ignores {name}"


def removed_note(serials: list[str]) -> str:
    """What a run says of the devices it found gone from a device list known whole."""
    one = len(serials) == 1
    it, its, they = ("it", "its", "it") if one else ("them", "their", "they")
    return (f"The service no longer lists {len(serials)} device{'' if one else 's'} the "
            f"mirror held ({_some(set(serials), shown=MISSING_NAMED)}): decommissioned, or "
            f"moved where this key cannot see. devmon marked {it} removed upstream and keeps "
            f"{its} archive, but no longer syncs {it}; if {they} should still be there, ask "
            f"the service's operators about the key's access.")


def _known_whole(reading: ListReading | None, have: set[str], unread: set[str]) -> bool:
    """Whether the devices read are every device the key can see: a walk of the list that
    reached the total the service stated, or, with no total, whose order never moved (a
    moved order may let a device slip past unseen); every device the sites and groups name
    read; and not none at all (an empty list is taken for a fault, not for every device
    gone).  A device read one by one because the list lacked it does not make it doubtful."""
    if reading is None or not have or unread:
        return False
    if reading.total is not None:
        return len(have) >= reading.total
    return not reading.moved


def _walks(reading: ListReading | None) -> str:
    walks = reading.walks if reading is not None else 1
    return "one walk" if walks == 1 else f"{walks} walks"


def _times(walks: int) -> str:
    return {1: "once", 2: "twice"}.get(walks, f"{walks} times")


def _some(serials: set[str], shown: int = 3) -> str:
    names = sorted(serials)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
