"""``fluid.evaluator`` at its module path; placegroup/composite/evaluator.py has the code."""
from placegroup.composite.evaluator import *  # noqa: F401,F403
from placegroup.composite.evaluator import __all__  # noqa: F401
from placegroup.composite.evaluator import (Constant, Evaluator, LayerHelper, Program, Variable,  # noqa: F401
                                            program_guard)
