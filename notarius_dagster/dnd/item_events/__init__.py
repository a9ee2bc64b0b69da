"""The `item-events` lane (`dnd/item-event-list`): declared in `lane.py`, listed by
`dnd.lanes()`."""
