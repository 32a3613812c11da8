"""PEP 562 lazy exports for a package's `__init__`: a public name is imported from its module on
first use, then kept in the package's namespace. `gpuplan`, `gpuplan.results` and
`gpuplan.interfaces.api` use it so that a command imports only the modules it uses."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


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
