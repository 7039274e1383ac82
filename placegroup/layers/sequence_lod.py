"""``fluid.layers.sequence_lod``: Fluid 1.8's module of the sequence layers.

placegroup defines them in sequence.py and sequence_pad.py; ``compat.install_surface`` puts
here, as the same objects, those of Fluid's names placegroup has.
"""
