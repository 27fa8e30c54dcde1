"""Model registry: pdequinox architectures and ConvEncoder by name, user factories, fast batched forwards."""

from ._encoder import ConvEncoder as ConvEncoder
from ._fast import batched_forward as batched_forward
from ._registry import ACTIVATIONS as ACTIVATIONS
from ._registry import ARCHITECTURES as ARCHITECTURES
from ._registry import MODELS as MODELS
from ._registry import build_model as build_model
from ._registry import check_model as check_model
from ._registry import check_output as check_output
from ._registry import model_template as model_template
