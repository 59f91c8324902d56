"""The Python API: ``datapipe.Pipeline``, ``datapipe.dedup``, ``Stage.apply``."""
