"""One benchmark episode, evaluated (level 2 of :mod:`affectsim_eval`; imports ``scoring`` only).

The passive settings and the ground truth they need (:mod:`~affectsim_eval.episode.passive`), the
privileged reference observer P-Ref (:mod:`~affectsim_eval.episode.reference`), the one orchestrator
(:mod:`~affectsim_eval.episode.orchestrator`) over an ``EvalWorld``: in-process
(:mod:`~affectsim_eval.episode.worlds`) or the ROS graph (:mod:`~affectsim_eval.episode.ros_eval_world`),
social measures among reactive people (:mod:`~affectsim_eval.episode.social`), window streams of evolving
episodes (:mod:`~affectsim_eval.episode.streams`) and the optional MCAP recording of A-Obs
(:mod:`~affectsim_eval.episode.recording`).
"""
