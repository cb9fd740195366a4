import sys

from specdec_core.cli import main

sys.exit(main())
