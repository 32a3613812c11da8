"""Start-up helpers. PEP 562 lazy exports for a package's `__init__`: a public name is imported from
its module on first use, then kept in the package's namespace. `gpuplan`, `gpuplan.results` and
`gpuplan.interfaces.api` use it so that a command imports only the modules it uses. And a pydantic
model built without pydantic's plugin scan (the workload schema, specs/workload_schema.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib import import_module
from importlib.machinery import PathFinder
from importlib.util import module_from_spec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import BaseModel

_NO_PLUGINS: Final = "PYDANTIC_DISABLE_PLUGINS"  # pydantic/plugin/_loader.py: "__all__", "1" or "true"
# the module pydantic's create_schema_validator imports get_plugins from (pydantic/plugin/_schema_validator.py)
_LOADER: Final = "pydantic.plugin._loader"


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
        # __import__ (the import statement's path), not importlib.import_module: `python -X
        # importtime` then lists the module under its own name rather than adding its time to the
        # module that asked for the name (tests/test_startup.py reads those times)
        value = getattr(__import__(module, fromlist=("_",)), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(shown)

    return __getattr__, __dir__


class _NoPluginsLoader(ModuleType):
    """Stands in for `pydantic.plugin._loader` while plugins are off: its `get_plugins()` returns
    none, as the real one does under PYDANTIC_DISABLE_PLUGINS=__all__, without importing
    importlib.metadata and the email package for a scan that will not run (an estimate --json 6-10 ms less CPU on
    this project's 2-core machine). Any other name is read from the real module, loaded apart."""

    @staticmethod
    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's own probes (__path__, __spec__ ...)
            raise AttributeError(name)
        spec = PathFinder.find_spec(_LOADER.rsplit(".", 1)[1], list(import_module("pydantic.plugin").__path__))
        if spec is None or spec.loader is None:
            raise AttributeError(name)
        real = module_from_spec(spec)
        spec.loader.exec_module(real)
        return getattr(real, name)


@contextmanager
def pydantic_plugins_off() -> Iterator[None]:
    """Within: pydantic finds no plugins (PYDANTIC_DISABLE_PLUGINS=__all__, as typer sets while it
    builds its parameter adapters, typer/_adapters.py) and, unless the real plugin loader is loaded
    already, a stand-in answers for it. After: the setting and the loader are as they were."""
    before = os.environ.get(_NO_PLUGINS)
    os.environ[_NO_PLUGINS] = "__all__"
    stand_in = None if _LOADER in sys.modules else _NoPluginsLoader(_LOADER)
    if stand_in is not None:
        sys.modules[_LOADER] = stand_in
    try:
        yield
    finally:
        if stand_in is not None and sys.modules.get(_LOADER) is stand_in:
            del sys.modules[_LOADER]
        if before is None:
            os.environ.pop(_NO_PLUGINS, None)
        else:
            os.environ[_NO_PLUGINS] = before


def build_without_plugins(model: type[BaseModel]) -> None:
    """Build `model` (declared with `defer_build=True`) now, with pydantic's plugins off: finding
    plugins scans every installed package's entry points (importlib.metadata, ~15-25 ms of each
    start), and no plugin observes gpuplan's own input validation. `defer_build` is then dropped
    from the config, so that subclasses (the web API's bodies, web_schemas.py) build at definition
    as before."""
    with pydantic_plugins_off():
        model.model_rebuild(force=True)
        del model.model_config["defer_build"]
