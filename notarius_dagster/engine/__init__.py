"""The engine: pure Python contracts and stages. It never imports Dagster or D&D types."""
