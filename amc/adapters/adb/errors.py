"""How an action on a device can end other than with a result.

`StepFailed` and its subclasses are failures (the step's outcome is `failed`);
`Interrupted` means the action was stopped from outside (outcome `interrupted`);
`ActionRefused` means the host's policy never let it start (outcome `refused`).
"""

from __future__ import annotations


class AdbError(Exception):
    """Base of every error this adapter raises."""

    def __init__(self, reason: str, *, output: str = "", commands: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.output = output  # whatever output arrived before the error, possibly partial
        self.commands = commands  # the device commands sent, in order


class StepFailed(AdbError):
    """The action ran (or tried to) and did not succeed."""


class DeviceUnavailable(StepFailed):
    """The device or the adb server is gone, offline, unauthorized or not answering."""


class StepTimedOut(StepFailed):
    """The action outlived its deadline; it was stopped, on the device too."""


class Interrupted(AdbError):
    """`interrupt()` stopped the action; the device process was stopped too (best effort)."""


class ActionRefused(AdbError):
    """The host's action policy refused the action; nothing was sent to the device."""
