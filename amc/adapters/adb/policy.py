"""The host's action policy: which plan actions, shell commands and packages may run.

File format (JSON; every section and every key is optional):

    {
      "actions":  {"allow": ["*"], "deny": ["swipe"]},
      "shell":    {"allow": ["getprop *", "echo *", "dumpsys *"], "deny": ["*reboot*"]},
      "packages": {"allow": ["com.example.*"], "deny": ["com.android.vending"]}
    }

- Patterns are shell-style globs (`fnmatch`, case-sensitive; `*` also matches spaces
  and `/`). `actions` patterns match action names, every action of the table (`tap`,
  `type`, `wait_for`, `open_url`, `screenshot`...: they run fixed device commands, so only
  `actions` governs them; e.g. `{"deny": ["clear_app_data", "open_url"]}`), `packages` the
  package of `launch`, `stop_app` and `clear_app_data`, `shell` the `command` of a `shell`
  action.
- Deny wins: a subject matching any `deny` pattern is refused.
- `allow` absent: everything not denied is allowed. `allow` present (even empty): the
  subject must match one of its patterns.
- A shell command is checked piece by piece, since `echo hi; reboot` must not pass as
  `echo *`: it is split (quote-aware) into simple commands at `;`, `&`, `&&`, `|`, `||`,
  parentheses and newlines. `deny` is matched against the whole command and against every
  simple command; `allow` must match every simple command. Each simple command is matched
  in a normalised form: its words, unquoted, joined by single spaces.
- Under a shell `allow` list, commands with command substitution (`` ` `` or `$(`) are
  refused: their inner commands cannot be checked. So are commands that cannot be parsed.

A refused action raises `ActionRefused(reason)`, which is not a failure: nothing was sent.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .errors import ActionRefused

_SECTIONS = ("actions", "shell", "packages")
# The actions that name an app, which the `packages` rules govern.
PACKAGE_ACTIONS = ("launch", "stop_app", "clear_app_data")
_SEPARATOR_CHARS = set("();|&")


class PolicyError(ValueError):
    """The policy file is not valid."""


@attrs.frozen
class Rules:
    """Allow/deny globs for one kind of subject; `allow=None` means allow unless denied."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def denied_by(self, subject: str) -> str | None:
        return next((p for p in self.deny if fnmatch.fnmatchcase(subject, p)), None)

    def allowed(self, subject: str) -> bool:
        return self.allow is None or any(fnmatch.fnmatchcase(subject, p) for p in self.allow)


def split_simple_commands(command: str) -> list[str]:
    """The simple commands of a command line, each normalised to unquoted words."""
    lexer = shlex.shlex(command.replace("\n", ";"), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= _SEPARATOR_CHARS:
            segments.append([])
        else:
            segments[-1].append(token)
    return [" ".join(words) for words in segments if words]


@attrs.frozen
class ActionPolicy:
    """What the host lets plans do; `ActionPolicy()` allows everything."""

    actions: Rules = Rules()
    shell: Rules = Rules()
    packages: Rules = Rules()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionPolicy:
        if not isinstance(data, Mapping):
            raise PolicyError("a policy is a JSON object")
        unknown = set(data) - set(_SECTIONS)
        if unknown:
            raise PolicyError(f"unknown policy sections: {sorted(unknown)}")
        return cls(**{name: _rules(name, data[name]) for name in _SECTIONS if name in data})

    @classmethod
    def load(cls, path: str | Path) -> ActionPolicy:
        """Read a policy file (format in the module docstring)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise PolicyError(f"cannot read policy {path}: {error}") from error
        return cls.from_dict(data)

    def refusal(self, action: str, args: Mapping[str, Any]) -> str | None:
        """Why `action` with `args` is refused, or None if it may run."""
        pattern = self.actions.denied_by(action)
        if pattern is not None:
            return f"action {action!r} is denied by pattern {pattern!r}"
        if not self.actions.allowed(action):
            return f"action {action!r} matches no allowed pattern"
        if action == "shell":
            return self._shell_refusal(str(args.get("command", "")))
        if action in PACKAGE_ACTIONS:
            package = str(args.get("package", ""))
            pattern = self.packages.denied_by(package)
            if pattern is not None:
                return f"package {package!r} is denied by pattern {pattern!r}"
            if not self.packages.allowed(package):
                return f"package {package!r} matches no allowed pattern"
        return None

    def check(self, action: str, args: Mapping[str, Any]) -> None:
        """Raise ActionRefused if the policy does not let `action` run."""
        reason = self.refusal(action, args)
        if reason is not None:
            raise ActionRefused(reason)

    def _shell_refusal(self, command: str) -> str | None:
        rules = self.shell
        try:
            pieces = split_simple_commands(command)
        except ValueError as error:
            if rules.allow is None and not rules.deny:
                return None
            return f"shell command cannot be checked ({error})"
        for subject in [command, *pieces]:
            pattern = rules.denied_by(subject)
            if pattern is not None:
                return f"shell command {subject!r} is denied by pattern {pattern!r}"
        if rules.allow is None:
            return None
        if "`" in command or "$(" in command:
            return "shell command uses command substitution, which an allow list cannot check"
        if not pieces:
            return "empty shell command"
        for piece in pieces:
            if not rules.allowed(piece):
                return f"shell command {piece!r} matches no allowed pattern"
        return None


def _rules(section: str, data: Any) -> Rules:
    if not isinstance(data, Mapping) or set(data) - {"allow", "deny"}:
        raise PolicyError(f"{section}: expected an object with 'allow' and/or 'deny'")
    lists = {}
    for key in ("allow", "deny"):
        if key in data:
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise PolicyError(f"{section}.{key}: expected a list of glob strings")
            lists[key] = tuple(value)
    return Rules(**lists)
