"""Cost reports (terminal, Markdown, HTML, JSON) and the CI cost gate, built from plan documents only."""
