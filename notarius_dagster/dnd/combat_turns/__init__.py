"""The `combat-turns` lane (`dnd/combat-turn-list`): declared in `lane.py`, registered by
`load_lanes()`; the scene gate is `gate.py`, the gated extractor `extract.py`."""
