"""hetplan: capacity planning for LLM serving on heterogeneous GPU fleets."""

__version__ = "0.1.0"
