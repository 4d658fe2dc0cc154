"""What the simulator plays, built, checked and previewed (level 3 of :mod:`affectsim_bridge`; imports
``humans``, ``world`` and ``backends``).

The motion library (:mod:`~affectsim_bridge.content.library`: clips plus a manifest, built from a seed,
dyadic placements as the backends' ``HumanPlacement``), its validation
(:mod:`~affectsim_bridge.content.validate`, ``affectsim motions validate``), motion previews rendered
through a backend (:mod:`~affectsim_bridge.content.preview`) and the procedural scenes
(:mod:`~affectsim_bridge.content.scene_generator`, ``affectsim scenes build``: generated, checked,
previewed).
"""
