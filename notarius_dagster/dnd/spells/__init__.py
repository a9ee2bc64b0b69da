"""The `spells` lane (`dnd/spell-list`): declared in `lane.py`, registered by `load_lanes()`."""
