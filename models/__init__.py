"""The models layer: the registry, each source beside its backend, the demo model, samples."""
