"""PDF reports of GNSS deformation: ``build_report`` gathers, ``write_report`` draws.

    from devmon_sync.report import ReportOptions, build_report, write_report
    data = build_report(mirror, ReportOptions(site="Illgraben slope"))
    result = write_report(data, "report.pdf", png_dir="figures")

``build_report`` reads the mirror (scope, analyses through ``devmon_sync.analyze.rovers``, site
plans, last sync) into a ``ReportData``; ``write_report`` draws it with matplotlib (no
pyplot) into an A4 PDF and optional PNGs and returns a ``ReportResult`` (page count,
sections, PNG paths).  Neither keeps global state, so the GUI runs them in a worker thread
with its own ``mirror.for_thread()``.  Both raise ``ReportError`` (a ValueError) with a
message saying what to change.
"""

from devmon_sync.report.model import (DeviceEntry, ReportData, ReportError, ReportOptions,
                                      Scope, SitePlan, build_report, resolve_scope)
from devmon_sync.report.render import ReportResult, Section, check_output, write_report

__all__ = ["DeviceEntry", "ReportData", "ReportError", "ReportOptions", "ReportResult", "Scope",
           "Section", "SitePlan", "build_report", "check_output", "resolve_scope",
           "write_report"]
