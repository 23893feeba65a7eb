"""``python -m lmsim.reproduce``: see :func:`lmsim.reproduce.main`."""

import sys

from lmsim.reproduce._cli import main

sys.exit(main())
