"""A minimal valid APK, for the simulator's tests and `amc demo`: a zip whose
``AndroidManifest.xml`` is binary XML (AXML), as the build tools write it, holding only
``<manifest package=... android:versionCode=... android:versionName=...>``. Enough for a
manifest parser (`apk.read`, and the Host Agent's) to read the package and version; it is
unsigned and holds no code, so it is for the simulator, not for a phone.

    data = build_apk("com.example.demo", version_code=3)

The AXML layout (little-endian chunks, each ``type u16, header size u16, size u32``): the file
chunk (0x0003) holding a UTF-16 string pool (0x0001), the resource ids of the attribute
names (0x0180), then start namespace (0x0100), start element (0x0102), end element (0x0103)
and end namespace (0x0101). Typed values are ``size u16 = 8, 0 u8, type u8, data u32``.
"""

from __future__ import annotations

import io
import struct
import zipfile

ANDROID_NS = "http://schemas.android.com/apk/res/android"
_NONE = 0xFFFFFFFF
_TYPE_STRING, _TYPE_INT_DEC = 0x03, 0x10
# The framework's resource ids of the attribute names (android.R.attr), in string-pool order.
_ATTRIBUTE_IDS = {"versionCode": 0x0101021B, "versionName": 0x0101021C}


def _chunk(kind: int, header: bytes, body: bytes) -> bytes:
    header_size = 8 + len(header)
    return struct.pack("<HHI", kind, header_size, header_size + len(body)) + header + body


def _string_pool(strings: list[str]) -> bytes:
    data = b"".join(struct.pack("<H", len(s)) + s.encode("utf-16-le") + b"\0\0" for s in strings)
    data += b"\0" * (-len(data) % 4)
    offsets, at = [], 0
    for s in strings:
        offsets.append(at)
        at += 2 + 2 * len(s) + 2
    index = struct.pack(f"<{len(offsets)}I", *offsets)
    strings_start = 8 + 20 + len(index)
    header = struct.pack("<IIIII", len(strings), 0, 0, strings_start, 0)  # UTF-16, no styles
    return _chunk(0x0001, header, index + data)


def manifest_axml(package: str, version_code: int, version_name: str = "1.0") -> bytes:
    """The binary AndroidManifest.xml of an app with this package and version."""
    strings = ["versionCode", "versionName", "android", ANDROID_NS, "", "package", "manifest", package, version_name]
    at = {s: i for i, s in enumerate(strings)}
    resource_map = _chunk(0x0180, b"", struct.pack("<2I", *_ATTRIBUTE_IDS.values()))
    namespace = struct.pack("<II", at["android"], at[ANDROID_NS])
    node = struct.pack("<II", 1, _NONE)  # line number, no comment

    def attribute(ns: int, name: str, raw: int, kind: int, data: int) -> bytes:
        return struct.pack("<IIIHBBI", ns, at[name], raw, 8, 0, kind, data)

    attributes = (
        attribute(at[ANDROID_NS], "versionCode", _NONE, _TYPE_INT_DEC, version_code)
        + attribute(at[ANDROID_NS], "versionName", at[version_name], _TYPE_STRING, at[version_name])
        + attribute(_NONE, "package", at[package], _TYPE_STRING, at[package])
    )
    element = struct.pack("<IIHHHHHH", _NONE, at["manifest"], 0x14, 0x14, 3, 0, 0, 0)
    body = (
        _string_pool(strings)
        + resource_map
        + _chunk(0x0100, node, namespace)
        + _chunk(0x0102, node, element + attributes)
        + _chunk(0x0103, node, struct.pack("<II", _NONE, at["manifest"]))
        + _chunk(0x0101, node, namespace)
    )
    return _chunk(0x0003, b"", body)


def build_apk(package: str, version_code: int = 1, version_name: str = "1.0", *, padding: int = 0) -> bytes:
    """An APK (a zip) with the manifest and, if `padding`, a stored file of that many bytes.
    The same arguments give the same bytes (every entry is dated 1980-01-01), so the same
    app is the same input (the same sha256)."""

    def entry(name: str) -> zipfile.ZipInfo:
        return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as apk:
        apk.writestr(
            entry("AndroidManifest.xml"), manifest_axml(package, version_code, version_name), zipfile.ZIP_DEFLATED
        )
        apk.writestr(entry("classes.dex"), b"dex\n035\0", zipfile.ZIP_DEFLATED)
        if padding:
            apk.writestr(entry("assets/padding.bin"), bytes(padding), zipfile.ZIP_STORED)
    return out.getvalue()
