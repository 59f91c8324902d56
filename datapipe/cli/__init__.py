"""The ``datapipe`` command line: one module per command."""
