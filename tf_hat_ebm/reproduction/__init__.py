"""The paper's reproduction as resumable stages and a report (experiments/reproduce.py).

`stages` holds the stage table per scale with the paper's numbers, `runner` runs the stages (each
the user's own script in a subprocess) and decides when one is done, `report` turns the stages'
records into tables, checks, markdown and JSON, `command` defines the script's flags and
`pipeline` is its one call.
"""
