"""The executor: runs a Program's ops over a Scope (installed as ``placegroup.executor``)."""
from placegroup.executor.executor import Executor
from placegroup.executor.scope import Scope, global_scope, scope_guard

__all__ = ["Executor", "Scope", "global_scope", "scope_guard"]
