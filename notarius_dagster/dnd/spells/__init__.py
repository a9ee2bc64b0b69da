"""The `spells` lane (`dnd/spell-list`): declared in `lane.py`, listed by `dnd.lanes()`."""
