"""``ros2 launch affectsim bench.launch.py [scene:=...] [mode:=lockstep|free_run] ...``

Same graph, parameter file and argument checks as ``affectsim launch bench``
(affectsim_ros/graph.py). Every node keeps DDS on loopback.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from affectsim_ros.graph import GRAPHS, LAUNCH_ARGUMENTS, default_params_file, validate_launch_args


def _nodes(context):
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in LAUNCH_ARGUMENTS}
    overrides = validate_launch_args(values)  # raises naming the bad argument
    params = LaunchConfiguration("params_file").perform(context)
    return [
        Node(package="affectsim", executable=spec.executable, name=spec.name, output="screen",
             parameters=[params, overrides.get(spec.name, {})])
        for spec in GRAPHS["bench"]
    ]


def generate_launch_description() -> LaunchDescription:
    args = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                  **({"choices": list(a.choices)} if a.choices else {}))
            for a in LAUNCH_ARGUMENTS]
    args.append(DeclareLaunchArgument("params_file", default_value=str(default_params_file()),
                                      description="YAML parameter file for every node"))
    return LaunchDescription([
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
        SetEnvironmentVariable("MUJOCO_GL", "egl"),
        *args,
        OpaqueFunction(function=_nodes),
    ])
