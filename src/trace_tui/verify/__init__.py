"""Offline verification: a release directory (release.py runs the checks: trust.py the hash
chain, content.py the content checks, checklist.py the result), aggregation (aggregate.py),
release page tables (tables.py), and campaign checks (campaign.py).

Imports nothing at package level so that each caller pays only for what it uses.
"""
