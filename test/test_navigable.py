import math

import numpy as np
import pytest
from helpers import box_room

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import load_scene

R = 0.3


@pytest.fixture(scope="module")
def apt():
    return NavigableSpace(load_scene("test_apartment"), R)


def test_geodesic_at_least_euclidean_and_symmetric(apt):
    rng = np.random.default_rng(1)
    pts = apt.sample(40, rng)
    for a, b in zip(pts[:20], pts[20:]):
        g = apt.geodesic_distance(a, b)
        assert math.isfinite(g)
        assert g >= np.linalg.norm(a - b) - 1e-9
        assert abs(g - apt.geodesic_distance(b, a)) < 1e-6


def test_geodesic_matches_analytic_detour_around_a_wall_end():
    # wall stub x = 3, y in [-0.05, 2.55] (half-thickness end caps); path must wrap its top end
    nav = NavigableSpace(box_room([{"from": [3, 0], "to": [3, 2.5]}]), R)
    a, b = np.array([1.5, 1.0]), np.array([4.5, 1.0])
    c1, c2 = np.array([2.95, 2.55]), np.array([3.05, 2.55])
    d = np.linalg.norm(a - c1)
    theta_a = math.atan2(*(a - c1)[::-1])
    theta_t = theta_a - math.acos(R / d) + 2 * math.pi
    arc = theta_t - math.pi / 2
    exact = 2 * (math.sqrt(d * d - R * R) + R * arc) + (c2[0] - c1[0])
    g = nav.geodesic_distance(a, b)
    assert exact - 1e-6 <= g <= exact + 0.05, (g, exact)
    path = nav.shortest_path(a, b)
    assert np.allclose(path[0], a) and np.allclose(path[-1], b)
    assert all(nav.segment_free(p, q)[0] for p, q in zip(path, path[1:]))


def test_no_path_across_walls():
    # two rooms separated by a full wall: the far room is free space but not reachable
    rooms = [{"id": "a", "polygon": [[0, 0], [3, 0], [3, 4], [0, 4]]},
             {"id": "b", "polygon": [[3, 0], [6, 0], [6, 4], [3, 4]]}]
    nav = NavigableSpace(box_room([{"from": [3, 0], "to": [3, 4]}], rooms=rooms), R)
    a, b = np.array([1.5, 2.0]), np.array([4.5, 2.0])
    assert nav.is_free(np.array([a, b])).all()
    assert math.isinf(nav.geodesic_distance(a, b))
    assert nav.shortest_path(a, b) == []
    assert not nav.segment_free(a, b)[0]


def test_closed_door_forces_detour(apt):
    bedroom, study = np.array([4.2, 6.5]), np.array([5.8, 6.5])
    g = apt.geodesic_distance(bedroom, study)
    assert g > 3 * np.linalg.norm(bedroom - study)  # around through the living room, not the door


def test_try_step_stays_free_and_reports_clipping(apt):
    rng = np.random.default_rng(2)
    starts = apt.sample(200, rng)
    for p in starts:
        ang = rng.uniform(-math.pi, math.pi)
        target = p + 0.25 * np.array([math.cos(ang), math.sin(ang)])
        res = apt.try_step(p, target)
        assert apt.is_free(res.end)[0]
        assert res.clipped == (np.linalg.norm(res.end - target) > 1e-3)
    # straight into the south wall (inner face y = 0.05): stops at y = 0.35, clipped
    res = apt.try_step([1.0, 0.5], [1.0, 0.25], slide=False)
    assert res.clipped and abs(res.end[1] - (0.05 + R)) < 1e-3
    # diagonally into the wall with sliding: keeps the along-wall component
    res = apt.try_step([1.0, 0.4], [1.2, 0.2], slide=True)
    assert res.clipped and res.end[0] > 1.15 and abs(res.end[1] - 0.35) < 1e-3


def test_occupancy_grid(apt):
    grid, (ox, oy) = apt.occupancy_grid(0.05)

    def cell(x, y):
        return grid[int((y - oy) / 0.05), int((x - ox) / 0.05)]

    assert cell(0.0, 2.0) == 100  # exterior wall
    assert cell(3.0, 2.8) == 0  # living room floor
    assert cell(-0.4, -0.4) == -1  # outside the apartment
    assert cell(3.0, 0.55) == 100  # sofa


def test_sampling_is_uniform_over_the_main_region(apt):
    pts = apt.sample(400, np.random.default_rng(3))
    assert apt.is_navigable(pts).all()
    rooms = [apt.scene.room_at(tuple(p)).id for p in pts]
    assert set(rooms) == {"living", "kitchen", "bedroom", "study"}


def test_empty_room_is_navigable_and_connected():
    nav = NavigableSpace(box_room(w=8, h=6), R)
    pts = np.array([[1.0, 3.0], [7.0, 1.0], [4.0, 5.5]])
    assert nav.is_navigable(pts).all()
    assert nav.geodesic_distance(pts[0], pts[1]) == pytest.approx(np.linalg.norm(pts[0] - pts[1]))


def test_a_robot_overlapping_a_person_may_back_off_but_not_press_on():
    # a person (disc of 0.25 m) who stepped 4 mm into the robot: the robot was frozen until the budget ended
    nav = NavigableSpace(box_room(w=8, h=6), R)
    person = np.array([[4.0, 3.0, 0.25]])
    start = np.array([4.0 - R - 0.25 + 0.004, 3.0])
    gap = lambda p: float(np.linalg.norm(np.asarray(p) - person[0, :2])) - R - 0.25  # noqa: E731
    away = nav.try_step(start, start - [0.25, 0.0], discs=person)
    assert not away.clipped and gap(away.end) == pytest.approx(0.246)
    on = nav.try_step(start, start + [0.25, 0.0], slide=False, discs=person)
    assert on.clipped and np.allclose(on.end, start)
    along = nav.try_step(start, start + [0.05, 0.25], discs=person)  # slides round them, no closer
    assert along.clipped and along.end[1] > 3.1 and gap(along.end) >= gap(start) - 1e-6
    # the disc is unchanged for a robot that does not overlap it: stops at contact, as before
    free = nav.try_step([2.0, 3.0], [4.0, 3.0], slide=False, discs=person)
    assert free.clipped and gap(free.end) == pytest.approx(0.0, abs=1e-3)
