"""Scores, ROS-free and without I/O (level 1 of :mod:`affectsim_eval`; imports no other part of it).

:mod:`~affectsim_eval.scoring.metrics`: the benchmark metrics of docs/protocol.md §8 in ``METRICS``
(Macro-F1, Δgain, OGR, Recovery Rate, E-SPL@r, Table 6, ``d_star``);
:mod:`~affectsim_eval.scoring.affect_metrics`: measures of evolving affect (segments, transitions) and of
continuous VAD; :mod:`~affectsim_eval.scoring.paper`: the paper's published reference values.
"""
