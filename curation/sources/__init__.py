"""Discovery sources: one client per host, each turning that host's JSON into `Candidate`s.

Zenodo, Hugging Face and Kaggle are searched live (base URLs from MMBU_ZENODO_URL, HF_ENDPOINT,
MMBU_KAGGLE_URL); Papers with Code is an offline index (MMBU_PWC_INDEX) whose hits are `Lead`s.
"""
from mmbu.curation.sources.candidate import SOURCES, Candidate, Lead, SourceRef, SourceResponseError

__all__ = ["SOURCES", "Candidate", "Lead", "SourceRef", "SourceResponseError"]
