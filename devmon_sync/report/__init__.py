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

from devmon_sync.lazy import exports

#: The names offered here and the module each comes from, imported when first asked for
#: (PEP 562): `devmon` builds the ``report`` command's parser from ``report.resolution``
#: without loading matplotlib.
_EXPORTS = {"DeviceEntry": "model", "ReportData": "model", "ReportError": "model",
            "ReportOptions": "model", "Scope": "model", "SitePlan": "model",
            "build_report": "model", "resolve_scope": "model", "ReportResult": "render",
            "Section": "render", "check_output": "render", "write_report": "render"}

__all__ = sorted(_EXPORTS)
__getattr__ = exports("devmon_sync.report", _EXPORTS)
