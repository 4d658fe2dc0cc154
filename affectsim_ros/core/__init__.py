"""ROS-free core shared by every AffectSim package: geometry, registries, errors."""
