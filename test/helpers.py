"""Small hand-made scenes for tests."""

from affectsim_bridge.scene import parse_scene

MATERIALS = {"floor": {"rgba": [0.6, 0.5, 0.4, 1]}, "wall": {"rgba": [0.9, 0.9, 0.9, 1]},
             "door": {"rgba": [0.5, 0.3, 0.2, 1]}, "cabinet": {"rgba": [0.8, 0.1, 0.1, 1]}}


def box_room(walls_extra=(), furniture=(), w=6.0, h=4.0, rooms=None):
    """A w x h room enclosed by four walls, plus extra walls and furniture."""
    doc = {
        "format": "affectsim-scene/1", "id": "box", "materials": MATERIALS,
        "rooms": rooms or [{"id": "room", "polygon": [[0, 0], [w, 0], [w, h], [0, h]]}],
        "walls": [{"from": [0, 0], "to": [w, 0]}, {"from": [w, 0], "to": [w, h]}, {"from": [w, h], "to": [0, h]},
                  {"from": [0, h], "to": [0, 0]}, *walls_extra],
        "furniture": list(furniture),
    }
    return parse_scene(doc, "test-scene")
