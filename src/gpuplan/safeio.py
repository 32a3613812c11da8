"""Reading what users hand gpuplan, and writing what it hands back, without being hurt by it.

Every file gpuplan reads goes through `read_capped` (a regular file only, never a FIFO or a
device, and at most a set number of bytes); YAML through `load_yaml` (the safe loader, with bounded
nesting and bounded alias expansion, so a 400-byte "billion laughs" file is refused, not expanded);
JSON through `load_json` (bounded nesting, no NaN/Infinity tokens); CSV through `read_csv` (csv's
128 KB field cap, no row wider than its header); and every parsed tree through
`check_numbers` (no NaN, no infinity, no integer beyond 64 bits). Any value echoed back in an
error goes through `clip` (at most ~200 characters, control characters escaped, so a name cannot
move the terminal's cursor or forge a second line). Output JSON is written with `dumps_json`
(strict: the JSON standard has no NaN or Infinity). Scripts gpuplan writes quote their values with
the functions of `gpuplan.interfaces.quoting`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

from gpuplan.errors import InvalidSettingError

# Caps on what gpuplan reads. A workload or lab file is a few KB, a config.json a few KB (ViT's
# 21,843-label map ~1 MB), the bundled catalog files ~100 KB each, the bundled measurement CSVs
# under 0.5 MB; each cap leaves an order of magnitude of room above the largest real file.
MAX_YAML_BYTES: Final = 4 * 1024 * 1024
MAX_JSON_BYTES: Final = 16 * 1024 * 1024
MAX_TABLE_BYTES: Final = 8 * 1024 * 1024  # price CSVs, catalog TOML, measurement CSVs
MAX_DEPTH: Final = 64  # nesting of YAML/JSON containers; real files nest 3-5 deep
MAX_YAML_NODES: Final = 200_000  # nodes after expanding aliases (a lab file of 1,000 jobs is ~30,000)
MAX_ECHO: Final = 200  # characters of a user's value echoed back in a message
MAX_MESSAGE: Final = 2_000  # characters of a whole error line
# Integers are bounded by what a signed 64-bit field holds: no setting, count or size gpuplan reads
# comes near (the largest, a token count, is ~1e15), and a 300-digit integer must not reach float().
MAX_INT: Final = 2**63 - 1

_C0: Final = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F)} | {
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
}
# C1 controls (0x80-0x9f) include CSI (0x9b), which some terminals read as ESC [; Unicode line and
# paragraph separators and bidi overrides can disguise a line
_CONTROL: Final = (
    _C0
    | {c: f"\\x{c:02x}" for c in range(0x80, 0xA0)}
    | {
        c: f"\\u{c:04x}"
        for c in (0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069)
    }
)


def escape_controls(text: str) -> str:
    """`text` with every control character (C0, DEL, C1, line separators, bidi overrides) written
    as a visible escape: safe to print on a terminal or in one line of a file."""
    return text.translate(_CONTROL)


def has_controls(text: str) -> bool:
    """Whether `text` holds a character `escape_controls` would escape."""
    return any(ord(ch) in _CONTROL for ch in text)


def clip(value: object, limit: int = MAX_ECHO) -> str:
    """A user's value for a message: its text (repr for non-strings), control characters escaped,
    at most `limit` characters (the rest counted, not shown)."""
    text = value if isinstance(value, str) else _bounded_repr(value, limit)
    text = escape_controls(text)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text):,} characters)"


def clip_repr(value: object, limit: int = MAX_ECHO) -> str:
    """repr(value), bounded as `clip` bounds it: for quoting a name in a message."""
    if isinstance(value, str):
        shown = value if len(value) <= limit else value[:limit]
        text = escape_controls(repr(shown))
        return text if len(value) <= limit else f"{text[:-1]}…' ({len(value):,} characters)"
    return clip(value, limit)


def _bounded_repr(value: object, limit: int) -> str:
    """repr of a value, never building more than ~limit characters (an alias-bomb list, a
    300-digit integer): containers are summarised by size beyond that."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 200:
            return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
        return repr(value)
    if isinstance(value, list | tuple | dict | set):
        try:
            size = len(value)
        except TypeError:  # pragma: no cover - every container here has a length
            size = -1
        parts: list[str] = []
        used = 0
        items = value.items() if isinstance(value, dict) else value
        for item in items:
            part = (
                _bounded_repr(item, limit)
                if not isinstance(item, tuple)
                else ": ".join(_bounded_repr(x, limit) for x in item)
            )
            parts.append(part)
            used += len(part) + 2
            if used > limit:
                break
        shown = ", ".join(parts)
        if len(parts) < size or used > limit:
            shown = shown[:limit] + f", … ({size:,} items)"
        brackets = {list: "[]", tuple: "()", dict: "{}", set: "{}"}.get(type(value), "[]")
        return brackets[0] + shown + brackets[1]
    text = repr(value)
    return text if len(text) <= 4 * limit else text[: 4 * limit]


def one_line(message: str, limit: int = MAX_MESSAGE) -> str:
    """An error message as one bounded, printable line."""
    return clip(message.strip(), limit)


# --- files ------------------------------------------------------------------------------------------


def read_capped(path: str | Path, what: str, max_bytes: int, hint: str = "") -> str:
    """The UTF-8 text of a regular file of at most `max_bytes`, or one InvalidSettingError line
    naming it: missing, a folder, a FIFO or device (never opened for a blocking read), too large,
    unreadable or not UTF-8."""
    p = Path(path)
    shown = clip_repr(str(p))
    try:
        # O_NONBLOCK: opening a FIFO with no writer would block forever; it is refused below anyway
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InvalidSettingError(f"No {what} at {shown}." + (f" {hint}" if hint else "")) from None
    except IsADirectoryError:
        raise InvalidSettingError(f"The {what} {shown} is a folder, not a file.") from None
    except OSError as exc:
        raise InvalidSettingError(f"Cannot read the {what} {shown}: {exc.strerror or exc}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidSettingError(f"The {what} {shown} is a folder, not a file.")
        if not stat.S_ISREG(info.st_mode):
            raise InvalidSettingError(
                f"The {what} {shown} is not a regular file (a pipe, socket or device); gpuplan reads only files."
            )
        if info.st_size > max_bytes:
            raise InvalidSettingError(
                f"The {what} {shown} is {info.st_size:,} bytes, over the limit of {max_bytes:,} for a {what}."
            )
        chunks: list[bytes] = []
        total = 0
        while True:  # the size can change under us: read at most max_bytes + 1, whatever stat said
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise InvalidSettingError(f"The {what} {shown} is over the limit of {max_bytes:,} bytes for a {what}.")
    except OSError as exc:
        raise InvalidSettingError(f"Cannot read the {what} {shown}: {exc.strerror or exc}.") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    nul = data.find(b"\0")
    if nul >= 0:  # no text format gpuplan reads holds a NUL; UTF-16 text (Windows editors) is full of them
        raise InvalidSettingError(
            f"The {what} {shown} holds a NUL byte (byte {nul:,}): not UTF-8 text (UTF-16? binary?); save it as UTF-8."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSettingError(
            f"The {what} {shown} is not UTF-8 text (byte {exc.start:,}): is it the right file?"
        ) from None
    # a leading byte-order mark (Excel's "CSV UTF-8", Notepad) is not part of the text: csv would
    # read it into the first column's name, json.loads refuses it
    return text.removeprefix("\ufeff")


def write_atomically(path: Path, text: str, *, durable: bool = True, mode: int | None = 0o644) -> None:
    """`text` written to a temporary file beside `path`, then renamed over it (rename replaces the
    name, never writes through a symlink: rename(2)), so a reader or a crash sees the old file or
    the new one, never half of one. `durable`: fsync the file, and the folder after the rename
    (fsync(2): syncing a file does not sync the directory entry that names it). OSError escapes."""
    import tempfile  # writers only: a command that writes no file does not load it (nor random, hashlib)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # mkstemp creates 0o600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        with contextlib.suppress(OSError):
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


# --- YAML ---------------------------------------------------------------------------------------------


class YamlSyntaxError(InvalidSettingError):
    """Text that is not YAML at all (as opposed to YAML refused for its size, nesting or numbers):
    `--set KEY=VALUE` then takes the value as a plain string."""


def value_problem(exc: BaseException) -> str:
    """What a parser's ValueError says, for a user: CPython's int() refuses a string of over
    sys.get_int_max_str_digits() digits (4,300 by default) with advice about its own settings."""
    if "integer string conversion" in str(exc):
        return f"an integer of over {sys.get_int_max_str_digits():,} digits"
    return clip(str(exc))


def load_yaml(text: str, name: str) -> Any:
    """YAML read with the bounded safe loader; any problem is one line naming the file (and line)."""
    if len(text) > MAX_YAML_BYTES:
        raise InvalidSettingError(f"{clip(name)} is {len(text):,} characters, over the limit of {MAX_YAML_BYTES:,}.")
    import yaml  # here: PyYAML loads only where YAML is read

    from gpuplan.yamlsafe import BoundedSafeLoader, DuplicateKeyError, LimitError

    loader: BoundedSafeLoader | None = None
    try:
        loader = BoundedSafeLoader(text)  # the reader refuses control characters here already
        data = loader.get_single_data()
    except LimitError as exc:
        raise InvalidSettingError(f"{clip(name)} is refused: {exc}.") from None
    except DuplicateKeyError as exc:
        where = f"line {exc.line}" + (f" (first on line {exc.first})" if exc.first != exc.line else "")
        raise InvalidSettingError(
            f"{clip(name)}, {where}: the key {clip_repr(exc.key)} is given twice; keep one of them."
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlSyntaxError(f"{clip(name)} is not valid YAML{where}: {clip(problem)}.") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # int('9' * 5000), a date out of range
        raise InvalidSettingError(f"{clip(name)} holds a value gpuplan cannot read: {value_problem(exc)}.") from None
    finally:
        if loader is not None:
            loader.dispose()
    check_numbers(data, name)
    return data


# --- JSON ---------------------------------------------------------------------------------------------


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def load_json(text: str, name: str) -> Any:
    """JSON read strictly: bounded nesting, no NaN/Infinity tokens, no overlong integers; any
    problem is one line naming the file."""
    if len(text) > MAX_JSON_BYTES:
        raise InvalidSettingError(f"{clip(name)} is {len(text):,} characters, over the limit of {MAX_JSON_BYTES:,}.")
    depth = _bracket_depth(text)
    if depth > MAX_DEPTH:
        raise InvalidSettingError(f"{clip(name)} is refused: it nests more than {MAX_DEPTH} levels deep.")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidSettingError(f"{clip(name)} is not valid JSON (line {exc.lineno}): {clip(exc.msg)}.") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidSettingError(f"{clip(name)} is not valid JSON: {clip(str(exc))}.") from None
    check_numbers(data, name)
    return data


def _bracket_depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings, found without parsing (json.loads recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def dumps_json(obj: Any, indent: int | None = 2) -> str:
    """JSON text of gpuplan's own output: strict (a NaN or infinity is a bug and raises)."""
    return json.dumps(obj, indent=indent, allow_nan=False)


# --- CSV ----------------------------------------------------------------------------------------------


def read_csv(text: str, name: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line number, row)]) of a CSV file's text read with csv.DictReader; a malformed
    file is one line naming the line: a field over csv's limit (csv.field_size_limit, 128 KB by
    default, kept), or a row with more fields than the header (an unquoted comma). A short row's
    missing fields read as ""."""
    reader = csv.DictReader(io.StringIO(text), restval="")  # a short row's missing fields read as ""
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = list(reader.fieldnames or [])
        for row in reader:
            if None in row:  # DictReader puts the fields beyond the header under the key None
                extra = row[None]
                raise InvalidSettingError(
                    f"{clip(name)} line {reader.line_num}: {len(header) + len(extra or [])} fields, the header has "
                    f"{len(header)}; quote a value that holds a comma."
                )
            rows.append((reader.line_num, cast("dict[str, str]", row)))
    except csv.Error as exc:
        # reader.reader: DictReader's own line_num is set only after a row is read whole
        where = reader.reader.line_num
        raise InvalidSettingError(f"{clip(name)} line {where}: not valid CSV ({clip(str(exc))}).") from None
    return header, rows


# --- numbers -------------------------------------------------------------------------------------------


def _walk(data: Any, path: str, name: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, leaf) for every leaf of a parsed tree, iteratively, each node once (an
    alias-shared node is not walked twice), and no deeper than MAX_DEPTH."""
    seen: set[int] = set()
    stack: list[tuple[str, Any, int]] = [(path, data, 0)]
    while stack:
        where, node, depth = stack.pop()
        if isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if depth >= MAX_DEPTH:
                raise InvalidSettingError(
                    f"{clip(name or path)} is refused: it nests more than {MAX_DEPTH} levels deep."
                )
            if isinstance(node, dict):
                stack.extend((f"{where}.{clip(str(k), 40)}" if where else clip(str(k), 40), v, depth + 1)
                             for k, v in node.items())  # fmt: skip
            else:
                stack.extend((f"{where}[{i}]", v, depth + 1) for i, v in enumerate(node))
        else:
            yield where, node


def check_numbers(data: Any, name: str) -> None:
    """Refuse a NaN, an infinity or an integer beyond 64 bits anywhere in a parsed tree, naming
    the key ("{name}: 'frames' is ...")."""
    for where, leaf in _walk(data, "", name):
        if isinstance(leaf, float) and not math.isfinite(leaf):
            raise InvalidSettingError(f"{clip(name)}: {where or 'the value'} is {leaf!r}; it must be a finite number.")
        if isinstance(leaf, int) and not isinstance(leaf, bool) and abs(leaf) > MAX_INT:
            raise InvalidSettingError(
                f"{clip(name)}: {where or 'the value'} is {clip(leaf)}, beyond any sensible value (at most {MAX_INT:,})."
            )


# a decimal or scientific-notation number as YAML 1.1 leaves it a string ("1e4": PyYAML's float
# pattern needs a dot and a signed exponent) or --set passes it; 64 characters is past any count
NUMBER_TEXT: Final = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def whole_number(value: Any, what: str) -> Any:
    """An integer key's value with integral scientific notation read as the integer it writes
    ("1e4", 1.0e+4, "2.5e3" -> 10000, 10000, 2500); a non-integral number is one InvalidSettingError
    line naming `what`; anything else is returned as it is, for the key's own validation."""
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        raise InvalidSettingError(f"{what} must be a whole number. Got {value!r}; write e.g. {max(1, round(value))}.")
    if not isinstance(value, str) or len(value) > 64 or not NUMBER_TEXT.match(value.strip()):
        return value
    import decimal  # only for numbers written as text

    number = decimal.Decimal(value.strip())
    if number.adjusted() > 18:  # beyond 64 bits: never build the integer
        raise InvalidSettingError(f"{what} is {clip_repr(value)}, beyond any sensible value (at most {MAX_INT:,}).")
    if number != number.to_integral_value():
        raise InvalidSettingError(
            f"{what} must be a whole number. Got {clip_repr(value)} (= {number.normalize():f}); "
            f"write e.g. {max(1, round(number))}."
        )
    return int(number)


def finite(value: float, what: str, *, low: float | None = None, high: float | None = None) -> float:
    """`value` if it is a finite number within [low, high]; else one InvalidSettingError line naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSettingError(f"{what} must be a number. Got {clip_repr(value)}.")
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise InvalidSettingError(f"{what} is {clip(value)}, beyond any sensible value.")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidSettingError(f"{what} must be a finite number. Got {value!r}.")
    if low is not None and v < low:
        raise InvalidSettingError(f"{what} must be at least {low:g}. Got {v:g}.")
    if high is not None and v > high:
        raise InvalidSettingError(f"{what} must be at most {high:g}. Got {v:g}.")
    return v


# --- scripts ---------------------------------------------------------------------------------------

# The lines sbatch itself reads as options in a script (Slurm's src/sbatch/opt.c and xlate.c):
# "#SBATCH" and the deprecated "#SLURM" up to the first command line (sbatch(1): "Once the first
# non-comment, non-whitespace line has been reached in the script, no more #SBATCH directives will
# be processed"), and "#PBS" / "#BSUB" anywhere in the first 100 command lines (xlate_batch_script,
# unless --ignore-pbs), applied AFTER the #SBATCH ones: a "#PBS -A other" below the user's command
# would bill another account. sbatch matches them case-sensitively at the start of a line; gpuplan
# refuses them in any case and after any indentation.
_DIRECTIVE: Final = re.compile(r"^\s*#(SBATCH|SLURM|PBS|BSUB)", re.IGNORECASE)
_COMMAND_CONTROLS: Final = frozenset(_CONTROL) - {0x0A, 0x09}  # a command keeps its newlines and tabs


def refuse_directives(command: str, where: str) -> str:
    """`command` unchanged, unless one of its lines would read as a batch-system directive, or it
    holds a control character other than newline and tab (a carriage return or an escape sequence
    is no part of a shell command; bidi overrides and line separators can disguise a line)."""
    bad = next((ch for ch in command if ord(ch) in _COMMAND_CONTROLS), None)
    if bad is not None:
        raise InvalidSettingError(
            f"{where}: the command holds the control character {escape_controls(bad)}; write it as plain text "
            "(one shell command a line)."
        )
    for line in command.splitlines():
        if _DIRECTIVE.match(line):
            raise InvalidSettingError(
                f"{where}: the command line {clip_repr(line.strip())} reads as a batch-system directive; gpuplan "
                "writes the #SBATCH lines itself (from the lab file's members and the plan). Remove it."
            )
    return command
