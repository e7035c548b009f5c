"""What the simulated package manager reads of an APK: the package name and version code in
its binary AndroidManifest.xml, with the same manifest parser as the Host Agent (pyaxmlparser).

`read(data)` answers (package, version code), or raises `BadApk` with the reason `pm install`
prints (as `Failure [INSTALL_PARSE_FAILED_...]` on a phone).
"""

from __future__ import annotations

import io
import logging
import zipfile

from pyaxmlparser.axmlprinter import AXMLPrinter

ANDROID = "{http://schemas.android.com/apk/res/android}"


class BadApk(Exception):
    pass


def read(data: bytes) -> tuple[str, int]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as apk:
            manifest = apk.read("AndroidManifest.xml")
    except (zipfile.BadZipFile, KeyError) as error:
        raise BadApk(f"INSTALL_PARSE_FAILED_NOT_APK: {error}") from None
    quiet = logging.getLogger("pyaxmlparser")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a device prints its own reason, not the parser's log
    try:
        printer = AXMLPrinter(manifest)
        root = printer.get_xml_obj() if printer.is_valid() else None
    except Exception:
        root = None
    finally:
        quiet.setLevel(level)
    package = None if root is None else root.get("package")
    code = None if root is None else root.get(ANDROID + "versionCode")
    if not isinstance(package, str) or not isinstance(code, str) or not code.isdigit():
        raise BadApk("INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: no package or versionCode in AndroidManifest.xml")
    return package, int(code)
