"""The race of adaptive seeds (:class:`sweep.Adaptive`): its statistics, its rounds, its records
and what it says, in one package; no Ray, no files (docs: How-to guides > Adaptive seeds).

* :mod:`._rank_test`: the exact one-sided Wilcoxon-Mann-Whitney test and the level of each round
  (rule ``"rank"``).
* :mod:`._mean_interval`: the bootstrap interval of a configuration's mean (rule ``"interval"``).
* :mod:`._records`: what a race keeps (:class:`Race`, :class:`Evaluation`, :class:`Standing`).
* :mod:`._rules`: the levels of each rule, which rule a race follows, its first decision.
* :mod:`._race`: the race's steps (:func:`next_step`, :func:`evaluate`, :func:`simulate`).
* :mod:`._headline`: the race's one line (:func:`headline`), which ``sweep plan``, the live
  display, the end of a run and ``sweep show`` all print.
* :mod:`._display`: the live display's rows and line (:class:`RaceStep`).
* :mod:`._table`: the race a store records, as a table and a title.

:func:`sweep.run` drives the race between rounds (``sweep.tune``), the store records it
(``manifest.json`` ``race``), :meth:`sweep.Ensemble.race` reads it back.
"""

from ._display import RaceStep as RaceStep
from ._display import rows as rows
from ._display import standing_line as standing_line
from ._headline import decides as decides
from ._headline import guarantee as guarantee
from ._headline import headline as headline
from ._mean_interval import Interval as Interval
from ._mean_interval import mean_interval as mean_interval
from ._mean_interval import min_seeds as min_seeds
from ._race import Step as Step
from ._race import evaluate as evaluate
from ._race import members_trained as members_trained
from ._race import next_step as next_step
from ._race import over as over
from ._race import simulate as simulate
from ._rank_test import worse_p as worse_p
from ._records import ENDS as ENDS
from ._records import RULES as RULES
from ._records import STATUSES as STATUSES
from ._records import Evaluation as Evaluation
from ._records import Key as Key
from ._records import Race as Race
from ._records import Standing as Standing
from ._rules import first_decision as first_decision
from ._rules import interval_level as interval_level
from ._rules import interval_seed as interval_seed
from ._rules import rank_levels as rank_levels
from ._rules import rule_of as rule_of
from ._table import race_table as race_table
from ._table import race_title as race_title
