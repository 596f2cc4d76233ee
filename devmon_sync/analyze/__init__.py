"""Analyses of mirrored rovers: the store's series through ``analysis``'s pure functions.

- ``rovers``: ``analyze_device``/``analyze_devices``, the one place that joins the store and
  ``analysis`` (for ``devmon analyze``, the GUI and the reports).
- ``pool``: many rovers on every core (``--jobs``), also used to draw a long report's pages.
- ``alarm_history``: alarm levels evaluated after each sync and kept in the mirror.
- ``site_plans``: the site plans (positions, frame, point numbers) of analysed rovers, one
  computation for the report's plan pages and the GUI's plan view.
"""
