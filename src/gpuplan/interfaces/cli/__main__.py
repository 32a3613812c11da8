"""`python -m gpuplan.interfaces.cli`: the `gpuplan` command."""

from gpuplan.interfaces.cli import main

raise SystemExit(main())
