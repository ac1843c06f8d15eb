"""``python -m limecraft``; see :mod:`limecraft.cli`."""

import os
import sys

# Busy-waiting OpenMP threads cost ~8 ms per torch op on small, throttled machines; waiting
# passively costs nothing measurable elsewhere. Must be set before torch starts its pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .cli import main

sys.exit(main())
