"""The `npcs` lane (`dnd/npc-list`): declared in `lane.py`, listed by `dnd.lanes()`."""
