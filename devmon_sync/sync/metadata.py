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
from devmon_sync.sync.metadata_check import (
    groups_without_devices,
    listed_serials,
    named_elsewhere,
    with_full_records,
    without_formulas,
    without_internal,
)

DQ = assumed.DEVICES_QUERY
GQ = assumed.DEVICE_GROUPS_QUERY


class MetadataReader:
    """Reads sites, devices and groups, completing what the lists lack."""

    def __init__(self, client: ApiClient, notes: list[str],
                 problem: Callable[[str, Exception], None]):
        self.client = client
        self.notes = notes
        self.problem = problem

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
        listed = listed_serials(devices)
        missing = named_elsewhere(sites, groups) - listed
        if missing:
            self.notes.append(
                f"GET /devices listed {len(listed)} devices, but the sites and groups name "
                f"{len(missing)} more ({_some(missing)}): devmon read them one by one.")
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
        if not (missing or partial):
            return devices
        return with_full_records(devices, self.full_records(sorted(missing | partial)))

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
            self.problem(f"device-group:{group['uuid']}", err)
            return group

    # -- words

    def _option_refused(self, name: str, path: str = "/devices") -> str:
        return f"{name} (HTTP 400)" if self.client.refused(path, name) else ""

    def _refuses_or_ignores(self, name: str, path: str = "/devices") -> str:
        return f"refuses {name}" if self.client.refused(path, name) else f"ignores {name}"


def _some(serials: set[str], shown: int = 3) -> str:
    names = sorted(serials)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
