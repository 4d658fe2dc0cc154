"""``ros2 launch affectsim robot.launch.py [execution:=cmd_vel] [depth_topic:=/head_camera/depth/image] ...``

Same graph, parameter file and argument checks as ``affectsim launch robot`` (affectsim_ros/graph.py):
the nav and perception nodes on a robot's own topics (no simulator, no evaluator, no ground truth).
Primitive actions go to ``/cmd_vel`` (``execution:=cmd_vel``, the default here) or goals to Nav2
(``execution:=nav2``); ``*_topic:=`` arguments remap the Fetch names to the robot's. Every node keeps
DDS on loopback unless ``FASTDDS_DEFAULT_PROFILES_FILE`` is already set (the robot's own profile).
"""


from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable, UnsetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from affectsim_core.plugins import load_plugins
from affectsim_core.ros.env import loopback_env
from affectsim_ros.graph import (
    GRAPH_DEFAULTS,
    GRAPHS,
    LAUNCH_ARGUMENTS,
    default_params_file,
    launch_remaps,
    validate_launch_args,
)

ROBOT_ARGUMENTS = [a for a in LAUNCH_ARGUMENTS if a.remap is not None or a.node in ("nav", "perception")]


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in ROBOT_ARGUMENTS}
    overrides = validate_launch_args(values, "robot")  # raises naming the bad argument
    params = LaunchConfiguration("params_file").perform(context)
    return [Node(package="affectsim", executable=spec.executable, output="screen",  # no name=: see launcher.py
                 parameters=[params, overrides.get(spec.name, {})], remappings=launch_remaps(values))
            for spec in GRAPHS["robot"]]


def generate_launch_description() -> LaunchDescription:
    load_plugins()
    defaults = GRAPH_DEFAULTS["robot"]
    args = [DeclareLaunchArgument(a.name, default_value=defaults.get(a.name, a.default), description=a.description,
                                  **({"choices": a.accepted()} if a.choices else {}))
            for a in ROBOT_ARGUMENTS]
    args.append(DeclareLaunchArgument("params_file", default_value=str(default_params_file()),
                                      description="YAML parameter file for every node"))
    # the robot's own middleware is respected, with a warning (a missing profile file is refused)
    env = loopback_env(robot=True)
    return LaunchDescription([
        UnsetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE"),
        SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", env["FASTDDS_DEFAULT_PROFILES_FILE"]),
        SetEnvironmentVariable("RMW_IMPLEMENTATION", env["RMW_IMPLEMENTATION"]),
        *args,
        OpaqueFunction(function=_nodes),
    ])
