"""``fluid.optimizer`` at its module path: the optimizers and their wrappers are in
placegroup/model/optimizer.py, the parameter averages in placegroup/runtime/averaging.py."""
from placegroup.model.optimizer import *  # noqa: F401,F403
from placegroup.runtime.averaging import ExponentialMovingAverage, ModelAverage  # noqa: F401

__all__ = ["Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adam", "AdamOptimizer", "Adamax",
           "AdamaxOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Dpsgd", "DpsgdOptimizer",
           "ExponentialMovingAverage", "Ftrl", "FtrlOptimizer", "Lamb", "LambOptimizer", "LarsMomentum",
           "LarsMomentumOptimizer", "LookaheadOptimizer", "ModelAverage", "Momentum", "MomentumOptimizer",
           "Optimizer", "RMSProp", "RMSPropOptimizer", "RecomputeOptimizer", "SGD", "SGDOptimizer"]
