"""The `npcs` lane (`dnd/npc-list`): declared in `lane.py`, registered by `load_lanes()`."""
