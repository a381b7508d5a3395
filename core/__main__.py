"""``python -m flowrt ...``: the ``flowrt`` command (see :mod:`flowrt.cli`)."""
from __future__ import annotations

from .tools.cli import main

raise SystemExit(main())
