"""Notarius: tabletop RPG transcripts to source-grounded JSON bundles, on Dagster."""

__version__ = "0.1.0"
