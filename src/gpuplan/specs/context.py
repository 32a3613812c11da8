"""One context for every command and face: the catalog, the prices and the calibrations a user
gave (`--catalog`, `--prices`, `--calibration`, `$GPUPLAN_CATALOG`, `$GPUPLAN_PRICES`), read once
and passed as one object, so no path through the library falls back to the bundled data alone."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Final

from gpuplan.specs.calibration import SUFFIXES as CALIBRATION_SUFFIXES
from gpuplan.specs.calibration import apply_calibration
from gpuplan.specs.gpu import CATALOG_ENV, Catalog, bundled_catalog, load_catalog
from gpuplan.specs.prices import Price, cheapest_prices, load_price_file

PRICES_ENV: Final = "GPUPLAN_PRICES"  # a user's price CSV, like --prices


@dataclass(frozen=True)
class Context:
    """What a user brings besides the workload. `catalog_files` are catalog TOML rows that add or
    override GPUs (read after `$GPUPLAN_CATALOG`'s); `calibration_files` are `gpuplan bench` YAML
    files that replace the efficiencies of the GPUs they measured; `price_file` is a rental price
    CSV whose rows win over the bundled snapshot (else `$GPUPLAN_PRICES`). Files are read on first
    use, then kept: one context answers many questions without reading them again."""

    catalog_files: tuple[Path, ...] = ()
    calibration_files: tuple[Path, ...] = ()
    price_file: Path | None = None
    _prices: dict[bool, dict[str, Price]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, files: Iterable[str | Path] = (), price_file: str | Path | None = None) -> Context:
        """A context from a mixed list of catalog (TOML) and calibration (YAML) files, as the
        command line's `--catalog` and `--calibration` options give them, and a price file."""
        paths = [Path(f) for f in files]
        calibrations = tuple(p for p in paths if p.name.lower().endswith(CALIBRATION_SUFFIXES))
        tables = tuple(p for p in paths if p not in calibrations)
        return cls(tables, calibrations, Path(price_file) if price_file is not None else None)

    @property
    def files(self) -> tuple[Path, ...]:
        """The catalog and calibration files, as `of` takes them."""
        return self.catalog_files + self.calibration_files

    @cached_property
    def catalog(self) -> Catalog:
        """The bundled catalog, the user's rows and their calibrations, in that order."""
        if not self.catalog_files and not os.environ.get(CATALOG_ENV):
            cat = bundled_catalog()
        else:
            cat = load_catalog(self.catalog_files)
        for f in self.calibration_files:
            cat = apply_calibration(cat, f)
        return cat

    @property
    def price_path(self) -> Path | None:
        """The user's price file: `price_file`, else `$GPUPLAN_PRICES`, else none."""
        env = os.environ.get(PRICES_ENV)
        return self.price_file or (Path(env) if env else None)

    def prices(self, spot: bool = False) -> dict[str, Price]:
        """The cheapest on-demand (or spot) offer per GPU name; the user's rows win."""
        if spot not in self._prices:
            cat = self.catalog
            best = cheapest_prices(cat, spot=spot)
            path = self.price_path
            if path is not None:
                for p in load_price_file(path, cat):
                    if p.spot == spot:
                        best[p.gpu] = p  # the user's own price wins over the bundled snapshot
            self._prices[spot] = best
        return self._prices[spot]

    def check(self) -> Context:
        """Read every file now, so a bad one is reported before any work (e.g. a server's banner)."""
        _ = self.catalog
        self.prices(False)
        return self
