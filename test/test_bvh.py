"""BVH export/import with retargeting: round trip, bad files, library integration."""

import numpy as np
import pytest

from affectsim_bridge.humans.bvh import export_bvh, import_bvh, label_from_name, own_joint_map, parse_bvh
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.content.library import Library, add_motions, build
from affectsim_bridge.humans.skeleton import forward_kinematics
from affectsim_bridge.humans.styles import Performer
from affectsim_core.errors import InvalidInput


@pytest.fixture(scope="module")
def clip():
    m = generate("rt", "walk", "happy", Performer.sample("B", np.random.default_rng(4)), 1)
    m.root_pos, m.root_rot, m.dofs = m.root_pos[:45], m.root_rot[:45], m.dofs[:45]
    return m


def test_round_trip_keeps_joint_positions_within_a_centimetre(clip, tmp_path):
    export_bvh(clip, tmp_path / "rt.bvh")
    back = import_bvh(tmp_path / "rt.bvh", "happy", "walk", "B", up="z", joint_map=own_joint_map(),
                      height=clip.body.height)
    ref, _ = forward_kinematics(clip.body.height, clip.root_pos, clip.root_rot, clip.dofs, clip.body.joint_offsets())
    got, _ = forward_kinematics(back.body.height, back.root_pos, back.root_rot, back.dofs, back.body.joint_offsets())
    err = np.linalg.norm(got - ref, axis=2)
    assert err.max() < 0.01, err.max()
    assert back.fps == pytest.approx(clip.fps) and back.provenance["source"] == "rt.bvh"


def test_y_up_files_are_converted(clip, tmp_path):
    export_bvh(clip, tmp_path / "z.bvh")
    text = (tmp_path / "z.bvh").read_text()
    b = parse_bvh(tmp_path / "z.bvh")
    z_up = b.positions("z")["head"]
    assert z_up[:, 2].min() > 1.2 * 100  # head above 1.2 m (file units: cm)
    assert "End Site" in text and "CHANNELS 6 Xposition" in text


def test_bad_files_name_file_and_field(clip, tmp_path):
    export_bvh(clip, tmp_path / "ok.bvh")
    text = (tmp_path / "ok.bvh").read_text()
    (tmp_path / "cut.bvh").write_text(text[: len(text) // 2])
    with pytest.raises(InvalidInput, match="cut.bvh"):
        parse_bvh(tmp_path / "cut.bvh")
    with pytest.raises(InvalidInput, match="joint_map source joint.*'Tail'"):
        import_bvh(tmp_path / "ok.bvh", "sad", "walk", "B", up="z", joint_map={**own_joint_map(), "Tail": "head"})
    with pytest.raises(InvalidInput, match="emotion='bored'"):
        import_bvh(tmp_path / "ok.bvh", "bored", "walk", "B", up="z", joint_map=own_joint_map())
    assert label_from_name(tmp_path / "F01SA0V1.bvh") == "sad"
    assert label_from_name(tmp_path / "M03SU2V1.bvh") is None  # surprise: not one of the five classes
    with pytest.raises(InvalidInput, match="KDAE name"):
        label_from_name(tmp_path / "walking.bvh")


def test_import_into_library_is_all_or_nothing(clip, tmp_path):
    root = tmp_path / "lib"
    build(root, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1,
          dyadic=0, ev_performers=0)
    export_bvh(clip, tmp_path / "a.bvh")
    m = import_bvh(tmp_path / "a.bvh", "happy", "walk", "B", up="z", joint_map=own_joint_map())
    before = (root / "manifest.json").read_text()
    bad = import_bvh(tmp_path / "a.bvh", "happy", "walk", "B", up="z", joint_map=own_joint_map(), mid="bad")
    bad.fps = -1
    with pytest.raises(InvalidInput, match="fps"):
        add_motions(root, [m, bad])
    assert (root / "manifest.json").read_text() == before and not (root / "clips" / "imported").exists()
    add_motions(root, [m])
    lib = Library(root)
    assert lib.entries[m.id]["family"] == "imported" and lib.load(m.id).provenance["importer"]
