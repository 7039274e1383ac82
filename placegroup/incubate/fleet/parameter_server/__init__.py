"""Fleet in parameter-server mode; ``distribute_transpiler`` holds the ``fleet`` object."""
