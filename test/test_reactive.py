"""Reactive humans (in-process): attention with occlusion, emotion-conditioned reactions inside free
space, determinism, the passive settings' continuation, and scripted people left as they were."""

import math
from dataclasses import replace

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.world.scene import load_scene
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.reactive import REACTIONS, SUBSTEP_S, Attention, Reactions
from affectsim_bridge.humans.styles import Performer
from affectsim_core.actions import Action
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D
from affectsim_eval.dataset.composer import describe
from affectsim_eval.episode.orchestrator import evaluate_episode
from affectsim_eval.episode.worlds import InProcessEvalWorld
from affectsim_nav.policy import create_policy
from affectsim_perception.person_model import BlazePose
from affectsim_perception.recognizers import RECOGNIZERS
from helpers import box_room

PERFORMER = Performer.sample("R1", np.random.default_rng(3))
ROOM = box_room(w=10.0, h=4.0)
# the same room split by a wall at x = 5 with no opening: the robot on one side, the person on the other
SPLIT = box_room(w=10.0, h=4.0, walls_extra=[{"from": [5.0, 0.0], "to": [5.0, 4.0]}],
                 rooms=[{"id": "a", "polygon": [[0, 0], [5, 0], [5, 4], [0, 4]]},
                        {"id": "b", "polygon": [[5, 0], [10, 0], [10, 4], [5, 4]]}])


@pytest.fixture(scope="module")
def backend():
    b = BACKENDS.create("mujoco")
    yield b
    b.close()


def _person(emotion, x=7.5, y=2.0, yaw=math.pi, action="standing"):
    return HumanPlacement("target", x, y, yaw, motion=generate("m", action, emotion, PERFORMER, 1))


def _approach(b, person, scene=ROOM, start=Pose2D(1.0, 2.0, 0.0), mode="reactive", forward=26, seed=5, stop=8):
    """Drive the robot straight at ``person``; robot-person centre distances (m) after each action."""
    b.load(scene, start, (person,), humans_mode=mode, reaction_seed=seed)
    out = []
    for i in range(forward + stop):
        b.apply_action(Action.FORWARD if i < forward else Action.STOP)
        pos = b.human_pose(0)[0]
        out.append(float(np.hypot(pos[0] - b.pose.x, pos[1] - b.pose.y)))
    return np.array(out)


def test_a_fearful_person_backs_away_from_an_approaching_robot(backend):
    scripted = _approach(backend, _person("fearful"), mode="scripted")
    reactive = _approach(backend, _person("fearful"))
    summary = backend.reactions.summary()[0]
    assert summary["noticed_at"] is not None and summary["max_shift_m"] > 1.0
    # the robot drove the same 26 actions: where it stopped, the fearful person stands much farther off
    assert reactive[-1] > scripted[-1] + 1.0
    # and the person's own distance from its start grew while the robot kept approaching
    assert summary["path_m"] >= summary["max_shift_m"] > 0


def test_an_occluded_robot_causes_no_reaction(backend):
    person = _person("fearful")
    scripted = _approach(backend, person, scene=SPLIT, mode="scripted", forward=14)
    reactive = _approach(backend, person, scene=SPLIT, forward=14)
    assert backend.reactions.summary()[0]["noticed_at"] is None
    assert np.array_equal(scripted, reactive)


def test_a_robot_behind_the_person_is_not_noticed_until_in_view(backend):
    behind = _person("fearful", yaw=0.0)  # facing +x, the robot comes from -x
    _approach(backend, behind, forward=20)
    assert backend.reactions.summary()[0]["noticed_at"] is None


@pytest.mark.parametrize("emotion", ["angry", "happy", "sad", "neutral"])
def test_every_emotion_reacts_in_its_own_way(backend, emotion):
    scripted = _approach(backend, _person(emotion), mode="scripted", forward=20)
    _approach(backend, _person(emotion), forward=20)
    s = backend.reactions.summary()[0]
    assert s["noticed_at"] is not None and s["reacting_s"] > 0.5
    r = REACTIONS[emotion]
    if r.duration_s is not None:  # transient: over after its duration (sub-step rounding aside)
        assert s["reacting_s"] <= r.duration_s + 2 * SUBSTEP_S
    if emotion == "angry":  # steps toward the robot: closer than the scripted person at some step
        assert s["max_shift_m"] > 0.2
    else:
        assert s["max_shift_m"] == 0.0
    assert scripted.shape == (28,)


def test_reactions_keep_people_in_free_space_and_off_the_robot(backend):
    # a fearful person near a corner, chased into it along the diagonal: every displaced pelvis stays
    # clear of the walls and off the robot, and the steps the corner refuses are counted
    person = _person("fearful", x=9.3, y=0.7, yaw=math.radians(135))
    backend.load(ROOM, Pose2D(7.0, 3.0, math.radians(-45)), (person,), humans_mode="reactive", reaction_seed=1)
    nav = backend.navigable
    for i in range(30):
        backend.apply_action(Action.FORWARD)
        xy = backend.human_pose(0)[0][:2]
        assert nav.in_rooms(xy[None])[0]
        assert nav.clearance(xy[None])[0] >= 0.2 - 1e-9
        assert np.hypot(*(xy - backend.pose.xy)) >= nav.radius + 0.25 - 1e-6
    assert backend.reactions.summary()[0]["blocked_steps"] > 0  # cornered: the refused steps are counted


def test_same_seed_and_trajectory_give_the_same_people_bit_for_bit(backend):
    a = _approach(backend, _person("fearful"), seed=9)
    pose_a = [x.copy() for x in backend.human_pose(0)]
    b = _approach(backend, _person("fearful"), seed=9)
    assert np.array_equal(a, b)
    assert all(np.array_equal(x, y) for x, y in zip(pose_a, backend.human_pose(0)))
    # another seed draws another attention latency
    lat = {Reactions((_person("fearful"),), backend.navigable, backend.line_of_sight, Pose2D(1, 2, 0), s)
           .draws[0].latency_s for s in range(6)}
    assert len(lat) > 1


def test_scripted_people_are_exactly_the_motion(backend):
    person = _person("angry")
    backend.load(ROOM, Pose2D(1.0, 2.0, 0.0), (person,))
    assert backend.reactions is None
    for _ in range(12):
        backend.apply_action(Action.FORWARD)
        for got, want in zip(backend.human_pose(0), person.pose_at(backend.sim_time)):
            assert np.array_equal(got, want)


def test_renders_of_past_and_later_instants(backend):
    person = _person("fearful")
    backend.load(ROOM, Pose2D(4.0, 2.0, 0.0), (person,), humans_mode="reactive", reaction_seed=2)
    # before any action: a later instant is the robot standing at the start (the passive settings)
    later = [x.copy() for x in backend.human_pose(0, 3.0)]
    still = Reactions((person,), backend.navigable, backend.line_of_sight, Pose2D(4.0, 2.0, 0.0), 2)
    still.advance(3.0, Pose2D(4.0, 2.0, 0.0))
    assert all(np.array_equal(x, y) for x, y in zip(later, still.pose(0, 3.0)))
    assert backend.reactions.t == 0.0  # rendering moved nobody's clock
    for _ in range(12):
        backend.apply_action(Action.STOP)
    # after the actions: a past instant comes from the history, equal to what was shown then
    assert all(np.array_equal(x, y) for x, y in zip(backend.human_pose(0, 3.0), later))


def test_bad_reaction_parameters_are_refused_with_the_field():
    with pytest.raises(InvalidInput, match="reactions.fearful.speed_mps"):
        replace(REACTIONS["fearful"], speed_mps=9.0).validate()
    with pytest.raises(InvalidInput, match="reactions.happy.gesture"):
        replace(REACTIONS["happy"], gesture="moonwalk").validate()
    with pytest.raises(InvalidInput, match="attention.range_m"):
        Attention(range_m=float("nan")).validate()
    with pytest.raises(InvalidInput, match="humans"):
        BACKENDS.create("mujoco").load(ROOM, Pose2D(1.0, 2.0, 0.0), (), humans_mode="telepathic")


def test_an_episode_with_reactive_people_records_social_measures_and_repeats_exactly(backend):
    scene = load_scene("test_apartment")
    m = generate("s", "standing", "fearful", PERFORMER, 1, scenario="gestures")
    ep = Episode.from_dict({
        "episode_id": "test_ag_000001", "scene_id": "test_apartment", "monitor_room": "living",
        "start_position": [1.5, 2.5, 0.0], "start_rotation": [1.0, 0.0, 0.0, 0.0], "family": "action_grounded",
        "challenge": None, "emotion": "fearful", "action": "standing", "seed": 3,
        "humans": [{"role": "target", "motion_id": "s", "x": 4.0, "y": 2.8, "yaw": math.pi, "phase": 0.0,
                    "description": describe(m)}]})
    policy = create_policy("baseline", BlazePose)
    world = InProcessEvalWorld(backend, policy, {"majority": RECOGNIZERS.create("majority")})
    try:
        runs = {h: evaluate_episode(ep, world, scene, lambda mid: m, max_actions=40, max_planner_calls=80, humans=h)
                for h in ("scripted", "reactive")}
        again = evaluate_episode(ep, world, scene, lambda mid: m, max_actions=40, max_planner_calls=80,
                                 humans="reactive")
    finally:
        policy.close()
    scripted, reactive = runs["scripted"].record, runs["reactive"].record
    assert scripted.social is None and "social" not in scripted.to_dict()
    social = reactive.social
    assert social is not None and len(social.people) == 1 and social.people[0]["emotion"] == "fearful"
    assert social.people[0]["noticed_at"] is not None  # the robot starts 2.5 m away, in view
    assert 0.0 <= social.intimate_pct + social.personal_pct <= 100.0 and social.min_gap_m >= 0.0
    # the same episode, seed and policy: the same record, bit for bit (and it survives its JSON form)
    assert again.record.to_dict() == reactive.to_dict()
    assert type(reactive).from_dict(reactive.to_dict()) == reactive


def test_a_walker_waits_instead_of_walking_through_the_robot(backend):
    # a walker whose path crosses a robot standing in it: scripted, the pelvis passes through the
    # robot's footprint; reactive, the person waits at its edge
    m = generate("w", "walk", "happy", PERFORMER, 1)
    p = HumanPlacement("target", 3.0, 2.0, 0.0, motion=m)
    robot = Pose2D(4.2, 2.0, math.pi)
    gaps = {}
    for mode in ("scripted", "reactive"):
        backend.load(ROOM, robot, (p,), humans_mode=mode, reaction_seed=0)
        g = []
        for _ in range(int(m.duration / 0.25)):
            backend.apply_action(Action.STOP)
            g.append(float(np.hypot(*(backend.human_pose(0)[0][:2] - robot.xy))) - backend.robot.radius - 0.25)
        gaps[mode] = min(g)
    assert gaps["scripted"] < -0.1 and gaps["reactive"] >= -1e-9
    assert backend.reactions.summary()[0]["blocked_steps"] > 0


def test_in_free_run_reactions_follow_sim_time(backend):
    # /cmd_vel-style motion in 20 ms ticks: the reactions integrate whole 50 ms sub-steps of sim time
    backend.load(ROOM, Pose2D(1.0, 2.0, 0.0), (_person("fearful"),), humans_mode="reactive", reaction_seed=5)
    for _ in range(400):  # 8 s at 0.8 m/s toward the person
        backend.integrate_velocity(0.8, 0.0, 0.02)
    r = backend.reactions
    assert abs(r.t - backend.sim_time) < SUBSTEP_S and r.summary()[0]["max_shift_m"] > 0.5
