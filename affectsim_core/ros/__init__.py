"""ROS 2 plumbing shared by every node: loopback-only environment, message conversions, topic names,
parameter declaration, TF lookup, the node entry point and a blocking client of the bridge.

Import only where ROS is used: these modules import ``rclpy`` and message packages, except
:mod:`~affectsim_core.ros.topics` (the interface's names, plain strings) and
:mod:`~affectsim_core.ros.env` (environment variables).
"""
