"""The ensemble store (SPEC §7): Arrow tables plus Equinox leaves files, never pickle.

Files of a committed store (``<sweep>/ensembles/``, see :mod:`sweep.store._layout` for how it
is replaced atomically)::

    members.parquet     one row per member, sorted by config_id, then by the vmapped
                        hyperparameter values (names sorted), then by seed: member_id,
                        config_id, seed, trial_id, one column per grid key (``depth``,
                        ``learning_rate``, ...), status (ok / diverged / stopped_early), epochs,
                        train_loss, test_loss (final), train_loss_history, test_loss_history,
                        history_epochs (list columns); row groups of <= 65536 rows
    configs.parquet     one row per structural config: config_id, spec (JSON), num_members,
                        first_member, members_per_shard, files, sample_shape, out_channels, num_train
    <config_id>.eqx     eqx.tree_serialise_leaves of the config's stacked parameters, members in
                        members.parquet order; past the shard size, instead
    <config_id>/shard-NNNNN.eqx   consecutive runs of members_per_shard members
    manifest.json       format, counts, grid columns, sha256 and size of every file, missing members

```python
store = Store.open("runs/heat")            # a sweep directory or its ensembles/ directory
store.members(["seed", "test_loss"])       # pyarrow.Table
params = store.read(config_id, [0, 1, 2])  # NumPy leaves with a leading member axis
```
"""

from ._layout import FORMAT as FORMAT
from ._reader import ConfigInfo as ConfigInfo
from ._reader import Store as Store
from ._writer import StoreWriter as StoreWriter
