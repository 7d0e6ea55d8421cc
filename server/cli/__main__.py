"""``python -m server.cli``: the ``gearbox-hil`` command line."""

import sys

from server.cli import main

sys.exit(main())
