"""``fluid.trainer_factory`` at its module path; placegroup/runtime/trainer_factory.py has the code."""
from placegroup.runtime.trainer_factory import *  # noqa: F401,F403
from placegroup.runtime.trainer_factory import __all__  # noqa: F401
from placegroup.runtime.trainer_factory import (DistMultiTrainer, DownpourSGD, DownpourSGDOPT,  # noqa: F401
                                                Hogwild, MultiTrainer, PipelineTrainer, Section,
                                                Variable)
