"""The programs a simulated device can run, by name (`/system/bin/` is stripped first).

Each program is a function `(Invocation) -> exit status`. Output goes through
`inv.out()`/`inv.err()` and time passes only through `inv.process.sleep()`, so signals
and stream closes reach every program the same way (see `process`).
"""

from __future__ import annotations

from . import android, inputs, managers, posix, processes, recording

REGISTRY = {
    **posix.PROGRAMS,
    **processes.PROGRAMS,
    **android.PROGRAMS,
    **inputs.PROGRAMS,
    **managers.PROGRAMS,
    **recording.PROGRAMS,
}
