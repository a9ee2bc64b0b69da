"""The `combat-turns` lane (`dnd/combat-turn-list`): declared in `lane.py`, listed by
`dnd.lanes()`; the scene gate is `gate.py`, the gated extractor `extract.py`."""
