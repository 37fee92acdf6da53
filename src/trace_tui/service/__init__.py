"""The service layer: what the faces (the command line, the TUI) ask for, as typed requests, and the one place
of each policy they share: the campaign folder, the requirements check, the GPU plan, opening a campaign and
whether it is live, the Slurm submission. Below it the engine, verify and the cluster code take plain values,
never a parsed command line; above it the faces turn flags or forms into requests and render the outcomes."""
