"""The `scene-descriptions` lane (`dnd/scene-description-list`): declared in `lane.py`,
registered by `load_lanes()`. Its accepted artifact is the gate of combat-turn extraction."""
