"""The `npc-interactions` lane (`dnd/npc-interaction-list`): declared in `lane.py`, registered
by `load_lanes()`."""
