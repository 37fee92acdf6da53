"""Signing and checking what the appliance writes as evidence: its key and the keys a site trusts
(securesystemslib), in-toto Statements and their DSSE envelopes."""
