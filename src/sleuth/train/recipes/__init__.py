"""Recipes: the distill-then-RL pipeline behind the shipped model, as library code.

A recipe is a typed :class:`~sleuth.train.recipes.config.RecipeConfig` (presets in
:data:`~sleuth.train.recipes.config.RECIPES`: ``cpu-small``, ``cuda``, ``smoke``) run by
:func:`~sleuth.train.recipes.run.run_recipe`: teacher runs and the SFT filter, SFT, CISPO,
the held-out evaluations and the report (``sleuth train recipe NAME --index --out --data``).
Modules: ``config`` (settings and presets), ``data`` (corpus, index, task pools), ``stages``
(evaluations, SFT, RL, the manifest), ``analysis`` (drift, KL, sampler speed), ``report``
(table, gains, plot), ``run`` (the steps in order).
"""

from sleuth.train.recipes.config import RECIPES, RecipeConfig
from sleuth.train.recipes.run import run_recipe

__all__ = ["RECIPES", "RecipeConfig", "run_recipe"]
