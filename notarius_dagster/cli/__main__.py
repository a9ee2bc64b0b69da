"""`python -m notarius_dagster.cli`: the same entry point as the `notarius` script."""

import sys

from notarius_dagster.cli.main import main

sys.exit(main())
