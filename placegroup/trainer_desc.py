"""``fluid.trainer_desc`` at its module path; placegroup/runtime/trainer_desc.py has the code."""
from placegroup.runtime.trainer_desc import *  # noqa: F401,F403
from placegroup.runtime.trainer_desc import __all__  # noqa: F401
from placegroup.runtime.trainer_desc import (AdjustInsWeightConfig, CopyTableConfig,  # noqa: F401
                                             DownpourWorkerParameter, FetchConfig,
                                             HogwildWorkerParameter, PLACES, ProgramConfig,
                                             PullDenseWorkerParameter, SectionConfig,
                                             SectionWorkerParameter, TableDependencyMap,
                                             TableParameter, TrainerDescMsg)
