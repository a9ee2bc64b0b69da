"""Dagster resources and IO managers: the LLM, the bundle store, the asset-value store."""
