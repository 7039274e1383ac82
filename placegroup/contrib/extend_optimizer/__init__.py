"""Fluid 1.8's ``fluid.contrib.extend_optimizer``: optimizers extended with decoupled weight
decay (``extend_with_decoupled_weight_decay``)."""
from placegroup.contrib.extend_optimizer import extend_optimizer_with_weight_decay  # noqa: F401
from placegroup.contrib.extend_optimizer.extend_optimizer_with_weight_decay import extend_with_decoupled_weight_decay

__all__ = ["extend_with_decoupled_weight_decay"]
