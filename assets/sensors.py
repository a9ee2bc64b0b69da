"""Sensors: the inbox sensor (operations issue) and the stale-lane backfill sensor."""

from __future__ import annotations

from dagster import SensorDefinition

from notarius_dagster.settings import Settings


def build_sensors(settings: Settings) -> list[SensorDefinition]:
    return []
