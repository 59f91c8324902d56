"""The manifest: YAML -> a validated ``Manifest``; value types with ranges."""
