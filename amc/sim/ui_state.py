"""The screen-visible state of one device: the task stack, the apps' data and the settings.

- The task stack holds the open activities, bottom first; an empty stack is the home
  screen. Each `Activity` owns its UI state (the focused field, its list's scroll, an open
  menu, the rows that saw a double tap) and loses it when it closes. A freshly opened
  activity gives the focus to its first text field, as a phone does.
- An app's text fields are its data: they outlive its activities and `am force-stop`,
  and `pm clear` forgets them. Text typed while no field has the focus lands in
  `loose_text`, which nothing draws.
- The settings table (`settings get|put`): `user_rotation` turns the screen when
  `accelerometer_rotation` is 0, and `default_input_method` chooses the keyboard.
- `view()` is the frozen `ScreenState` that `screens` draws and dumps.
The device (`SimDevice`) holds its lock around every use, and writes the system's log
lines for launches and stops.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .pages import RECENTS, ScreenState, page
from .spec import ADB_KEYBOARD, LAUNCHER, STOCK_KEYBOARD, SimDeviceSpec


@attrs.define
class Activity:
    """One activity on the task stack and the UI state it owns (lost when it closes)."""

    component: str
    opened_at: float  # on the device's clock
    focused: str | None = None  # the resource id of the focused field
    scroll: int = 0  # rows its list is scrolled by
    menu: str | None = None  # the row whose long-press menu is open
    double_tapped: set[str] = attrs.Factory(set)


class UiState:
    def __init__(self, spec: SimDeviceSpec, clock: Callable[[], float]):
        self.spec = spec
        self.clock = clock
        self.home_screen = Activity(component=LAUNCHER, opened_at=clock())
        self.task: list[Activity] = []
        self.fields: dict[str, dict[str, str]] = {}  # package -> field resource id -> text
        self.loose_text = ""
        self.last_tap: tuple[int, int, float, str] | None = None  # x, y, when, on which component
        self.settings: dict[str, dict[str, str]] = {
            "system": {"accelerometer_rotation": "1", "user_rotation": "0"},
            "secure": {"default_input_method": ADB_KEYBOARD if spec.broadcast_ime else STOCK_KEYBOARD},
            "global": {},
        }

    # --- reading --------------------------------------------------------------------

    @property
    def foreground(self) -> str:
        return self.top().component

    def top(self) -> Activity:
        """The foreground activity (the home screen's when the stack is empty)."""
        return self.task[-1] if self.task else self.home_screen

    def app_fields(self, component: str) -> dict[str, str]:
        """The text fields' contents of `component`'s app, by resource id."""
        return self.fields.setdefault(component.split("/")[0], {})

    @property
    def typed_text(self) -> str:
        """The focused field's text; with no field focused, the loose text."""
        field = self.top().focused
        return self.app_fields(self.foreground).get(field, "") if field else self.loose_text

    @property
    def rotation(self) -> int:
        """user_rotation when auto-rotate is off (the simulator has no accelerometer), else 0."""
        system = self.settings["system"]
        if system.get("accelerometer_rotation", "1") != "0":
            return 0
        value = system.get("user_rotation", "0")
        return int(value) % 4 if value.isdigit() else 0

    @property
    def input_method(self) -> str:
        return self.settings["secure"].get("default_input_method", "")

    def view(self) -> ScreenState:
        top = self.top()
        return ScreenState(
            component=top.component,
            rotation=self.rotation,
            elapsed=self.clock() - top.opened_at,
            fields=dict(self.app_fields(top.component)),
            focused=top.focused,
            scroll=top.scroll,
            menu=top.menu,
            double_tapped=frozenset(top.double_tapped),
            recents=self._recents(),
        )

    def _recents(self) -> tuple[str, ...]:
        """Each app on the task stack once, by its topmost activity, newest first."""
        latest: dict[str, str] = {}
        for activity in reversed(self.task):
            if activity.component != RECENTS:
                latest.setdefault(activity.component.split("/")[0], activity.component)
        return tuple(latest.values())

    # --- changing -------------------------------------------------------------------

    def push(self, component: str) -> None:
        """Bring `component` to the front (a new activity unless it is there already)."""
        if self.foreground == RECENTS:
            # Leaving Recents does not keep it on the stack, and a recent activity comes
            # back as it was left.
            self.task.pop()
            recent = next((a for a in reversed(self.task) if a.component == component), None)
            if recent is not None:
                self.task.remove(recent)
                self.task.append(recent)
        if self.foreground != component:
            self.task.append(self._activity(component))

    def show_recents(self) -> None:
        if self.foreground != RECENTS:
            self.task.append(self._activity(RECENTS))

    def _activity(self, component: str) -> Activity:
        first = next(
            (i.resource_id for i in page(self.spec, ScreenState(component=component)).items if i.kind == "field"), None
        )
        return Activity(component=component, opened_at=self.clock(), focused=first)

    def back(self) -> None:
        """Close an open menu, else return to the previous activity or home."""
        if self.top().menu is not None:
            self.top().menu = None
        elif self.task:
            self.task.pop()

    def close_package(self, package: str) -> None:
        """Every activity of `package` leaves the stack (its data stays)."""
        self.task = [activity for activity in self.task if activity.component.split("/")[0] != package]

    def set_text(self, text: str) -> None:
        """Replace the focused field's text (the loose text when none has the focus)."""
        field = self.top().focused
        if field is None:
            self.loose_text = text
        else:
            self.app_fields(self.foreground)[field] = text
