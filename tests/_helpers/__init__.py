"""Helpers shared by the test modules: plain functions and data, imported from here (fixtures live in
the conftest.py files). A test module imports no other test module; tests/test_structure.py keeps it so."""
