"""``python -m lmsim.extract`` (also under ``torchrun ... -m lmsim.extract``)."""

from lmsim.extract.cli import main

raise SystemExit(main())
