"""AffectSim-ROS benchmark package: core types, ROS helpers, node graph, launcher and CLI."""

__version__ = "0.1.0"
