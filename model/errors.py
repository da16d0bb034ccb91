"""Errors a user of the model package can cause, with messages meant to be read."""


class ConfigError(ValueError):
    """A configuration is invalid; `problems` lists every problem found, not only the first."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid model config: " + "; ".join(self.problems))


class ArtifactError(ValueError):
    """A model directory is missing, incomplete, tampered with or inconsistent with its config."""
