"""The executor: runs a Program's ops over a Scope (installed as ``placegroup.executor``)."""
from placegroup.executor.executor import Executor
from placegroup.executor.fluid_helpers import (FetchHandler, as_numpy, check_feed_shape_type,
                                               dimension_is_compatible_with, dtype_is_compatible_with,
                                               has_feed_operators, has_fetch_operators)
from placegroup.executor.scope import Scope, global_scope, scope_guard

__all__ = ["Executor", "Scope", "global_scope", "scope_guard"]
__all__ += ["FetchHandler", "as_numpy", "check_feed_shape_type", "dimension_is_compatible_with",
            "dtype_is_compatible_with", "has_feed_operators", "has_fetch_operators"]
