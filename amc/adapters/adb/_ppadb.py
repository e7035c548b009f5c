"""The one place that imports ppadb.

ppadb 0.3.0.dev0 has invalid escape sequences in non-raw regex strings. Without a
cached .pyc and under `-W error`, compiling them raises SyntaxError (specs/adb.md §1.7), so
the import silences exactly those compile-time warnings.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", category=DeprecationWarning, message="invalid escape sequence")
    warnings.filterwarnings("ignore", category=SyntaxWarning, message="invalid escape sequence")
    from ppadb.client import Client
    from ppadb.connection import Connection
    from ppadb.device import Device

__all__ = ["Client", "Connection", "Device"]
