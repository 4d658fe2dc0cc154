"""The nav node: active observation as ROS 2 action servers over the bridge's topics and lockstep service.

Action servers (``affectsim_interfaces/action``):

- ``/affectsim/acquire_observation`` (AcquireObservation): search -> handoff -> follow for one
  episode, the clip's frame stamps and the Table 6 diagnostics in the result;
- ``/affectsim/search_person`` (SearchPerson): start an episode and explore until a person is sighted;
- ``/affectsim/handoff`` (Handoff): continue it until a stable handoff;
- ``/affectsim/follow_person`` (FollowPerson): keep following while ``clip_frames`` are collected.

Feedback after every step: stage, actions and planner calls used, path length, last detection.
One goal runs at a time: a new goal preempts the running one (which ends ``aborted``), a cancel
ends it ``cancelled``; bad goals and failures end the goal with the reason and the node keeps
serving. The action servers appear once every input topic has a publisher (bridge or robot driver).
Parameter ``execution``: ``lockstep`` applies each primitive action through the bridge's
``/affectsim/apply_action``; ``cmd_vel`` drives it in continuous time through ``/cmd_vel`` from the
robot's odometry and laser, with no ``/affectsim/*`` interface (a robot, or the bridge in
``free_run``); ``nav2`` sends a policy's point-to-point goals to Nav2's ``NavigateToPose``. A policy's
head commands go with the lockstep action, or (``cmd_vel``, ``nav2``) to ``/head_controller/joint_trajectory``.
The policy runs the same core as the in-process evaluation (:mod:`affectsim_nav.active`), so both
give identical trajectories for the same episode. Policies that need a person detector get one of
:data:`~affectsim_core.person_tracking.DETECTORS` (parameter ``detector``; the executable in
:mod:`affectsim_ros.nodes` registers the perception package's). Parameters: :data:`PARAMS`.
"""

from __future__ import annotations

import math
import threading
import time

from builtin_interfaces.msg import Duration as DurationMsg
from geometry_msgs.msg import Point, Twist
from geometry_msgs.msg import Pose2D as Pose2DMsg
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from affectsim_core.clips import sample_indices
from affectsim_core.errors import InvalidInput
from affectsim_core.person_tracking import DETECTORS
from affectsim_core.protocol import MAX_ACTIONS, MAX_PLANNER_CALLS, STEP_SECONDS, Outcome
from affectsim_core.ros.bridge_client import SENSOR_QOS, BridgeClient
from affectsim_core.ros.calls import server_qos
from affectsim_core.ros.conversions import diagnostics_to_msg, image_msg, matrix_pose_msg, to_time
from affectsim_core.ros.goals import end_goal, publish_feedback
from affectsim_core.ros.params import Param, declare_params
from affectsim_core.ros.topics import HEAD_JOINTS, OPTICAL_FRAME, SERVICES
from affectsim_core.sync import SYNC_SLOP_S
from affectsim_core.tf_buffer import EXTRAPOLATION_S, TfBuffer
from affectsim_core.ros.topics import TOPICS as NAMES
from affectsim_interfaces.action import AcquireObservation, FollowPerson, Handoff, SearchPerson
from affectsim_nav.active import MAX_CLIP_FRAMES, ActiveEpisode, sighting_feedback
from affectsim_nav.nav2_mover import Nav2Mover
from affectsim_nav.policy import POLICIES, Policy, create_policy
from affectsim_nav.base_control import EXECUTIONS, BaseLimits
from affectsim_nav.ros_robot import CMD_VEL_TOPICS, ODOM_TIMEOUT_S, TOPICS, CmdVelRobot, LockstepRobot

MAX_GOAL_COUNT = 100_000  # upper bound of a goal's max_actions / max_planner_calls
ZERO_RESEND_S = 0.1  # s between zeros on /cmd_vel while a stopping node awaits their acknowledgement
MAX_STREAM_S = 600.0  # s: the longest A-Obs stream a goal may ask for (2,400 frames at 4 Hz)


def _check_clip_frames(n: int) -> None:
    if not 1 <= n <= MAX_CLIP_FRAMES:
        raise InvalidInput("clip_frames", n, f"1..{MAX_CLIP_FRAMES} full-rate frames (2 x motion duration at 4 Hz)",
                           where="nav")

PARAMS: tuple[Param, ...] = (
    Param("policy", "baseline", "default active-observation policy (registered name)", choices=POLICIES.names),
    Param("detector", "blazepose", "person detector of the policies that need one (registered name)",
          choices=DETECTORS.names),
    Param("execution", "lockstep", "how primitive actions move the robot: lockstep (/affectsim/apply_action, "
          "simulation), cmd_vel (continuous time through /cmd_vel from /odom and /base_scan: simulation in "
          "free_run or a robot), nav2 (cmd_vel, and a policy's point-to-point goals to Nav2's NavigateToPose)",
          choices=EXECUTIONS),
    Param("nav2_action", "navigate_to_pose", "Nav2 NavigateToPose action name", check=bool, expected="an action name"),
    Param("timeout_s", 30.0, "seconds any wait for the bridge (service answer, frame, TF) may take", bounds=(1.0, 600.0)),
    Param("sensor_qos", "auto", "reliability of the camera, laser and odometry subscriptions: best_effort matches "
          "reliable and best-effort (sensor-data) publishers alike; reliable: every frame (the lockstep simulator); "
          "auto: reliable in lockstep, best_effort otherwise", choices=("auto", *SENSOR_QOS)),
    Param("sync_slop_s", SYNC_SLOP_S, "depth and camera info are paired with the RGB frame stamped nearest, within "
          "this (s; approximate time sync of unsynchronised drivers)", bounds=(0.0, 0.5)),
    Param("tf_extrapolation_s", EXTRAPOLATION_S, "a transform is held this long (s) after its newest stamp (a "
          "localiser at a few Hz); beyond it a lookup fails naming the edge", bounds=(0.0, 1.0)),
    Param("odom_timeout", ODOM_TIMEOUT_S, "cmd_vel: no odometry this long (s, wall clock) while driving: the base "
          "is stopped at once and the goal aborts (trajectory kept)", bounds=(0.05, 5.0)),
    Param("robot_radius", 0.3, "cmd_vel: base radius (m): its front edge and the corridor the laser must see free",
          bounds=(0.05, 1.0)),
    *(Param(f"base_{name}", getattr(BaseLimits, name), f"cmd_vel: {doc}", bounds=BaseLimits.BOUNDS[name])
      for name, doc in (("max_linear", "linear speed limit (m/s)"), ("max_angular", "angular speed limit (rad/s)"),
                        ("linear_accel", "linear acceleration limit (m/s^2)"),
                        ("angular_accel", "angular acceleration limit (rad/s^2)"),
                        ("position_tolerance", "FORWARD ends this close to 0.25 m (m)"),
                        ("angle_tolerance", "a turn ends this close to 15 deg (rad)"),
                        ("action_timeout", "time one primitive action may take (s)"),
                        ("safety_distance", "FORWARD stops when the base would touch what the laser sees within this (m)"),
                        ("stall_s", "commanded this long without progress: blocked (s)"),
                        ("latency", "command plus odometry latency the controller plans ahead for (s)"),
                        ("settle_linear", "measured speed below which the base has settled: an action is done (m/s)"),
                        ("settle_angular", "measured turn rate below which the base has settled (rad/s)"))),
)


class NavNode(Node):
    def __init__(self) -> None:
        super().__init__("nav")
        self.p = declare_params(self, PARAMS)
        self.execution = self.p["execution"]
        cmd_vel = self.execution != "lockstep"  # nav2: primitives between Nav2's goals go through /cmd_vel too
        self.limits = BaseLimits(**{name: float(self.p[f"base_{name}"]) for name in BaseLimits.BOUNDS})
        qos = self.p["sensor_qos"] if self.p["sensor_qos"] != "auto" else ("best_effort" if cmd_vel else "reliable")
        self.io = BridgeClient("nav_io", topics=CMD_VEL_TOPICS if cmd_vel else TOPICS, services=not cmd_vel,
                               sensor_qos=qos, log=self.get_logger().warning,
                               tf=TfBuffer(extrapolation=float(self.p["tf_extrapolation_s"])))
        self._cmd_pub = self.create_publisher(Twist, NAMES["cmd_vel"], 10) if cmd_vel else None
        self._head_pub = self.create_publisher(JointTrajectory, NAMES["head_command"], 10) if cmd_vel else None
        self._halted = False  # shutting down: every command is zero from now on
        self.mover = None
        if self.execution == "nav2":
            self.mover = Nav2Mover(self, self.p["nav2_action"], float(self.p["timeout_s"]))
        self._policies: dict[str, Policy] = {}
        self._lock = threading.Lock()
        self._active = None  # goal handle of the running goal
        self._idle = threading.Event()
        self._idle.set()
        self.episode: ActiveEpisode | None = None
        self.io.wait_for_publishers(log=self.get_logger().info)  # a goal before that could miss its first frame
        group = ReentrantCallbackGroup()
        for typ, name, run in ((AcquireObservation, "acquire_observation", self._acquire),
                               (SearchPerson, "search_person", self._search),
                               (Handoff, "handoff", self._handoff), (FollowPerson, "follow_person", self._follow)):
            ActionServer(self, typ, SERVICES[name], execute_callback=self._execute(typ, run),
                         goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=lambda _g: CancelResponse.ACCEPT,
                         handle_accepted_callback=self._accepted, callback_group=group, **server_qos())
        self.get_logger().info(f"nav ready: policy={self.p['policy']} execution={self.execution}")

    # ------------------------------------------------------------------ goal bookkeeping
    def _accepted(self, handle) -> None:
        with self._lock:
            self._active = handle  # a running goal sees it is no longer active and stops (preemption)
        handle.execute()

    def _execute(self, typ, run):
        def execute(handle):
            # the preempted goal finishes its step first; a goal overtaken while it waits leaves at once, so a
            # burst of goals holds no executor thread that a further goal request needs (all get an answer)
            deadline = time.monotonic() + float(self.p["timeout_s"])
            while not self._idle.wait(0.05) and self._active is handle and time.monotonic() < deadline:
                pass
            idle = self._idle.is_set()
            with self._lock:
                if self._active is not handle or not idle:
                    self._end(handle, "abort")
                    why = ("preempted by a newer goal" if self._active is not handle
                           else "the previous goal did not stop within timeout_s")
                    return self._result(typ, Outcome.ABORTED, f"{why} before it started")
                self._idle.clear()
            try:
                outcome, message, fields = run(handle)
            except Exception as exc:  # noqa: BLE001 - the goal ends with the reason, the node keeps serving
                outcome, message, fields = Outcome.ABORTED, f"{type(exc).__name__}: {exc}", {}
                self.get_logger().error(f"{typ.__name__} failed: {message}")
            finally:
                self._stop_base()  # whatever ended the motion: done, cancel, preemption, abort, an exception
                if self.episode is not None and self.episode.outcome is not None:
                    self.episode = None  # an ended episode leaves nothing to continue: free its frames now
                self._idle.set()
            if self._halted:
                outcome, message = Outcome.ABORTED, "the nav node is shutting down"
                self._end(handle, "abort")
            elif outcome == Outcome.CANCELLED and handle.is_cancel_requested:
                self._end(handle, "canceled")
            elif outcome == Outcome.CANCELLED:  # stopped because a newer goal arrived
                outcome, message = Outcome.ABORTED, "preempted by a newer goal"
                self._end(handle, "abort")
            elif outcome in (Outcome.ABORTED, Outcome.POLICY_ERROR):
                self._end(handle, "abort")
            else:
                self._end(handle, "succeed")
            return self._result(typ, outcome, message, **fields)

        return execute

    def _end(self, handle, how: str) -> None:
        end_goal(handle, how, self.get_logger().warning)

    @staticmethod
    def _result(typ, outcome: str, message: str, **fields):
        res = typ.Result()
        res.outcome, res.message = outcome, message
        for k, v in fields.items():
            setattr(res, k, v)
        return res

    def _stopped(self, handle) -> bool:
        return self._halted or handle.is_cancel_requested or self._active is not handle

    def _run(self, ep: ActiveEpisode, handle, until: str, n_clip: int, typ) -> str:
        """``ep.run`` for a goal; an exception (odometry lost, a missing frame) aborts the episode with
        its reason, keeping its trajectory and diagnostics for the result."""
        try:
            return ep.run(until, n_clip, lambda: self._stopped(handle), self._feedback(typ, handle))
        except Exception as exc:  # noqa: BLE001 - reported in the result, the node keeps serving
            self._stop_base()
            if self._halted and not self.context.ok():  # the shutdown destroyed what the episode was using
                return ep.abort("the nav node is shutting down")
            self.get_logger().error(f"{typ.__name__} aborted: {type(exc).__name__}: {exc}")
            return ep.abort(f"{type(exc).__name__}: {exc}")

    def _feedback(self, typ, handle):
        def publish(ep: ActiveEpisode) -> None:
            fb = typ.Feedback()
            fb.stage = ep.stages[-1] if ep.stages else "search"
            fb.actions_used = len(ep.log.actions)
            fb.planner_calls_used = ep.log.planner_calls
            fb.path_length = ep.log.path_length
            seen, xy, dist = sighting_feedback(ep.last)
            fb.person_detected = seen
            if seen:
                fb.person.x, fb.person.y, fb.person_distance = xy[0], xy[1], dist
            else:
                fb.person_distance = math.nan
            publish_feedback(handle, fb, self.get_logger().warning)

        return publish

    def _policy(self, name: str) -> Policy:
        name = name or self.p["policy"]
        if name not in POLICIES:
            raise InvalidInput("policy", name, f"one of {POLICIES.names()}", where="nav")
        if name not in self._policies:
            self._policies[name] = create_policy(name, lambda: DETECTORS.create(self.p["detector"]))
        return self._policies[name]

    def _start(self, goal, handle) -> ActiveEpisode:
        """A new episode from the bridge's current state and the goal's non-privileged fields (each bounded)."""
        for field in ("max_actions", "max_planner_calls"):
            if getattr(goal, field) > MAX_GOAL_COUNT:
                raise InvalidInput(field, getattr(goal, field), f"a count <= {MAX_GOAL_COUNT} (0 = protocol default)",
                                   where="nav")
        for field, most in (("episode_id", 128), ("policy", 128), ("target_description", 256)):
            if len(getattr(goal, field)) > most:
                raise InvalidInput(field, f"{len(getattr(goal, field))} characters", f"at most {most}", where="nav")
        self.episode = None  # the previous episode's buffers go now, not when this one ends
        timeout = float(self.p["timeout_s"])
        slop = float(self.p["sync_slop_s"])
        if self.execution != "lockstep":
            robot = CmdVelRobot(self.io, self._publish_cmd, self.limits, float(self.p["robot_radius"]), timeout,
                                float(self.p["odom_timeout"]), slop, interrupted=lambda: self._stopped(handle),
                                publish_head=self._publish_head)
        else:
            # the world the evaluator has just loaded (load_world answers once its messages are acknowledged):
            # take them in first, so that the episode never starts from the last frame of the world before
            self.io.drain(timeout)
            robot = LockstepRobot(self.io, timeout, slop)
        info = robot.episode_info(goal.target_description)
        until = float(getattr(goal, "stream_until", 0.0))  # AcquireObservation only
        if not 0.0 <= until <= MAX_STREAM_S:
            raise InvalidInput("stream_until", until, f"seconds in [0, {MAX_STREAM_S}] (0: no stream)", where="nav")
        self.episode = ActiveEpisode(robot, info, self._policy(goal.policy), goal.max_actions or MAX_ACTIONS,
                                     goal.max_planner_calls or MAX_PLANNER_CALLS, self.mover,
                                     stream_until=until or None)
        return self.episode

    def _publish_cmd(self, linear: float, angular: float) -> None:
        """One ``/cmd_vel`` command (m/s, rad/s in ``base_link``); zero once the node shuts down."""
        msg = Twist()
        if not self._halted:
            msg.linear.x, msg.angular.z = float(linear), float(angular)
        self._send_cmd(msg)

    def _publish_head(self, tilt: float) -> None:
        """A head command (the tilt in rad, + looks down; the pan at 0, ahead) as a joint trajectory
        controller takes it: one point, reached within one protocol step; none once the node shuts down."""
        if self._halted:
            return
        msg = JointTrajectory(joint_names=list(HEAD_JOINTS))
        msg.points = [JointTrajectoryPoint(positions=[0.0, float(tilt)],
                                           time_from_start=DurationMsg(nanosec=int(STEP_SECONDS * 1e9)))]
        self._head_pub.publish(msg)

    def _stop_base(self) -> None:
        """Zero ``/cmd_vel``, twice (a lossy link loses one); many bases keep the last command otherwise."""
        if self._cmd_pub is not None:
            for _ in range(2):
                self._send_cmd(Twist())

    def _send_cmd(self, msg: Twist) -> None:
        """Publish on ``/cmd_vel``; once the context is shut down the publisher is gone and nothing is sent
        (the zero went out at the signal, :meth:`stop_job`, before the shutdown); an error otherwise raises."""
        try:
            self._cmd_pub.publish(msg)
        except Exception:  # rclpy's InvalidHandle / RCLError for a destroyed publisher
            if self.context.ok():
                raise

    def stop_job(self, grace: float) -> bool:
        """Shutdown (SIGINT, SIGTERM): the base is told to stop at once (on the first call) and the zero's
        delivery is awaited, then the running goal ends; both within ``grace`` s. Returns whether the goal
        ended (:func:`affectsim_core.ros.node_main.run_node` calls it again, after the shutdown, if not)."""
        deadline = time.monotonic() + grace
        if not self._halted:
            self._halted = True
            self._stop_base()
            self._await_zero(grace)
        return self._idle.wait(max(0.0, deadline - time.monotonic()))

    def _await_zero(self, timeout: float) -> None:
        """Send the zero again every :data:`ZERO_RESEND_S` until every reliable ``/cmd_vel`` subscriber
        acknowledged it, for up to ``timeout`` s: once this process is gone, a base that was not listening
        (a driver paused, a link down) never gets it, and DDS itself repairs a lost sample only at its
        next heartbeat (Fast DDS: every 3 s)."""
        if self._cmd_pub is None:
            return
        log = self.get_logger()
        log.info(f"stopping: zero sent on {self._cmd_pub.topic_name}, awaiting its acknowledgement "
                 f"(up to {timeout:.1f} s)")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if self._cmd_pub.wait_for_all_acked(Duration(seconds=max(0.0, min(ZERO_RESEND_S, left)))):
                return
            if left <= ZERO_RESEND_S:
                break
            self._send_cmd(Twist())
        log.warning(f"stopping: the zero on {self._cmd_pub.topic_name} was not acknowledged within "
                    f"{timeout:.1f} s; only the base's own command timeout can stop it now")

    def _diagnostics(self, ep: ActiveEpisode) -> dict:
        stream = {"stream_stamps": [to_time(t) for t, _ in ep.stream],
                  "stream_frames": [image_msg(f, "rgb8", OPTICAL_FRAME, to_time(t)) for t, f in ep.stream]}
        return {**diagnostics_to_msg(ep.log.diagnostics()),
                "trajectory": [Pose2DMsg(x=x, y=y, theta=th) for _, x, y, th in ep.log.trajectory],
                "clip_stamps": [to_time(t) for t in ep.times], **self._clip(ep), **(stream if ep.stream else {})}

    @staticmethod
    def _clip(ep: ActiveEpisode) -> dict:
        """The acquired clip's recognizer input (8 sampled 224x224 frames) and their camera poses."""
        clip = ep.result().clip if ep.outcome == Outcome.HANDOFF else None
        if clip is None or not clip.frames:
            return {}
        idx = sample_indices(len(clip.frames))
        return {"clip_frames": [image_msg(f, "rgb8", OPTICAL_FRAME, to_time(t))
                                for f, t in zip(clip.sampled(), clip.times[idx])],
                "clip_camera_poses": [matrix_pose_msg(clip.camera_poses[i]) for i in idx]}

    # ------------------------------------------------------------------ the four actions
    def _acquire(self, handle):
        goal = handle.request
        _check_clip_frames(goal.clip_frames)
        ep = self._start(goal, handle)
        if ep.outcome is None:
            self._run(ep, handle, "clip", goal.clip_frames, AcquireObservation)
        return ep.outcome, ep.message, self._diagnostics(ep)

    def _search(self, handle):
        ep = self._start(handle.request, handle)
        out = ep.outcome or self._run(ep, handle, "sighting", 0, SearchPerson)
        seen, xy, dist = sighting_feedback(ep.last)
        fields = {"actions": len(ep.log.actions), "planner_calls": ep.log.planner_calls, "path_length": ep.log.path_length,
                  "person_distance": dist if seen else math.nan}
        if seen:
            fields["person"] = Point(x=xy[0], y=xy[1])
        return ("found" if out == "reached" else out), ep.message, fields

    def _continuing(self) -> ActiveEpisode:
        if self.episode is None or self.episode.outcome is not None:
            raise InvalidInput("episode", None if self.episode is None else self.episode.outcome,
                               "a running episode: send SearchPerson (or AcquireObservation) first", where="nav")
        return self.episode

    def _handoff(self, handle):
        ep = self._continuing()
        out = self._run(ep, handle, "handoff", 0, Handoff)
        step = ep.log.handoff_step
        return (Outcome.HANDOFF if out == "reached" else out), ep.message, {
            "handoff_step": -1 if step is None else step, "actions": len(ep.log.actions), "path_length": ep.log.path_length}

    def _follow(self, handle):
        ep = self._continuing()
        if ep.log.handoff_step is None:
            raise InvalidInput("episode", "no handoff yet", "a handed-off episode: send Handoff first", where="nav")
        _check_clip_frames(handle.request.clip_frames)
        out = self._run(ep, handle, "clip", handle.request.clip_frames, FollowPerson)
        return out, ep.message, {"clip_stamps": [to_time(t) for t in ep.times], "path_length": ep.log.path_length}

    def destroy_node(self) -> None:
        if getattr(self, "_cmd_pub", None) is not None and not self._halted:  # stop_job stopped it on a signal
            self._halted = True
            self._stop_base()
        for p in getattr(self, "_policies", {}).values():  # absent when __init__ failed on a bad parameter
            p.close()
        if getattr(self, "io", None) is not None:
            self.io.close()
        super().destroy_node()

