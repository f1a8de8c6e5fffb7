"""Records, enumerations and message parts of the runtime graph."""

from contextledger.records.enums import *  # noqa: F403
from contextledger.records.enums import __all__ as _enums_all
from contextledger.records.models import *  # noqa: F403
from contextledger.records.models import __all__ as _models_all
from contextledger.records.parts import *  # noqa: F403
from contextledger.records.parts import __all__ as _parts_all

__all__ = [*_enums_all, *_models_all, *_parts_all]
