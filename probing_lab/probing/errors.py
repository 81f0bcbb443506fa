"""The probing package's error, in a leaf module that every part of it may import."""


class ExperimentError(ValueError):
    """An experiment file with an unknown key, task, layer or model."""
