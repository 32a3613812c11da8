"""The `gpuplan` command line: a thin adapter over the library (`gpuplan.interfaces.api`), one
module per command group; each command renders the library's typed results.

Every command takes `--json` and then prints one JSON document (the result's `to_dict()`). Bad
input (an unknown GPU or model, a malformed file, an impossible setting) prints one line on stderr
and exits with 2.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from importlib import import_module
from typing import TYPE_CHECKING, Any, Final

from gpuplan._lazy import pydantic_plugins_off
from gpuplan.errors import GpuplanError
from gpuplan.safeio import one_line

if TYPE_CHECKING:
    from gpuplan.interfaces.cli.common import app

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    """`app` (the Typer app) loads on first use: `estimate --json` and its like never build it
    (cli/fast.py)."""
    if name == "app":
        from gpuplan.interfaces.cli.common import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# each module registers its commands on `app` as it is imported, in the order `--help` lists them
MODULES: Final = ("catalog", "plan", "estimate", "lab", "rent", "tools")
# the module that defines each command: a command run by name loads its own module only, so that
# typer builds one command's parser, not twenty (~90 ms on a 2-core machine), and no other
# command's imports load (tests/test_startup.py)
COMMAND_MODULE: Final = {
    **dict.fromkeys(("gpus", "compare", "model", "models", "chart"), "catalog"),
    **dict.fromkeys(("fit", "estimate"), "estimate"),
    "lab": "lab",
    "plan": "plan",
    "rent-vs-buy": "rent",
    **dict.fromkeys(("validate", "version", "launch", "serve", "bench", "measure"), "tools"),
}


def load_commands(argv: list[str] | None = None) -> None:
    """Register the commands `argv` runs: its command's module when the first argument names one,
    else (no command, `--help`, a typo) every module, so that help and "No such command" list all."""
    from gpuplan.interfaces.cli.common import app

    args = sys.argv[1:] if argv is None else argv
    module = COMMAND_MODULE.get(args[0]) if args else None
    for name in (module,) if module else MODULES:
        import_module(f"gpuplan.interfaces.cli.{name}")
    if module is None:  # in the order of MODULES, whichever loaded first in this process (a stable sort)
        app.registered_commands.sort(key=lambda c: MODULES.index(getattr(c.callback, "__module__", "").rsplit(".")[-1]))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; input errors become one line on stderr and exit code 2. The JSON
    answers of estimate, fit and plan are read without Typer where they can be (cli/fast.py)."""
    from gpuplan.interfaces.cli import fast

    try:
        with pydantic_plugins_off():
            if fast.answer(sys.argv[1:] if argv is None else argv):
                return 0
    except GpuplanError as exc:
        sys.stderr.write(f"gpuplan: error: {one_line(str(exc))}\n")
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # as Typer's click does: a new line, then the abort
        sys.stderr.write("\ngpuplan: aborted\n")
        return 1
    return _typer_main(argv)


def _typer_main(argv: list[str] | None) -> int:
    """The command line as Typer reads it: every command, its help, its tables and usage errors."""
    import typer

    from gpuplan.interfaces.cli.common import app

    try:
        load_commands(argv)
        args = sys.argv[1:] if argv is None else argv
        # a command's validation runs with pydantic's plugins off (typer's adapters, the Workload
        # model: gpuplan._lazy); `serve` keeps them, its worker processes inherit the environment
        quiet = nullcontext() if args[:1] == ["serve"] else pydantic_plugins_off()
        with quiet:
            # without standalone mode click returns a command's `typer.Exit(code)` instead of raising it
            code = app(args=argv, prog_name="gpuplan", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    except GpuplanError as exc:
        sys.stderr.write(f"gpuplan: error: {one_line(str(exc))}\n")
        return 2
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except typer.Abort:
        sys.stderr.write("gpuplan: aborted\n")
        return 1
    except BrokenPipeError:
        return 0
    except Exception as exc:
        # usage errors (bad option value, unknown command) are click exceptions; typer vendors its
        # own copy of click, so they are recognised by their interface rather than their class
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = str(exc.format_message())
            if not message:  # no arguments: the help was printed
                return 0
            sys.stderr.write(f"gpuplan: error: {one_line(message)}\n")
            return 2
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
