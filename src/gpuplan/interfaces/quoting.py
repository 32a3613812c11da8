"""Quoting for the files gpuplan writes and people run: one function per place a value lands.

- `shell_word`: a value as ONE shell word (shlex.quote: POSIX single quotes; the standard
  library's, not a hand-written pattern), whatever spaces, `$`, backticks, quotes or newlines it holds;
- `ShellExpr`: a word gpuplan writes itself that the shell must expand (`$SLURM_JOB_ID`), the only
  kind left unquoted;
- `ShellWords`: a flag and its value that gpuplan keeps on one line of a script, each word quoted;
- `shell_join` / `shell_line`: a command line of such words, with or without line continuations;
- `comment`: text for a `# ...` line, control characters escaped so one value is one line;
- `sbatch_value`: a value after `#SBATCH --opt=`, refused when empty or holding whitespace, control
  characters, quotes, a backslash or `#` (sbatch splits a directive line into words itself, with
  its own quoting and comments: a space would start another option);
- `refuse_directives`: a user's command line that would read as a scheduler directive.
YAML goes through yaml's safe dumper and JSON through json.dumps, which quote for their formats.
"""

from __future__ import annotations

import shlex
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.safeio import clip_repr, escape_controls, has_controls, refuse_directives

__all__ = [
    "ShellExpr",
    "ShellWords",
    "comment",
    "refuse_directives",
    "sbatch_value",
    "shell_join",
    "shell_line",
    "shell_word",
]


class ShellExpr(str):
    """A word gpuplan itself writes for the shell to expand (e.g. `--rdzv-id=$SLURM_JOB_ID`)."""

    __slots__ = ()


class ShellWords(str):
    """Several words gpuplan writes as one item of a command (`--num-layers 80`, a flag and its
    value kept on one line of the script): each word quoted on its own."""

    __slots__ = ()


def shell_word(word: str) -> str:
    """`word` as exactly one shell word: as it is when it holds only safe characters, else quoted
    (a ShellExpr as gpuplan wrote it; a ShellWords item word by word)."""
    if has_controls(word):  # quoted, a newline would still start a line of its own in the file
        raise InvalidSettingError(
            f"The value {clip_repr(word)} holds a newline or another control character; gpuplan does not write it "
            "into a command. Rename the file or folder, or pass another value."
        )
    if isinstance(word, ShellExpr):
        return str(word)
    if isinstance(word, ShellWords):
        return " ".join(shlex.quote(w) for w in word.split())
    return shlex.quote(word)


def shell_line(words: list[str]) -> str:
    """A one-line command: each word through shell_word."""
    return " ".join(shell_word(w) for w in words)


def shell_join(words: list[str]) -> str:
    """A command with one word per line, joined by line continuations."""
    return " \\\n  ".join(shell_word(w) for w in words)


def comment(text: str) -> str:
    """Text for one `#` comment line: control characters (newlines first) written as escapes."""
    return escape_controls(text)


# Characters sbatch's directive reader treats as syntax, not text (get_argument in Slurm's
# src/sbatch/opt.c): quotes group words, a backslash escapes the next character, an unquoted `#`
# starts a comment. No partition, GRES type, time, account or job name needs them.
_SBATCH_SYNTAX: Final = frozenset("\"'\\#")


def sbatch_value(value: str, option: str) -> str:
    """A value for `#SBATCH --option=VALUE`, or one InvalidSettingError line: one word as sbatch reads
    it (no whitespace, control character, quote, backslash or `#`), so it can neither end the line nor
    start another option."""
    if not value or has_controls(value) or any(ch.isspace() or ch in _SBATCH_SYNTAX for ch in value):
        raise InvalidSettingError(
            f"The {option} value {clip_repr(value)} cannot go into an #SBATCH line: it must be one word with no "
            "spaces, quotes, backslashes, '#' or control characters."
        )
    return value
