"""The Textual terminal UI: hardware, recipes, preview, steps, run, verify.

Everything the UI does is also a CLI command; the UI drives the same engine
objects as the headless mode and receives its backends (hardware probe,
runner factory, release directory...) through its constructor.
"""
