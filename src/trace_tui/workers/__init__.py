"""What each container stage worker is and can do (registry), and the offline recomputation of the scores the
scoring workers record (one module per recomputer). Below the stages, the recipes and verify in the import graph:
they all read the table, and verify recomputes scores without importing a worker."""
