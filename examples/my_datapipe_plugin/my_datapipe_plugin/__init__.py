"""An example datapipe plugin: the ``shouting`` stage and the ``doc_lengths`` phase.

Importing this package registers both with datapipe (``datapipe.stage.register``,
``datapipe.phase.register_phase``), so a manifest can name them. Worker processes must import it
too: a local cluster's workers re-import the script that started the run (so import this package
at the top of that script), and on your own cluster start workers with
``dask worker --preload my_datapipe_plugin``.
"""
from my_datapipe_plugin.phase import DocLengthsPhase
from my_datapipe_plugin.stage import ShoutingStage

__all__ = ["DocLengthsPhase", "ShoutingStage"]
