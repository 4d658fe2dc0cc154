import copy

import pytest
import yaml

from affectsim_bridge.world.scene import BUILTIN_DIR, load_scene, parse_scene
from affectsim_core.errors import InvalidInput


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((BUILTIN_DIR / "test_apartment.yaml").read_text())


def test_test_apartment_has_what_the_benchmark_needs():
    s = load_scene("test_apartment")
    assert len(s.rooms) >= 3
    assert any(o.door is None for w in s.walls for o in w.openings), "a doorway without door"
    assert len(s.doors()) >= 1
    assert len(s.supports()) >= 3, "seats to sit on"
    assert {f.type for f in s.furniture} >= {"shelf", "sofa", "chair", "bed", "table"}
    assert all(r.monitor is not None for r in s.rooms)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.update(format="other/2"), "format"),
        (lambda d: d["furniture"][0].update(material="nope"), "furniture[0].material"),
        (lambda d: d["furniture"][1].update(type="spaceship"), "furniture[1].type"),
        (lambda d: d["furniture"][2].update(size=[1, 1]), "furniture[2].size"),
        (lambda d: d["rooms"][0].pop("polygon"), "rooms[0].polygon"),
        (lambda d: d["walls"][4]["openings"][0].update(width=20), "walls[4].openings[0].width"),
        (lambda d: d["furniture"].append(copy.deepcopy(d["furniture"][0])), "furniture[].id"),
        (lambda d: d["walls"][0].update(to=[0, 0]), "walls[0].to"),
        (lambda d: d["rooms"][0]["monitor_camera"].update(position=[0, float("nan"), 1]), "monitor_camera.position"),
    ],
)
def test_bad_scene_is_rejected_naming_the_field(raw, mutate, field):
    d = copy.deepcopy(raw)
    mutate(d)
    with pytest.raises(InvalidInput) as exc:
        parse_scene(d, "bad.yaml")
    assert field in str(exc.value) and "bad.yaml" in str(exc.value)


def test_unknown_scene_and_bad_yaml(tmp_path):
    with pytest.raises(InvalidInput, match="built-in scene id"):
        load_scene("no_such_scene")
    p = tmp_path / "broken.yaml"
    p.write_text("format: [unclosed")
    with pytest.raises(InvalidInput, match="valid YAML"):
        load_scene(p)


def test_door_geometry_closed_and_open():
    s = load_scene("test_apartment")
    doors = {d.id: d for d in s.doors()}
    closed, opened = doors["study_door"], doors["bedroom_door"]
    # closed: panel lies in the wall plane x = 5, spanning the opening
    assert abs(closed.footprint.cx - 5.0) < 1e-9 and abs(closed.footprint.cy - 6.5) < 1e-9
    # open 90 deg to the left of the wall (+y): panel perpendicular to the wall, inside the bedroom
    assert opened.footprint.cy > 5.0 and abs(opened.footprint.cx - opened.hinge_xy[0]) < 1e-9
