import sys

from dataio.cli import main

sys.exit(main())
