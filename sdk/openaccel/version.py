"""The openaccel version (kept apart so every module can import it cheaply)."""

__version__ = "0.1.0"
