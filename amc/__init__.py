"""amc: agentic mobile control.

A control plane that leases tasks to Android devices on Hosts, and the Host Agent that
runs them over ADB. `amc.core` is the pure, IO-free kernel; everything else adapts it.
"""

__version__ = "0.1.0"
