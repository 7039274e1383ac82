"""``fluid.initializer`` at its module path; placegroup/model/initializer.py has the code."""
from placegroup.model.initializer import (Bilinear, BilinearInitializer, Constant,  # noqa: F401
                                          ConstantInitializer, Initializer, MSRA, MSRAInitializer,
                                          Normal, NormalInitializer, NumpyArrayInitializer,
                                          TruncatedNormal, TruncatedNormalInitializer, Uniform,
                                          UniformInitializer, Xavier, XavierInitializer, var_seed)
