"""``datapipe ablate``: train small proxy LMs on candidate mixtures of a finished run and pick one.

Modules: ``manifest`` (the ablation YAML), ``mixtures`` (explicit / grid / Dirichlet candidates),
``data`` (per-domain pools from the run's tokens, held-out sets, per-mixture training sets),
``model`` + ``train`` (PyTorch proxy or an external command), ``runner`` (resume, Dask),
``analysis`` (ranking, plot, RegMix-style regression -> ``mix:`` block), ``cli``.
PyTorch is needed only by the built-in trainer (the ``torch`` extra).
"""
