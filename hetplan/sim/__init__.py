"""Request-level discrete-event simulation of a plan, scheduling policies (FCFS, SJF, EDF, CASCADE) and metrics."""
