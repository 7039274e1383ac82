"""Op test tables, one module per op family; tests/op_cases.py gathers them."""
