"""Cost reports (terminal, Markdown, HTML, JSON) and the CI cost gate, built from typed plans only: one typed report
model (:mod:`hetplan.report.types`) that every format renders by attribute; the plan's open blocks are read in
:mod:`hetplan.report.plan_fields` alone."""
