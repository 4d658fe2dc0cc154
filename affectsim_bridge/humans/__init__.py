"""Affective humans: skeleton, performer bodies, avatar geometry, motion clips (level 1 of
:mod:`affectsim_bridge`; imports no other part of it).

The skeleton and forward kinematics (:mod:`~affectsim_bridge.humans.skeleton`), bodies
(:mod:`~affectsim_bridge.humans.body`), motion clips (:mod:`~affectsim_bridge.humans.motion`), how emotion
shapes motion (:mod:`~affectsim_bridge.humans.styles`), the procedural generator and evolving affect
(:mod:`~affectsim_bridge.humans.generator`, :mod:`~affectsim_bridge.humans.evolving`), BVH export and import
(:mod:`~affectsim_bridge.humans.bvh`), kinematic features (:mod:`~affectsim_bridge.humans.features`) and
reactive people (:mod:`~affectsim_bridge.humans.reactive`). The motion library, its validation and
previews need a backend and are in :mod:`affectsim_bridge.content`.
"""
