"""torchfl-gen: turns a YAML chip spec into a PyTorch device backend package."""

__version__ = "0.1.0"
