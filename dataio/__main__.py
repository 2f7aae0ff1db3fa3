"""``python -m dataio``: the command line (``dataio.cli``), as the ``dataio`` script runs it."""

import sys

from dataio.cli import entry

sys.exit(entry())
