"""Solvers: the MILP layer and the Cauchy combo planner."""
