"""Safety checked from the outside: what the clients saw, recorded, and a checker of it.

A lease exists so that two hosts never both believe they hold one task. The crash, failover
and soak runs check that acknowledged work is kept; this package checks, from the histories
the clients themselves recorded, that the server kept its promises, in the manner of a
Jepsen analysis: every claim, start, renewal, result and release (and the clients' submits,
cancels and messages) with its start and end times on the client's clocks and the answer it
got, then four rules over all of them together.

- `recorder`: an httpx transport that wraps the real one and appends one JSON line per
  recorded request to a history file. Only callers that ask for it get it (the Host Agent's
  ``--record-history``, the test harnesses' clients): when off, nothing is wrapped.
- `operations`: a history line read back as a typed `Operation`.
- `final`: the final state, read over HTTP once the run is over.
- `rules`: the four rules, and `check`, which runs them all. The exact rules (and why each is
  sound: it never reports a violation that the uncertainty of the clocks could explain) are
  written in `rules` and in docs/reliability.md.

Imports the kernel's lifecycle declarations (the moves a task may make) and nothing else of amc.
"""
