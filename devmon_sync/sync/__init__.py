"""The sync: mirror what a key can see into the store, incrementally, exactly once.

- ``engine``: ``SyncEngine`` (what ``devmon sync`` and the GUI's sync run): metadata, then
  the data windows, each committed with its proof.
- ``plan``: pack streams into as few requests as the service's limits allow (pure).
- ``metadata`` and ``metadata_check``: read sites, devices and groups whatever options the
  service honours, and judge whether the answers hold everything a mirror keeps.
- ``proof``: fetch one window until the mirror can prove it whole (the completeness judge,
  follow-ups, learned caps).
- ``future_points``: points stamped after the service's now (a logger's wrong clock) are
  kept and reported, and never move a stream's cursor.
- ``verify`` (``devmon verify``) and ``probe`` (``devmon probe``): audit a mirror, measure a
  service.
"""
