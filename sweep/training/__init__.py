"""The pure trainer: compiled block programs, block state, the one training loop, block checkpoints.

```python
block, state = init_block(spec, seeds=[0, 1, 2])
for state, history in fit(block, state):       # one compiled chunk per report
    save_block(f"ckpt/{int(state.epoch[0])}", spec=spec, state=state, history=history,
               shapes=data_shapes(load_data(spec)))
```
"""

from .._batches import equal_parts as equal_parts
from .._batches import in_parts as in_parts
from .._batches import joined as joined
from .._batches import padded as padded
from .._batches import pieces as pieces
from ._block import Block as Block
from ._block import BlockOptions as BlockOptions
from ._block import init_block as init_block
from ._block import member_keys as member_keys
from ._block import model_of as model_of
from ._block import reader_wait as reader_wait
from ._block import run_chunk as run_chunk
from ._block import state_skeleton as state_skeleton
from ._budget import data_budget as data_budget
from ._checkpoint import BlockRef as BlockRef
from ._checkpoint import SavedBlock as SavedBlock
from ._checkpoint import find_blocks as find_blocks
from ._checkpoint import load_block as load_block
from ._checkpoint import read_block as read_block
from ._checkpoint import save_block as save_block
from ._data_checks import check_data as check_data
from ._data_checks import load_data as load_data
from ._layout import LAYOUTS as LAYOUTS
from ._layout import default_layout as default_layout
from ._layout import layout_devices as layout_devices
from ._layout import members_mesh as members_mesh
from ._layout import on_devices as on_devices
from ._layout import pad_members as pad_members
from ._loop import History as History
from ._loop import chunks as chunks
from ._loop import fit as fit
from ._loop import train as train
from ._loop import train_block as train_block
from ._memory import compiled_bytes as compiled_bytes
from ._memory import state_bytes as state_bytes
from ._program import Shapes as Shapes
from ._program import TrainState as TrainState
from ._program import data_shapes as data_shapes
from ._rollout import rollout_steps as rollout_steps
from ._rollout import window_step as window_step
from ._stream import WindowPosition as WindowPosition
from ._stream import data_line as data_line
from ._stream import device_data_bytes as device_data_bytes
from ._windows import WindowPlan as WindowPlan
