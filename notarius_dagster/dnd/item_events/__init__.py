"""The `item-events` lane (`dnd/item-event-list`): declared in `lane.py`, registered by
`load_lanes()`."""
