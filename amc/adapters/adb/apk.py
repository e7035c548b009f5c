"""What an APK says it is: its package name and version code, read from its binary
``AndroidManifest.xml`` with a manifest parser (pyaxmlparser), never guessed from a name.

    info = read_apk(Path("app.apk"))   # ApkInfo(package="com.example.app", version_code=3)

`ApkError` names what did not parse; `install` fails with it before touching the device.
The parser reports its errors through logging rather than exceptions, so they are caught
from its loggers while it runs (under a lock: the loggers are shared by every thread).
"""

from __future__ import annotations

import logging
import threading
import zipfile
from pathlib import Path
from typing import Any

import attrs
from pyaxmlparser.axmlprinter import AXMLPrinter

from .commands import PACKAGE_NAME

ANDROID = "{http://schemas.android.com/apk/res/android}"
MANIFEST = "AndroidManifest.xml"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a real one is kilobytes; bounds what a bad zip can make us read

_lock = threading.Lock()


class ApkError(Exception):
    """The file is not an APK whose manifest names a package and a version code."""


@attrs.frozen
class ApkInfo:
    package: str
    version_code: int


def read_apk(path: Path) -> ApkInfo:
    try:
        with zipfile.ZipFile(path) as apk:
            entry = apk.getinfo(MANIFEST)
            if entry.file_size > MAX_MANIFEST_BYTES:
                raise ApkError(f"its {MANIFEST} is {entry.file_size} bytes, more than {MAX_MANIFEST_BYTES}")
            data = apk.read(entry)
    except zipfile.BadZipFile as error:
        raise ApkError(f"not a zip archive ({error})") from None
    except KeyError:
        raise ApkError(f"the archive has no {MANIFEST}") from None
    root, said = _parse(data)
    if root is None:
        raise ApkError(f"{MANIFEST} is not binary XML: {said or 'the parser read nothing'}")
    package = root.get("package")
    code = root.get(ANDROID + "versionCode")
    if root.tag != "manifest" or not isinstance(package, str) or not PACKAGE_NAME.fullmatch(package):
        raise ApkError(f"{MANIFEST} names no package (root <{root.tag}>, package {package!r})")
    if not isinstance(code, str) or not code.isdigit():
        raise ApkError(f"{MANIFEST} has no android:versionCode (found {code!r})")
    return ApkInfo(package=package, version_code=int(code))


def _parse(data: bytes) -> tuple[Any, str]:
    """The manifest's root element (an lxml element, or None) and what the parser complained of."""
    complaints: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                complaints.append(record.getMessage())

    parser_log = logging.getLogger("pyaxmlparser")
    handler = Collect()
    with _lock:
        parser_log.addHandler(handler)
        propagate, parser_log.propagate = parser_log.propagate, False  # said in the reason, not logged
        try:
            printer = AXMLPrinter(data)
            root = printer.get_xml_obj() if printer.is_valid() else None
        except Exception as error:  # the parser's own bugs on hostile input count as "does not parse"
            complaints.append(f"{type(error).__name__}: {error}")
            root = None
        finally:
            parser_log.propagate = propagate
            parser_log.removeHandler(handler)
    return root, "; ".join(complaints)
