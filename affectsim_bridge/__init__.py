"""The world: scenes, navigable space, simulator backends (MuJoCo default), sensors, the bridge node."""
