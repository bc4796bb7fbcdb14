"""Combo-level autoscaling: load curves over time windows and the schedule of combos that follows them."""
