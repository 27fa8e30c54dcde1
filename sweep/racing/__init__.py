"""The race of adaptive seeds (:class:`sweep.Adaptive`): its statistics, its rounds, its records
and what it says, in one package; no Ray, no files (docs: How-to guides > Adaptive seeds).

* :mod:`._rank_test`: the exact one-sided Wilcoxon-Mann-Whitney test and the level of each round
  (rule ``"rank"``).
* :mod:`._mean_interval`: the bootstrap interval of a configuration's mean (rule ``"interval"``).
* :mod:`._race`: the records (:class:`Race`, :class:`Evaluation`, :class:`Standing`), the rules'
  levels and the race's steps (:func:`next_step`, :func:`evaluate`, :func:`simulate`).
* :mod:`._table`: the race a store records, as a table and a title.

:func:`sweep.run` drives the race between rounds (``sweep.tune``), the store records it
(``manifest.json`` ``race``), :meth:`sweep.Ensemble.race` reads it back.
"""

from ._mean_interval import Interval as Interval
from ._mean_interval import mean_interval as mean_interval
from ._mean_interval import min_seeds as min_seeds
from ._race import ENDS as ENDS
from ._race import RULES as RULES
from ._race import STATUSES as STATUSES
from ._race import Evaluation as Evaluation
from ._race import Key as Key
from ._race import Race as Race
from ._race import Standing as Standing
from ._race import Step as Step
from ._race import decides as decides
from ._race import evaluate as evaluate
from ._race import first_decision as first_decision
from ._race import guarantee as guarantee
from ._race import interval_level as interval_level
from ._race import interval_seed as interval_seed
from ._race import members_trained as members_trained
from ._race import next_step as next_step
from ._race import over as over
from ._race import rank_levels as rank_levels
from ._race import rule_of as rule_of
from ._race import simulate as simulate
from ._rank_test import worse_p as worse_p
from ._table import race_table as race_table
from ._table import race_title as race_title
