"""Curation: dataset manifests, discovery sources and agent, the three-round review."""
