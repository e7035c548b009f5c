"""What a simulated device is: its identity, its apps, its input method and how it treats
orphaned processes."""

from __future__ import annotations

import attrs

# The home screen: what is in the foreground before any launch, and after HOME.
LAUNCHER = "com.android.launcher3/.Launcher"

# package -> its activities; the first one is the launcher activity. The settings
# sub-pages carry the names real Settings uses for them (`screens` draws them).
DEFAULT_PACKAGES: dict[str, tuple[str, ...]] = {
    "com.android.settings": (".Settings", ".Settings$NetworkDashboardActivity", ".Settings$DisplaySettingsActivity"),
    "com.android.chrome": ("com.google.android.apps.chrome.Main",),
    "com.example.app": (
        ".MainActivity",
        ".DetailActivity",
        ".WelcomeActivity",
        ".ListActivity",
        ".SlowActivity",
        ".GestureActivity",
    ),
}

# Packages that ship with the system image: `pm list packages -3` leaves them out. Anything
# else a spec lists is third-party (installed by the user), as is the ADB keyboard.
SYSTEM_PACKAGES = frozenset({"android", "com.android.launcher3", "com.android.settings", "com.android.chrome"})

# The broadcast input method (the "ADB keyboard"): with it as the default input method,
# `am broadcast -a ADB_INPUT_B64 --es msg BASE64` types any Unicode text.
ADB_KEYBOARD = "com.android.adbkeyboard/.AdbIME"
STOCK_KEYBOARD = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"

_CATALOGUE = (
    # model, manufacturer, product/device name, sdk, width, height
    ("Pixel 7", "Google", "panther", 34, 1080, 2400),
    ("SM-G991B", "samsung", "o1s", 33, 1080, 2400),
    ("Pixel 4a", "Google", "sunfish", 30, 1080, 2340),
)


@attrs.frozen(kw_only=True)
class SimDeviceSpec:
    """The fixed description of one simulated device.

    `keep_silent_orphans` chooses what a closed shell stream does to its process. False
    (the default) stops it at once, like shell_v2's SIGHUP. True models a real adbd's
    legacy raw `shell:` (specs/adb.md §7): the process only dies with SIGPIPE on its next
    write, so a silent one (`sleep 600`) keeps running until it ends or is killed.
    `state` is the initial connection state: device, offline, unauthorized.
    `broadcast_ime` installs the ADB keyboard and makes it the default input method (the
    simulator's control interface can switch it later, see `smart_socket.apply_fault`).
    """

    serial: str
    model: str = "Pixel 7"
    manufacturer: str = "Google"
    product: str = "panther"
    sdk: int = 34
    width: int = 1080
    height: int = 2400
    packages: dict[str, tuple[str, ...]] = attrs.field(factory=lambda: dict(DEFAULT_PACKAGES))
    keep_silent_orphans: bool = False
    broadcast_ime: bool = False
    state: str = attrs.field(default="device")

    @state.validator
    def _check_state(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if value not in ("device", "offline", "unauthorized"):
            raise ValueError(f"unknown device state {value!r}")

    @property
    def screen_size(self) -> str:
        return f"{self.width}x{self.height}"


def default_specs(count: int) -> list[SimDeviceSpec]:
    """Return `count` specs with distinct serials, cycling through a few real models."""
    specs = []
    for index in range(count):
        model, manufacturer, product, sdk, width, height = _CATALOGUE[index % len(_CATALOGUE)]
        specs.append(
            SimDeviceSpec(
                serial=f"amc-sim-{index + 1:02d}",
                model=model,
                manufacturer=manufacturer,
                product=product,
                sdk=sdk,
                width=width,
                height=height,
            )
        )
    return specs
