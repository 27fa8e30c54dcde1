"""The ensemble store: aggregation of block checkpoints into Arrow tables plus Equinox leaves
(never pickle), written as atomic generations, and its reader, which verifies every file it
reads against the manifest and runs no code a store names.

```python
sweep.aggregate("runs/heat")               # block checkpoints -> runs/heat/ensembles
store = Store.open("runs/heat")            # a sweep directory or its ensembles/ directory
store.members(["seed", "test_loss"])       # pyarrow.Table
params = store.read(config_id, [0, 1, 2])  # NumPy leaves with a leading member axis
store.verify()                             # every file's sha256, no unlisted file or link
```

Every file is named in :mod:`sweep._layout`, every column in :mod:`._schema`.
"""

from ._aggregate import DEFAULT_SHARD_BYTES as DEFAULT_SHARD_BYTES
from ._aggregate import MapTasks as MapTasks
from ._aggregate import aggregate_blocks as aggregate_blocks
from ._aggregate import aggregated_blocks as aggregated_blocks
from ._aggregate import made_of as made_of
from ._aggregate import sweep_sources as sweep_sources
from ._aggregate import write_store as write_store
from ._driver import Driver as Driver
from ._driver import Driving as Driving
from ._driver import driver_of as driver_of
from ._driver import live_driver as live_driver
from ._generations import committed_root as committed_root
from ._generations import generations_dir as generations_dir
from ._generations import sweeps_inside as sweeps_inside
from ._manifest import read_manifest as read_manifest
from ._reader import ConfigInfo as ConfigInfo
from ._reader import Store as Store
from ._samples import write_samples as write_samples
from ._schema import FIXED_COLUMNS as FIXED_COLUMNS
from ._schema import FORMAT as FORMAT
from ._schema import SAMPLE_COUNT as SAMPLE_COUNT
from ._schema import SCORE_COLUMNS as SCORE_COLUMNS
from ._schema import SETTING_COLUMNS as SETTING_COLUMNS
from ._schema import TRAJECTORY_COUNT as TRAJECTORY_COUNT
from ._schema import curves_by_column as curves_by_column
from ._schema import gain_column as gain_column
from ._schema import history_column as history_column
from ._schema import rollout_column as rollout_column
from ._schema import rollout_curves_by_column as rollout_curves_by_column
from ._schema import scores_schema as scores_schema
from ._sweepdir import SweepDir as SweepDir
from ._verify import unlisted as unlisted
from ._writer import StoreWriter as StoreWriter
