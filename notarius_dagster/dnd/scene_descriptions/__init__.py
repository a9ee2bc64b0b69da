"""The `scene-descriptions` lane (`dnd/scene-description-list`): declared in `lane.py`,
listed by `dnd.lanes()`. Its accepted artifact is the gate of combat-turn extraction."""
