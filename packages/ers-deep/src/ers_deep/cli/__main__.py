"""``python -m ers_deep.cli``."""

import sys

from ers_deep.cli import main

sys.exit(main())
