"""The tasks the trainer runs: base.Task is the contract; one module per experiment kind."""
