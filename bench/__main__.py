"""``python -m bench``: run the benchmark suite (see ``python -m bench --help``)."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
