"""What is built from layers: ``fluid.nets`` (nets.py), ``fluid.evaluator`` (evaluator.py) and
the top-level input layers ``fluid.data``, ``fluid.embedding`` and ``fluid.one_hot`` (input.py).
Fluid's names for them are the façade's modules."""
