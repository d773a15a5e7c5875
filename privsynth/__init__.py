"""privsynth: differentially private synthetic tables that keep low-order marginals."""

__version__ = "0.1.0"
