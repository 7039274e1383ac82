"""``fluid.layers.control_flow``: Fluid's control-flow layers. None is implemented yet.

Scripts import the module by this path; each of Fluid 1.8's names in it (``less_than``,
``increment``, ``While``, ...) raises ``NotImplementedInPlacegroup``. A name implemented later
in ``placegroup.layers`` joins ``__all__`` here too.
"""
__all__: list[str] = []
