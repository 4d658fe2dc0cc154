"""``ros2 launch affectsim bench.launch.py [episodes:=100] [split:=test] [recognizers:=a,b] ...``

Same graph, parameter file and argument checks as ``affectsim launch bench``
(affectsim_ros/graph.py): bridge, nav, perception and the evaluator, which runs the episodes,
writes the report and exits, and the launch shuts down with it (exit status 1 if the evaluator
failed or stored failed episodes). Every node keeps DDS on loopback.
"""

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
    UnsetEnvironmentVariable,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from affectsim_core.errors import InvalidInput
from affectsim_core.plugins import load_plugins
from affectsim_core.ros.env import loopback_env
from affectsim_core.ros.shm import clean_stale
from affectsim_ros.graph import GRAPHS, LAUNCH_ARGUMENTS, default_params_file, launch_remaps, validate_launch_args


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in LAUNCH_ARGUMENTS}
    overrides = validate_launch_args(values, "bench")  # raises naming the bad argument
    if values["graphs"] != "1":  # one launch is one ROS domain: the parts of a run need one each
        raise InvalidInput("launch argument graphs", values["graphs"], "1 with ros2 launch: start N launches, each "
                           "with its own ROS_DOMAIN_ID and shard:=k/N (k = 0..N-1) into the same output_dir, or "
                           "`affectsim launch bench graphs:=N`, which does that")
    params = LaunchConfiguration("params_file").perform(context)
    nodes = {spec.name: Node(package="affectsim", executable=spec.executable, output="screen",  # no name=: see launcher.py
                             parameters=[params, overrides.get(spec.name, {})], remappings=launch_remaps(values))
             for spec in GRAPHS["bench"]}
    done = RegisterEventHandler(OnProcessExit(target_action=nodes["evaluator"], on_exit=_evaluator_exited))
    return [*nodes.values(), done]


def _clean_shared_memory(_context):
    clean_stale()  # Fast DDS files that killed processes left in /dev/shm (the pip launcher does the same)
    return []


def _evaluator_exited(event, _context):
    """The launch ends with the evaluator; a non-zero exit (episodes stored as failed, or the run stopped)
    is raised, which makes ``ros2 launch`` shut down and exit 1 like ``affectsim launch``."""
    if event.returncode != 0:
        raise RuntimeError(f"the evaluator exited with status {event.returncode}: episodes failed or the run stopped "
                           "(see its log and report.md; rerun with retry_failed:=true)")
    return [EmitEvent(event=Shutdown(reason="evaluation finished"))]


def generate_launch_description() -> LaunchDescription:
    load_plugins()  # users' policies, recognizers, backends (entry points, $AFFECTSIM_PLUGINS) are launch choices
    args = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                  **({"choices": a.accepted()} if a.choices else {}))
            for a in LAUNCH_ARGUMENTS]
    args.append(DeclareLaunchArgument("params_file", default_value=str(default_params_file()),
                                      description="YAML parameter file for every node"))
    return LaunchDescription([
        UnsetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE"),  # it adds sockets on every interface
        # the project's loopback profile, whatever the shell set (a missing profile file is refused)
        SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", loopback_env()["FASTDDS_DEFAULT_PROFILES_FILE"]),
        SetEnvironmentVariable("MUJOCO_GL", "egl"),
        *args,
        OpaqueFunction(function=_clean_shared_memory),
        OpaqueFunction(function=_nodes),
    ])
