import math

import numpy as np
import pytest

from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation, matrix_to_quat, quat_to_matrix
from affectsim_core.registry import Registry


def test_registry_rejects_duplicates_and_unknown_names():
    reg: Registry[int] = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(KeyError, match="already registered"):
        reg.register("a")(lambda: 2)
    with pytest.raises(KeyError, match="unknown widget 'b'; registered: a"):
        reg.get("b")
    assert reg.create("a") == 1


def test_transform_compose_inverse_roundtrip():
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        t = Transform(quat_to_matrix(q), rng.normal(size=3))
        ident = t.compose(t.inverse())
        assert np.allclose(ident.rotation, np.eye(3)) and np.allclose(ident.translation, 0)
        assert np.allclose(quat_to_matrix(matrix_to_quat(t.rotation)), t.rotation)


def test_pose2d_transform_and_look_at():
    t = Transform.from_pose2d(Pose2D(1.0, 2.0, math.pi / 2))
    assert np.allclose(t.apply(np.array([1.0, 0, 0])), [1.0, 3.0, 0.0])
    r = look_at_rotation(np.array([0, 0, 1.0]), np.array([2.0, 0, 1.0]))
    assert np.allclose(r[:, 2], [1, 0, 0])  # optical z forward
    assert np.allclose(r[:, 1], [0, 0, -1])  # optical y down


def test_invalid_input_names_field_value_expectation():
    err = InvalidInput("robot_pose", (1, 2), "a navigable point", where="bridge")
    assert "bridge: robot_pose=(1, 2) is invalid; expected a navigable point" == str(err)


def test_errors_survive_pickling_across_worker_processes():
    import pickle

    from affectsim_core.errors import MissingDependency

    err = pickle.loads(pickle.dumps(InvalidInput("scene", "scene_001", "an existing scene", where="build")))
    assert (err.field, err.value, err.where) == ("scene", "scene_001", "build")
    assert str(err) == "build: scene='scene_001' is invalid; expected an existing scene"
    dep = pickle.loads(pickle.dumps(MissingDependency("habitat", "habitat_sim", "pip install habitat-sim")))
    assert "habitat_sim" in str(dep)
