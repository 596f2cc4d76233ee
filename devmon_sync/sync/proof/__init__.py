"""One window of data, fetched until the mirror can prove it whole.

- ``fetcher``: ``WindowFetcher`` asks for a window, judges it, asks follow-ups, commits.
- ``judge``: is an answer whole, per stream?  (A service may cut answers silently.)
- ``follow_ups``: which questions about a possibly cut answer are worth asking, and what
  their answers prove.
- ``caps``: what a cut answer teaches about the service's silent caps.
- ``arrays``: an answer's points as numpy arrays, the judge's input.
"""
