"""``python -m lmsim.cli``: the ``lmsim`` command without the console script."""

import sys

from lmsim.cli import main

sys.exit(main())
