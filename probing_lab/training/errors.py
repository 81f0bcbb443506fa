"""The errors of corpus building and training data, shared by the readers and the trainer."""


class CorpusError(ValueError):
    """A source that cannot be read, or a corpus too small to use."""


class SourceFormatError(ValueError):
    """A member of a recognised package that does not have the expected format (the message names it)."""
