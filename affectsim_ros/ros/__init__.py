"""Thin ROS 2 helpers: loopback-only environment, message conversions. Import only where ROS is used."""
