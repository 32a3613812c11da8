"""Start-up helpers. PEP 562 lazy exports for a package's `__init__`: a public name is imported from
its module on first use, then kept in the package's namespace. `gpuplan`, `gpuplan.results` and
`gpuplan.interfaces.api` use it so that a command imports only the modules it uses. And a pydantic
model built without pydantic's plugin scan (the Workload model)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import BaseModel

_NO_PLUGINS: Final = "PYDANTIC_DISABLE_PLUGINS"  # pydantic/plugin/_loader.py: "__all__", "1" or "true"


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`: `exports` maps a public name to
    the module that defines it; `namespace` is the package's globals(); `public` its __all__."""
    shown = sorted(public)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(shown)

    return __getattr__, __dir__


def build_without_plugins(model: type[BaseModel]) -> None:
    """Build `model` (declared with `defer_build=True`) now, with pydantic's plugins off, as typer
    builds its parameter adapters (typer/_adapters.py, disabled_pydantic_plugins): finding plugins
    scans every installed package's entry points (importlib.metadata, ~15-25 ms of each start), and
    no plugin observes gpuplan's own input validation. `defer_build` is then dropped from the config,
    so that subclasses (the web API's bodies, web_schemas.py) build at definition as before."""
    before = os.environ.get(_NO_PLUGINS)
    os.environ[_NO_PLUGINS] = "__all__"
    try:
        model.model_rebuild(force=True)
        del model.model_config["defer_build"]
    finally:
        if before is None:
            del os.environ[_NO_PLUGINS]
        else:
            os.environ[_NO_PLUGINS] = before
