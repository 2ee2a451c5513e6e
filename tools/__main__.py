"""`python -m tools ...`: the `tributary` command line."""

import sys

from tools.cli import main

sys.exit(main())
