"""The `npc-interactions` lane (`dnd/npc-interaction-list`): declared in `lane.py`, listed by
`dnd.lanes()`."""
