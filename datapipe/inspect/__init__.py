"""Reading a finished run: ``inspect``, decision rules, the HTML report."""
