"""AffectSim-ROS application (level 5): the `affectsim` command, the node executables, the node graphs, the
pip-only launcher, `affectsim observe` and the benches (core types live in `affectsim_core`)."""

__version__ = "0.1.0"
