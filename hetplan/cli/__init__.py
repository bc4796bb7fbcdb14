"""Command-line interface (typer): parse, call :mod:`hetplan.api`, render. No arithmetic here."""
