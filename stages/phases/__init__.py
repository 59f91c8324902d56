"""Global phases: work over the whole run after phase 1 (dedup, mix + tokenize, exports, the report).
Each registers a ``datapipe.phase.Phase``; the runner iterates them and knows none by name."""
