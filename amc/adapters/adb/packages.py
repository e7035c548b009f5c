"""`install` and `uninstall` (specs/protocol.md Part F, "Actions that take inputs").

`install` reads the APK's package and version code first (`apk`): an APK that does not
parse fails before anything is sent to the device. The version the device has is asked next
(`pm list packages --show-versioncode`); the same version again completes without
installing, saying so. Otherwise the APK is pushed to a temporary file, `pm install`ed from
there and the file removed, in one command.

Outputs (JSON): `install` `{"package", "version_code", "installed"}` (and `"note"` when
nothing was installed); `uninstall` `{"package"}`.
"""

from __future__ import annotations

from typing import Any

from . import commands as build
from .apk import ApkError, read_apk
from .calls import ActionResult, Call, as_json, flag, required
from .errors import StepFailed
from .files import send_file

SUCCESS = "Success"


def install(call: Call, args: dict[str, Any]) -> ActionResult:
    local = call.input_file(args, "input")
    replace = flag(args, "replace", True)
    grant = flag(args, "grant_permissions", False)
    try:
        info = read_apk(local)
    except ApkError as error:
        raise StepFailed(f"the APK does not parse: {error}; nothing was sent to the device") from None
    outcome: dict[str, Any] = {"package": info.package, "version_code": info.version_code}
    call.set_deadline(call.limits.command_timeout)
    have = build.parse_version(call.fixed(build.installed_versions(info.package)), info.package)
    if have == info.version_code:
        note = f"{info.package} version {have} was already installed; nothing was installed"
        return call.result("install", output=as_json({**outcome, "installed": False, "note": note}))
    path = build.install_path(build.new_token())
    send_file(call, local, path)  # sets its own deadline, by the APK's size
    call.set_deadline(call.limits.command_timeout + local.stat().st_size / (4 * 1024 * 1024))
    said = call.fixed(build.install(path, replace=replace, grant_permissions=grant))
    if SUCCESS not in said:
        raise StepFailed(f"pm install did not install {info.package}: it said {_said(said)}", output=said)
    return call.result("install", output=as_json({**outcome, "installed": True}))


def uninstall(call: Call, args: dict[str, Any]) -> ActionResult:
    package = required(args, "package", str)
    call.set_deadline(call.limits.command_timeout)
    said = call.fixed(build.uninstall(package))
    if SUCCESS not in said:
        raise StepFailed(f"pm uninstall did not remove {package}: it said {_said(said)}", output=said)
    return call.result("uninstall", output=as_json({"package": package}))


def _said(output: str) -> str:
    return (output.strip() or "nothing")[:300]
