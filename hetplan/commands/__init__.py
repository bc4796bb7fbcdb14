"""The orchestration of commands that are more than one library call (``estimate``, ``gate``, ``simulate``),
behind :mod:`hetplan.api`: the CLI parses flags and renders, the API calls these, so the CLI's ``--json`` is the
API's result (tests/cli/test_json_matches_api.py)."""
