"""Recipes: the pydantic models of a recipe file (`schema`), where a recipe file is wrong, by line and field
(`yaml_lines`), and loading, checking against the release lock and resolving (`catalog`)."""
