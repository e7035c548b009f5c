"""Apps and the device: launch, stop_app, clear_app_data, open_url, set_orientation,
list_apps, and the raw `keyevent`.

Each is one short shell command (`commands` builds it) whose failure shows in its output.
"""

from __future__ import annotations

from typing import Any

from . import commands as build
from .calls import ActionResult, Call, as_json, flag, required
from .errors import StepFailed


def launch(call: Call, args: dict[str, Any]) -> ActionResult:
    payload = build.launch(required(args, "package", str), args.get("activity"))
    return _one(call, "launch", payload)


def keyevent(call: Call, args: dict[str, Any]) -> ActionResult:
    return _one(call, "keyevent", build.keyevent(required(args, "key")))


def stop_app(call: Call, args: dict[str, Any]) -> ActionResult:
    return _one(call, "stop_app", build.stop_app(required(args, "package")))


def clear_app_data(call: Call, args: dict[str, Any]) -> ActionResult:
    package = required(args, "package")
    result = _one(call, "clear_app_data", build.clear_app_data(package))
    if "Success" not in result.output:
        said = result.output.strip() or "nothing"
        raise StepFailed(f"pm clear did not clear {package}'s data: it said {said[:200]}", output=result.output)
    return result


def open_url(call: Call, args: dict[str, Any]) -> ActionResult:
    return _one(call, "open_url", build.open_url(required(args, "url")))


def set_orientation(call: Call, args: dict[str, Any]) -> ActionResult:
    return _one(call, "set_orientation", build.set_orientation(required(args, "orientation")))


def list_apps(call: Call, args: dict[str, Any]) -> ActionResult:
    """The installed packages, each flagged third-party or not (two lists: all, and `-3`)."""
    only_third_party = flag(args, "third_party", False)
    call.set_deadline(call.limits.command_timeout)
    third_party = set(build.parse_packages(call.fixed(build.list_packages(third_party=True))))
    names = sorted(third_party) if only_third_party else build.parse_packages(call.fixed(build.list_packages(False)))
    packages = [{"package": name, "third_party": name in third_party} for name in names]
    return call.result("list_apps", output=as_json({"packages": packages}))


def _one(call: Call, action: str, payload: str) -> ActionResult:
    call.set_deadline(call.limits.command_timeout)
    return call.result(action, output=call.fixed(payload))
