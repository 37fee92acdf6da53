"""trace-tui: a reproducible appliance for the TRACE release."""

__version__ = "0.1.0"
