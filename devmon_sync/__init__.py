"""devmon: offline sync of a Device Monitoring Service into one DuckDB file, its analysis and
its reports.  The rooms of this package, top to bottom (each imports only those below it;
``docs/architecture.md`` has the map and where each capability lives):

- ``cli``: the ``devmon`` command, one module per command, argument types in ``cli.args``.
- ``demo``: the demo world (server, sync, analysis, report) as ``devmon demo`` and the app run it.
- ``report`` (PDF/PNG reports) and ``server`` (the reference API server, which shares nothing
  with the client side).
- ``analyze`` (the store's series through ``analysis``) and ``sync`` (the mirror sync and
  its proof of completeness; which streams exist, ``inventory``; where their history starts,
  ``history``; what the service changed since, ``recheck``; ``verify``, ``probe``).
- ``store`` (DuckDB: the schema and every SQL statement) and ``client`` (HTTP: the only code
  that speaks it).
- At the root, what every room may use: ``service_profile`` (what the client knows of the
  service), ``credentials``, ``logs``, ``paths``, ``external_apps``, ``api_contract`` (the
  reference server's choices where the spec is silent), ``timestamps`` and ``identifiers``
  (the spec's timestamps and UUIDs, read one way on both sides).
"""

__version__ = "0.1.0"
