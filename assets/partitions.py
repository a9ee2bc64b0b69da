"""Every session is a partition of the dynamic `sessions` partitions definition."""

from dagster import DynamicPartitionsDefinition

sessions_partitions = DynamicPartitionsDefinition(name="sessions")
