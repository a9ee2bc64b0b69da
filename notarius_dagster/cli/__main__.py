"""`python -m notarius_dagster.cli`: the same entry point as the `notarius` script."""

from notarius_dagster.cli.main import entry

entry()
