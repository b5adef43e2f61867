"""The expert taxonomy (`taxonomy.yaml`) and its loader: the vocabulary every stage speaks.

Public names: `Taxonomy`, `Term`, `load_taxonomy`, `TaxonomyError`.
"""
from mmbu.taxonomy.model import Facet, Taxonomy, TaxonomyError, Term, load_taxonomy

__all__ = ["Facet", "Taxonomy", "TaxonomyError", "Term", "load_taxonomy"]
