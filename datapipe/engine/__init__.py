"""The engine: planning, phase-1 tasks, lineage, markers, the output lock, the end-of-run check."""
