"""The `notarius` command line: `main.py` parses and dispatches; each other module is one
command family (backfill, campaign, eval, report) and `common.py` what they share."""
