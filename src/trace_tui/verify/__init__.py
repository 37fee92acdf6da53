"""Offline verification: release files and hashes (release.py), aggregation (aggregate.py),
release page tables (tables.py), and campaign checks (campaign.py).

Imports nothing at package level so that each caller pays only for what it uses.
"""
