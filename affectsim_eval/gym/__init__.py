"""Level 5 of :mod:`affectsim_eval`: a Gymnasium environment over the evaluator's world (imports ``run``,
``dataset``, ``episode``), for training observation policies (docs/gym.md).

Importing this package registers :data:`ENV_ID` with Gymnasium, so ``import affectsim_eval.gym`` then
``gymnasium.make("affectsim/ActiveObservation-v0", split=..., family=..., humans=...)``; or, without
the import, ``gymnasium.make("affectsim_eval.gym:affectsim/ActiveObservation-v0", ...)``. The
environment (:mod:`~affectsim_eval.gym.env`), its spaces (:mod:`~affectsim_eval.gym.spaces`) and its
rewards (:mod:`~affectsim_eval.gym.rewards`, ``REWARDS``).
"""

from __future__ import annotations

import gymnasium

ENV_ID = "affectsim/ActiveObservation-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point="affectsim_eval.gym.env:ActiveObservationEnv")
