"""``python -m lmsim.zoo``."""

import sys

from lmsim.zoo.cli import main

sys.exit(main())
