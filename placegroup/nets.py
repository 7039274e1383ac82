"""``fluid.nets``: Fluid's composite networks. None is implemented yet.

Each of Fluid 1.8's names here (``simple_img_conv_pool``, ``img_conv_group``, ``glu``,
``scaled_dot_product_attention``, ``sequence_conv_pool``) raises ``NotImplementedInPlacegroup``
(``placegroup.compat.install_gaps``); docs/fluid_compat.md lists what placegroup has.
"""
__all__: list[str] = []
