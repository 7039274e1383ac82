"""Fleet (Fluid 1.8's ``fluid.incubate.fleet``): role makers in ``base``, the parameter-server
fleet in ``parameter_server.distribute_transpiler``, over placegroup's DistributeTranspiler
(docs/distributed.md, "Fleet's parameter-server API")."""
