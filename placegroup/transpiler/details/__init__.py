"""``fluid.transpiler.details``: the transpiler's helpers that Fluid 1.8 exposes: program
printing and op searches (program_utils), union-find (ufind), TCP readiness (checkport) and
records of distributed vars (vars_distributed)."""
from placegroup.transpiler.details.checkport import wait_server_ready
from placegroup.transpiler.details.program_utils import (block_to_code, delete_ops, find_op_by_input_arg,
                                                         find_op_by_output_arg, get_indent_space, op_to_code,
                                                         program_to_code, variable_to_code)
from placegroup.transpiler.details.ufind import UnionFind
from placegroup.transpiler.details.vars_distributed import VarDistributed, VarsDistributed, VarStruct
from placegroup.ir.variable import Variable

__all__ = ["UnionFind", "VarDistributed", "VarStruct", "Variable", "VarsDistributed", "block_to_code", "delete_ops",
           "find_op_by_input_arg", "find_op_by_output_arg", "get_indent_space", "op_to_code", "program_to_code",
           "variable_to_code", "wait_server_ready"]
