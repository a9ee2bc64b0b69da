"""The Dagster asset layer: partitions, the asset factory over the resolved profile, jobs,
sensors and checks. Thin: every behaviour lives in the engine."""
