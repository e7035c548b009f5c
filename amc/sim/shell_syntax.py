"""Parsing the subset of POSIX sh that the simulated device understands.

Enough of `sh -c` for what agents and ppadb send: quoting ('…', "…", backslash),
parameter expansion of `$?`, `$$`, `$NAME`, `${NAME}` (unquoted and in double quotes,
never in single quotes), `;`, `&&`, `||`, `|`, newlines, comments and the redirections
`>`, `>>`, `N>`, `N>&M`. Words are not split or globbed after expansion.

What is not simulated is refused with a syntax error rather than misread: command
substitution, subshells, background jobs and input redirection. A wrong answer from a
simulator would be worse than an honest "not supported".
"""

from __future__ import annotations

import attrs


class ShellSyntaxError(Exception):
    """The command line cannot be parsed (or uses a feature that is not simulated)."""


@attrs.frozen
class Word:
    """One shell word: literal text and parameter references, in order."""

    parts: tuple[tuple[str, str], ...]  # ("lit", text) or ("var", name)


@attrs.frozen
class Redirect:
    """`fd > target` (append with `>>`) or `fd >& target_fd`."""

    fd: int
    op: str  # ">", ">>" or ">&"
    target: Word


@attrs.frozen
class Command:
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...] = ()


@attrs.frozen
class Pipeline:
    commands: tuple[Command, ...]


@attrs.frozen
class AndOr:
    """A pipeline followed by `&&`/`||` links: ((op, pipeline), ...)."""

    first: Pipeline
    rest: tuple[tuple[str, Pipeline], ...] = ()


@attrs.frozen
class Script:
    items: tuple[AndOr, ...]


_OPERATORS = ("&&", "||", ">>", ">&", ";", "|", "&", "(", ")", "<", ">", "\n")
_NAME_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_NAME_CHARS = _NAME_START + "0123456789"


def _tokenize(source: str) -> list[Word | str]:
    """Split into Words and operator strings."""
    tokens: list[Word | str] = []
    parts: list[tuple[str, str]] = []
    literal: list[str] = []
    in_word = False  # true once anything (even '') belongs to the current word
    i = 0

    def flush_literal() -> None:
        if literal:
            parts.append(("lit", "".join(literal)))
            literal.clear()

    def end_word() -> None:
        nonlocal in_word
        flush_literal()
        if in_word:
            tokens.append(Word(tuple(parts)))
        parts.clear()
        in_word = False

    def read_dollar(j: int) -> int:
        """Handle `$` at source[j]; return the index after what it consumed."""
        nxt = source[j + 1] if j + 1 < len(source) else ""
        if nxt in ("?", "$", "#") or nxt.isdigit():
            flush_literal()
            parts.append(("var", nxt))
            return j + 2
        if nxt == "{":
            close = source.find("}", j + 2)
            if close < 0:
                raise ShellSyntaxError("bad substitution")
            flush_literal()
            parts.append(("var", source[j + 2 : close]))
            return close + 1
        if nxt == "(":
            raise ShellSyntaxError("command substitution is not simulated")
        if nxt and nxt in _NAME_START:
            k = j + 1
            while k < len(source) and source[k] in _NAME_CHARS:
                k += 1
            flush_literal()
            parts.append(("var", source[j + 1 : k]))
            return k
        literal.append("$")
        return j + 1

    while i < len(source):
        c = source[i]
        if c in " \t":
            end_word()
            i += 1
        elif c == "#" and not in_word:
            newline = source.find("\n", i)
            i = len(source) if newline < 0 else newline
        elif c == "'":
            close = source.find("'", i + 1)
            if close < 0:
                raise ShellSyntaxError("unterminated quoted string")
            literal.append(source[i + 1 : close])
            in_word = True
            i = close + 1
        elif c == '"':
            in_word = True
            i += 1
            while True:
                if i >= len(source):
                    raise ShellSyntaxError("unterminated quoted string")
                d = source[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < len(source) and source[i + 1] in '$`"\\\n':
                    if source[i + 1] != "\n":
                        literal.append(source[i + 1])
                    i += 2
                elif d == "$":
                    i = read_dollar(i)
                elif d == "`":
                    raise ShellSyntaxError("command substitution is not simulated")
                else:
                    literal.append(d)
                    i += 1
        elif c == "\\":
            if i + 1 < len(source):
                if source[i + 1] != "\n":  # backslash-newline joins lines
                    literal.append(source[i + 1])
                    in_word = True
                i += 2
            else:
                i += 1
        elif c == "$":
            in_word = True
            i = read_dollar(i)
        elif c == "`":
            raise ShellSyntaxError("command substitution is not simulated")
        else:
            operator = next((op for op in _OPERATORS if source.startswith(op, i)), None)
            if operator is None:
                literal.append(c)
                in_word = True
                i += 1
                continue
            # "2>" makes the digits an IO number rather than a word.
            if operator in (">", ">>", ">&") and in_word and not parts and literal and "".join(literal).isdigit():
                tokens.append("".join(literal) + operator)
                literal.clear()
                in_word = False
            else:
                end_word()
                tokens.append(operator)
            i += len(operator)
    end_word()
    return tokens


def parse(source: str) -> Script:
    """Parse a command line; raise ShellSyntaxError on anything not simulated."""
    tokens = _tokenize(source)
    position = 0

    def peek() -> Word | str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> Word | str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def command() -> Command:
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            token = peek()
            if isinstance(token, Word):
                take()
                words.append(token)
            elif isinstance(token, str) and token.lstrip("0123456789") in (">", ">>", ">&"):
                take()
                op = token.lstrip("0123456789")
                fd = int(token[: len(token) - len(op)] or "1")
                target = peek()
                if not isinstance(target, Word):
                    raise ShellSyntaxError(f"unexpected {describe(target)}")
                take()
                redirects.append(Redirect(fd, op, target))
            elif token == "<":
                raise ShellSyntaxError("input redirection is not simulated")
            elif token in ("(", ")"):
                raise ShellSyntaxError(f"unexpected '{token}'")
            else:
                break
        if not words and not redirects:
            raise ShellSyntaxError(f"unexpected {describe(peek())}")
        return Command(tuple(words), tuple(redirects))

    def pipeline() -> Pipeline:
        commands = [command()]
        while peek() == "|":
            take()
            skip_newlines()
            commands.append(command())
        return Pipeline(tuple(commands))

    def and_or() -> AndOr:
        first = pipeline()
        rest: list[tuple[str, Pipeline]] = []
        while isinstance(op := peek(), str) and op in ("&&", "||"):
            take()
            skip_newlines()
            rest.append((op, pipeline()))
        return AndOr(first, tuple(rest))

    def skip_newlines() -> None:
        while peek() == "\n":
            take()

    def describe(token: Word | str | None) -> str:
        if token is None:
            return "end of file"
        return "newline" if token == "\n" else f"'{token}'"

    items: list[AndOr] = []
    skip_newlines()
    while peek() is not None:
        items.append(and_or())
        separator = peek()
        if separator == "&":
            raise ShellSyntaxError("background jobs (&) are not simulated")
        if separator in (";", "\n"):
            take()
            skip_newlines()
        elif separator is not None:
            raise ShellSyntaxError(f"unexpected {describe(separator)}")
    return Script(tuple(items))
