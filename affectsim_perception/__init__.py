"""Level 3: what the observer sees and concludes (imports ``affectsim_core`` alone; never ``affectsim_nav``).

Frozen person models (:mod:`~affectsim_perception.person_model`: BlazePose from mediapipe 0.10.14's
TFLite models, run by :mod:`~affectsim_perception.blazepose`; segmentation), the recognizers and
their registry (:mod:`affectsim_perception.recognizers`), and the perception node
(:mod:`~affectsim_perception.perception_node`).

Importing the package registers the person detector ``blazepose`` (in
:data:`affectsim_core.person_tracking.DETECTORS`) and the shipped recognizers.
"""

from affectsim_perception import person_model, recognizers  # noqa: F401  (register the detector and recognizers)
