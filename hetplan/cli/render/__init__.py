"""What the commands print: rich tables and summary lines built from the documents :mod:`hetplan.api` returns.

Renderers take the console to print on and never compute plan figures; nothing here imports a command module.
"""
