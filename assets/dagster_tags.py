"""Dagster's own run- and materialization-tag keys that Notarius reads. Dagster 1.13 exports
no public constants for them (they live in a private module), so they are spelled here;
tests/test_run_tags.py compares them with Dagster's private constants and with the tags of
real runs, so a rename in Dagster fails a test instead of silently matching nothing."""

PARTITION_NAME_TAG = "dagster/partition"
RUN_KEY_TAG = "dagster/run_key"
SENSOR_NAME_TAG = "dagster/sensor_name"
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
INPUT_DATA_VERSION_TAG = "dagster/input_data_version/"
"""Prefix: the tag key is this plus the upstream asset key's user string."""
